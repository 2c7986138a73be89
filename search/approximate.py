"""The approximate index: faiss' inverted file over the encodings.

faiss-cpu (Meta's library; on PyPI with wheels for Linux, macOS and
Windows that need nothing but NumPy) rather than ScaNN, whose wheels are
built for Linux only: the zoo runs wherever TensorFlow does. faiss' plain
inverted-file index has one knob (`nprobe`) that trades recall for speed
in a way that is easy to state and to measure.

`IndexIVFFlat` with the inner product: `nlist` k-means cells (about
4·√n), every encoding stored exactly in its cell, and a query scores the
items of its `nprobe` nearest cells only. For a "cosine" model the
encodings and queries are normalised first, so inner products are the
model's cosines; a "dot" model's are used as they are. Scores of the
items it returns are therefore exact; what it may miss are neighbours in
cells it did not visit (recall, measured by `tools.bench_search`). Its
memory is the encodings' (4 bytes per dimension and item) plus the
centroids. Models whose similarity is not a product ("model" metric) get
no approximate index.

An index of at least `AUTO_ITEMS` items gets one by default (see
docs/search.md for the measurement behind the threshold).
"""

import math
from pathlib import Path

import numpy as np

from common.errors import InputError
from search.model import normalize
from search.store import read_shard

# Exact search of one query over 100,000 1024-d encodings takes about 0.1 s
# on 2 cores (docs/search.md); above that, the approximate index pays off.
AUTO_ITEMS = 100_000
DEFAULT_NPROBE = 32
FILE = "approximate.faiss"
CHOICES = ("auto", "always", "never")
TRAINING_POINTS_PER_CELL = 64


def cells(items):
    """The number of k-means cells for `items` encodings."""
    return max(1, min(int(4 * math.sqrt(items)), items // 39 or 1))


def wanted(choice, items, metric, argument="--approximate"):
    """Whether an index of `items` items gets an approximate index under
    `choice` (auto, always, never); "always" for a model whose similarity is
    not a product is an error."""
    if choice == "always" and metric == "model":
        raise InputError(f"{argument} always: the model's similarity is not a dot product or cosine of its "
                         "encodings, so only exact search serves it")
    return metric != "model" and (choice == "always" or (choice == "auto" and items >= AUTO_ITEMS))


def build(encodings_blocks, items, metric, nlist=None, nprobe=DEFAULT_NPROBE, seed=0):
    """A trained and filled `faiss.IndexIVFFlat` over the encodings.

    Args:
      encodings_blocks: a function returning a fresh iterator over float32
        [n, E] blocks of all the encodings, in the index's row order (read
        twice: a sample for k-means, then every row).
      items: their total number.
      metric: "dot" or "cosine".
    """
    faiss = _faiss()
    nlist = nlist or cells(items)
    sample_size = min(items, nlist * TRAINING_POINTS_PER_CELL)
    chosen = np.sort(np.random.default_rng(seed).choice(items, sample_size, replace=False))
    sample, start = [], 0
    for block in encodings_blocks():
        inside = chosen[(chosen >= start) & (chosen < start + len(block))] - start
        sample.append(_prepared(block[inside], metric))
        start += len(block)
    sample = np.concatenate(sample)
    quantizer = faiss.IndexFlatIP(sample.shape[1])
    index = faiss.IndexIVFFlat(quantizer, sample.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.train(sample)
    for block in encodings_blocks():
        index.add(_prepared(block, metric))
    index.nprobe = nprobe
    return index


def search(index, queries, k, metric, nprobe=None):
    """(scores float32 [n, k], rows int64 [n, k]) of the `k` best items
    for each query; rows are -1 past the items found."""
    if nprobe is not None:
        index.nprobe = nprobe
    return index.search(_prepared(queries, metric), k)


def build_for_index(shard_paths, items, manifest, choice):
    """Builds, writes and describes (the manifest's `approximate` entry)
    the approximate index of a finished build's shards, or returns None
    when `choice` does not want one (`wanted`)."""
    metric = manifest["model"]["metric"]
    if not wanted(choice, items, metric):
        return None
    faiss = _faiss()

    def blocks():
        return (read_shard(path, ("encodings",))["encodings"] for path in shard_paths)

    index = build(blocks, items, metric)
    folder = Path(shard_paths[0]).parent
    partial = folder / (FILE + ".tmp")
    faiss.write_index(index, str(partial))
    partial.replace(folder / FILE)
    return {"library": f"faiss-cpu {faiss.__version__}", "index": "IndexIVFFlat", "file": FILE,
            "nlist": index.nlist, "nprobe": index.nprobe}


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
