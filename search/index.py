"""`Index`: build an index of images or captions and search it.

    from search import Index

    index = Index.build("runs/gru-quick/saved_model", "photos.index", images="photos/")
    for hit in index.search("a dog running on the beach", k=5):
        print(f"{hit.score:.3f} {hit.item}")

Exact search (the default below `search.approximate.AUTO_ITEMS` items)
scores every item: the query encodings times the shards' encodings for a
"dot" or "cosine" model, the export's `similarity` on every pair for the
others, one block of items at a time, keeping the best `k` of each query,
so memory is one shard and one block of scores whatever the index's size.

An index of a two-stage export ranks in two stages (`common.reranking`):
its first stage proposes each query's best max(k, `rerank_k`) items
(exactly or approximately, as above), its second stage scores the first
`rerank_k` of them (their encodings read from the shards' `.rerank.npy`
memory maps) and they are ranked by those scores; the other proposals
follow in the first stage's order, scored below the list
(`common.reranking.tail_scores`), as the export's `score` scores them.
"""

import collections
from pathlib import Path

import numpy as np
import tensorflow as tf

from common import reranking
from common.errors import InputError, error_reason
from search import approximate, store
from search.build import CAPTIONS_FILE, build_index
from search.model import SearchModel, encode_image_files, normalize

Hit = collections.namedtuple("Hit", "id score item")
Hit.__doc__ = ("One search result: its id (an image's path under the folder, a caption's line number), its score "
               "under the model's similarity (a two-stage index's: its two-stage score), and the item (the image "
               "file's path, or the caption).")

ITEM_BLOCK = 4096  # items scored at once against QUERY_BLOCK queries: 16 MB of float32 scores
QUERY_BLOCK = 1024
PAIRWISE_ITEM_BLOCK = 512  # a pairwise model runs its network on every (query, item) pair of a block
PAIRWISE_QUERY_BLOCK = 64


