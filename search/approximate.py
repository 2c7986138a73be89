"""The approximate index: faiss' HNSW graph over the encodings.

faiss-cpu (Meta's library; on PyPI with wheels for Linux, macOS and
Windows that need nothing but NumPy) rather than ScaNN, whose wheels are
built for Linux only: the zoo runs wherever TensorFlow does.

`IndexHNSWFlat` with the inner product: every encoding stored exactly, in
a hierarchical navigable small-world graph of `M` links per node; a query
walks the graph keeping the `ef_search` best candidates it has met.
Chosen over faiss' inverted files (`IndexIVFFlat`) by a measurement on
encodings of the quick gru's profile (docs/search.md): where nearest
neighbours are not much nearer than the rest, as in the zoo's joint
spaces, an inverted file must visit most cells to find 95% of the top 10,
and then is no faster than a scan; the graph is. For a "cosine" model the
encodings and queries are normalised first, so inner products are the
model's cosines; a "dot" model's are used as they are. The scores of the
items it returns are exact; it may miss neighbours (recall, measured by
`tools.bench_search`). Its memory is the encodings' (4 bytes per dimension
and item) plus the graph's 8·M bytes per item; building it is the slow
part (about an hour for 1M 1024-d encodings on 2 cores, docs/search.md).
Models whose similarity is not a product ("model" metric) get no
approximate index.

An index of at least `AUTO_ITEMS` items gets one by default (see
docs/search.md for the measurement behind the threshold).
"""

from pathlib import Path

import numpy as np

from common.errors import InputError
from search.model import normalize
from search.store import read_shard

# Exact search of one query over 100,000 1024-d encodings took 1.3 s on 2
# cores (docs/search.md); from there on, the graph pays off.
AUTO_ITEMS = 100_000
LINKS = 32  # M
EF_CONSTRUCTION = 80
DEFAULT_EF_SEARCH = 256  # recall@10 0.975 on 100,000 synthetic encodings of the hard profile (bench_search)
FILE = "approximate.faiss"


def wanted(choice, items, metric, argument="--approximate"):
    """Whether an index of `items` items gets an approximate index under
    `choice` (auto, always, never); "always" for a model whose similarity is
    not a product is an error."""
    if choice == "always" and metric == "model":
        raise InputError(f"{argument} always: the model's similarity is not a dot product or cosine of its "
                         "encodings, so only exact search serves it")
    return metric != "model" and (choice == "always" or (choice == "auto" and items >= AUTO_ITEMS))


def build(encodings_blocks, metric, links=LINKS, ef_construction=EF_CONSTRUCTION, ef_search=DEFAULT_EF_SEARCH):
    """A filled `faiss.IndexHNSWFlat` over the encodings, given as an
    iterable of float32 [n, E] blocks in the index's row order."""
    faiss = _faiss()
    index = None
    for block in encodings_blocks:
        if index is None:
            index = faiss.IndexHNSWFlat(block.shape[1], links, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
        index.add(_prepared(block, metric))
    index.hnsw.efSearch = ef_search
    return index


def search(index, queries, k, metric, ef_search=None):
    """(scores float32 [n, k], rows int64 [n, k]) of the `k` best items
    for each query; rows are -1 past the items found. `ef_search` holds
    for this call only: the index keeps its own for later searches."""
    params = None if ef_search is None else _faiss().SearchParametersHNSW(efSearch=max(ef_search, k))
    return index.search(_prepared(queries, metric), k, params=params)


def build_for_index(shard_paths, items, manifest, choice):
    """Builds, writes and describes (the manifest's `approximate` entry)
    the approximate index of a finished build's shards, or returns None
    when `choice` does not want one (`wanted`)."""
    metric = manifest["model"]["metric"]
    if not wanted(choice, items, metric):
        return None
    faiss = _faiss()

    index = build((read_shard(path, ("encodings",))["encodings"] for path in shard_paths), metric)
    folder = Path(shard_paths[0]).parent
    partial = folder / (FILE + ".tmp")
    faiss.write_index(index, str(partial))
    partial.replace(folder / FILE)
    return {"library": f"faiss-cpu {faiss.__version__}", "index": "IndexHNSWFlat", "file": FILE,
            "links": LINKS, "ef_construction": EF_CONSTRUCTION, "ef_search": index.hnsw.efSearch}


def load(folder, entry):
    faiss = _faiss()
    path = Path(folder) / entry["file"]
    try:
        return faiss.read_index(str(path))
    except RuntimeError as error:
        raise InputError(f"{path}: damaged approximate index ({str(error).splitlines()[0]}); "
                         "build the index again") from None


def _faiss():
    """The faiss module, imported on first use: it takes half a second to
    load, and most indexes have no approximate index."""
    import faiss

    return faiss


def _prepared(encodings, metric):
    encodings = np.ascontiguousarray(encodings, np.float32)
    return np.ascontiguousarray(normalize(encodings), np.float32) if metric == "cosine" else encodings
