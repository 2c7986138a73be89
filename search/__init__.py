"""Search over a collection: an index of a folder of images (or of a
caption file) encoded with an exported model, queried by text (or by
image). `python -m search` is its command line, `search.beam` its Apache
Beam pipeline; docs/search.md describes both and the `Index` API."""

from search.index import Hit, Index

__all__ = ["Hit", "Index"]
