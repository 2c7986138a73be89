"""The data shipped in the repository: Flickr8k in the precomp layout (see
`data/f8k_precomp/README.md`) and the GloVe 6B 50-d vectors of its
vocabulary (`data/glove_6b_50d/`)."""

from pathlib import Path

_HERE = Path(__file__).resolve().parent

EMBEDDED_DATA = str(_HERE / "f8k_precomp")
EMBEDDED_GLOVE_50D = str(_HERE / "glove_6b_50d" / "glove.6B.50d.flickr8k.txt")
