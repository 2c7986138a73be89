"""Search over a collection: an index of a folder of images (or of a
caption file) encoded with an exported model, queried by text (or by
image). `python -m search` is its command line, `search.beam` its Apache
Beam pipeline; docs/search.md describes both and the `Index` API.

`search.Index` and `search.Hit` are `search.index`'s, imported on first
use: the command line starts TensorFlow quietly (`common.startup`) only if
nothing imported it before."""

__all__ = ["Hit", "Index"]


def __getattr__(name):
    if name in __all__:
        from search import index

        return getattr(index, name)
    raise AttributeError(f"module 'search' has no attribute {name!r}")