class Index:
    """A finished index (`search.store` describes the folder) with the
    model it was built with."""

    def __init__(self, folder, manifest, model):
        self.folder = Path(folder)
        self.manifest = manifest
        self.model = model
        self.kind = manifest["kind"]
        self.metric = manifest["model"]["metric"]
        # A two-stage index's list length (None: one stage).
        self.rerank_k = manifest["model"].get("rerank_k")
        self._shards = [self.folder / shard["file"] for shard in manifest["shards"]]
        self._shard_starts = np.cumsum([0] + [shard["items"] for shard in manifest["shards"]])
        self._rerank_encodings = None
        self.ids = np.concatenate([store.read_shard(path, ("ids",))["ids"] for path in self._shards])
        if self.kind == "captions":
            self._captions = (self.folder / CAPTIONS_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        self._approximate = None

    @classmethod
    def build(cls, saved_model, path, images=None, captions=None, approximate="auto"):
        """Encodes the JPEG/PNG images under the folder `images` (or the
        captions of the file `captions`, one a line) with the SavedModel
        `saved_model` (a path, or a `search.model.SearchModel`) into a new
        index at `path`, resuming an interrupted build; `approximate`
        ("auto", "always", "never") adds an approximate index (auto: from
        `search.approximate.AUTO_ITEMS` items). Returns the `Index`."""
        model = saved_model if isinstance(saved_model, SearchModel) else SearchModel(saved_model)
        build_index(model, path, images, captions, approximate)
        return cls.open(path, model)

    @classmethod
    def open(cls, path, saved_model=None):
        """The finished index at `path`, with the model recorded in it or
        `saved_model` (a path or a `SearchModel`), which must be the same
        model (its fingerprint). A missing or damaged shard, an unfinished
        index or another model is an `InputError`."""
        manifest = store.read_manifest(path)
        if not manifest.get("complete"):
            raise InputError(f"{path}: an unfinished index; run its build again to complete it")
        for shard in manifest["shards"]:
            file = Path(path) / shard["file"]
            if not file.is_file():
                raise InputError(f"{file}: shard missing; build the index again")
            if file.stat().st_size != shard["bytes"]:
                raise InputError(f"{file}: damaged shard ({file.stat().st_size} bytes; the index wrote "
                                 f"{shard['bytes']}); build the index again")
            rerank = store.rerank_file(file)
            if "rerank_bytes" in shard and (not rerank.is_file() or rerank.stat().st_size != shard["rerank_bytes"]):
                raise InputError(f"{rerank}: missing or damaged (the index wrote {shard['rerank_bytes']} bytes); "
                                 "build the index again")
        recorded = manifest["model"]
        if saved_model is None:
            if not Path(recorded["path"]).is_dir():
                raise InputError(f"{path}: its model {recorded['path']} is gone; give the same model's "
                                 "SavedModel (--saved-model)")
            saved_model = recorded["path"]
        model = saved_model if isinstance(saved_model, SearchModel) else SearchModel(saved_model)
        if model.fingerprint != recorded["fingerprint"]:
            raise InputError(f"{path}: built with another model ({recorded['path']}, fingerprint "
                             f"{recorded['fingerprint']}); {model.path} has fingerprint {model.fingerprint}")
        return cls(path, manifest, model)

    def __len__(self):
        return len(self.ids)

    def item(self, row):
        """What row `row` is: an image file's path, or a caption."""
        if self.kind == "images":
            return str(Path(self.manifest["source"]) / self.ids[row])
        return self._captions[int(self.ids[row]) - 1]

    def encode_queries(self, queries):
        """The encodings of queries of the other side than the items: texts
        for an index of images; image files, or image features [n, F]
        (a NumPy array), for an index of captions. A text the model
        refuses (longer than it takes) is an `InputError`."""
        if self.kind == "images":
            if isinstance(queries, np.ndarray) or not all(isinstance(query, str) for query in queries):
                raise InputError("an index of images is searched with texts")
            if not all(query.strip() for query in queries):
                raise InputError("a query text is empty")
            try:
                return self.model.encode_texts(queries)
            except tf.errors.InvalidArgumentError as error:  # e.g. longer than the model takes
                which = "the query text" if len(queries) == 1 else "a query text"
                raise InputError(f"the model refuses {which} ({error_reason(error)})") from None
        if isinstance(queries, np.ndarray):
            return self.model.encode_image_features(queries)
        self.model.check_takes_images("--image")
        encodings, _, skipped = encode_image_files(self.model, [str(query) for query in queries],
                                                   lambda name: Path(name).read_bytes())
        if skipped:
            raise InputError(f"{skipped[0][0]}: {skipped[0][1]}")
        return encodings

    def search(self, queries, k=10, exact=False, ef_search=None):
        """The best `k` items of each query, best first: a list of `Hit`s
        for one query (a string: a text, or an image file for an index of
        captions), a list of such lists for a sequence of queries (or an
        array of image features [n, F]).

        `exact` searches exactly even where the index has an approximate
        index; `ef_search` sets how many candidates its graph search keeps
        (more: higher recall, slower), for this call only."""
        one = isinstance(queries, (str, Path))
        encodings = self.encode_queries([queries] if one else queries)
        search = self.search_rows if self.rerank_k is None else self.rerank_rows
        rows, scores = search(encodings, k, exact, ef_search)
        hits = [[Hit(str(self.ids[row]), float(score), self.item(row)) for row, score in zip(best, best_scores)
                 if row >= 0] for best, best_scores in zip(rows, scores)]
        return hits[0] if one else hits

    def search_rows(self, query_encodings, k, exact=False, ef_search=None):
        """(rows int [n, k], scores float32 [n, k]) of the best `k` items of
        each encoded query, best first (rows -1 when the index is smaller)."""
        entry = self.manifest.get("approximate")
        if entry and not exact:
            if self._approximate is None:
                self._approximate = approximate.load(self.folder, entry)
            scores, rows = approximate.search(self._approximate, query_encodings, k, self.metric, ef_search)
            return rows, scores
        return self._exact(query_encodings, k)

    def rerank_rows(self, query_encodings, k, exact=False, ef_search=None):
        """`search_rows` of a two-stage index (the module docstring), on
        queries encoded by both stages (side by side)."""
        query_side = "text" if self.kind == "images" else "image"
        first, second = self.model.split(query_encodings, query_side)
        proposed, _ = self.search_rows(first, max(k, self.rerank_k), exact, ef_search)
        rows, scores = np.full((len(first), k), -1, np.int64), np.full((len(first), k), -np.inf, np.float32)
        for query, found in enumerate(proposed):
            found = found[found >= 0]
            listed = found[: self.rerank_k]
            items, queries = self._rerank_encodings_of(listed), np.repeat(second[query : query + 1], len(listed), axis=0)
            listed_scores = (self.model.rerank_score_pairs(items, queries) if self.kind == "images" else
                             self.model.rerank_score_pairs(queries, items))
            # The proposals numbered in the order of their rows (the index's), as candidates are.
            by_row = np.sort(found)
            ranking, ranked_scores = reranking.two_stage_ranking(np.searchsorted(by_row, found)[None],
                                                                 listed_scores[None])
            rows[query, : min(k, len(found))] = by_row[ranking[0, :k]]
            scores[query, : min(k, len(found))] = ranked_scores[0, :k]
        return rows, scores

    def _rerank_encodings_of(self, rows):
        """The second stage's encodings of the items `rows`, read from the
        shards' memory-mapped `.rerank.npy` files."""
        if self._rerank_encodings is None:
            self._rerank_encodings = [np.load(store.rerank_file(path), mmap_mode="r") for path in self._shards]
        shards = np.searchsorted(self._shard_starts, rows, side="right") - 1
        return np.stack([self._rerank_encodings[shard][row - self._shard_starts[shard]]
                         for shard, row in zip(shards, rows)])

    def _exact(self, query_encodings, k):
        pairwise = self.metric == "model"
        item_block, query_block = ((PAIRWISE_ITEM_BLOCK, PAIRWISE_QUERY_BLOCK) if pairwise
                                   else (ITEM_BLOCK, QUERY_BLOCK))
        if self.metric == "cosine":
            query_encodings = normalize(query_encodings)
        n = len(query_encodings)
        best_rows = np.full((n, k), -1, np.int64)
        best_scores = np.full((n, k), -np.inf, np.float32)
        offset = 0
        for path in self._shards:
            encodings = store.read_shard(path, ("encodings",))["encodings"]
            for start in range(0, len(encodings), item_block):
                block = encodings[start : start + item_block]
                if self.metric == "cosine":
                    block = normalize(block)
                rows = np.arange(offset + start, offset + start + len(block))
                for a in range(0, n, query_block):
                    scores = self._scores(query_encodings[a : a + query_block], block)
                    best_rows[a : a + query_block], best_scores[a : a + query_block] = _top(
                        np.concatenate([best_rows[a : a + query_block], np.broadcast_to(rows, scores.shape)], axis=1),
                        np.concatenate([best_scores[a : a + query_block], scores], axis=1), k)
            offset += len(encodings)
        return best_rows, best_scores

    def _scores(self, queries, items):
        """float32 [n_queries, n_items] under the model's similarity."""
        if self.metric != "model":
            return queries @ items.T
        if self.kind == "images":
            return self.model.similarity(items, queries).T
        return self.model.similarity(queries, items)


def _top(rows, scores, k):
    """The `k` best columns of each row, best first; ties by the lower row
    (the index's order)."""
    order = np.lexsort((rows, -scores), axis=1)[:, :k]
    return np.take_along_axis(rows, order, axis=1), np.take_along_axis(scores, order, axis=1)
