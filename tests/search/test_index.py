"""`search.Index` on hand-built exports: every search against brute-force
NumPy over the exports' own encodings, for the three kinds of similarity;
skipped files; the resumption of an interrupted build; the approximate
index against the exact ranking."""

import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from search import Index, build, store
from search import index as index_module
from tests.search.hand_exports import MAX_WORDS, good_images, pixels

QUERIES = ["a dog runs on the beach", "two children", "a man rides a bike on a road", "snow"]
CAPTIONS = ["a dog runs", "a dog runs", "a girl in a pink dress", "children play in water", "a black dog",
            "a man on a bicycle", "snow and mountains"]


def brute_force_top(scores, k):
    """The `k` best columns of each row of a [queries, items] matrix: a
    stable sort on the negated scores (ties by the lower column)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def assert_same_hits(got, expected):
    """Lists of hits (or lists of lists): the same items, in the same order,
    with the same scores to float32 rounding."""
    flat = [(got, expected)] if got and not isinstance(got[0], list) else list(zip(got, expected))
    for got_hits, expected_hits in flat:
        assert [(hit.id, hit.item) for hit in got_hits] == [(hit.id, hit.item) for hit in expected_hits]
        np.testing.assert_allclose([hit.score for hit in got_hits], [hit.score for hit in expected_hits], rtol=1e-5,
                                   atol=1e-6)


def similarity_matrix(kind, images, texts):
    """[n_images, n_texts] under the hand exports' similarities, in NumPy."""
    if kind == "dot":
        return images @ texts.T
    if kind == "cosine":
        return (images / np.linalg.norm(images, axis=1, keepdims=True)) @ (
            texts / np.linalg.norm(texts, axis=1, keepdims=True)).T
    return -np.abs(images[:, None, :] - texts[None, :, :]).sum(axis=2)


@pytest.mark.parametrize("kind", ["cosine", "dot", "pairwise"])
def test_an_image_index_finds_what_brute_force_finds(kind, exports, photos, tmp_path):
    index = Index.build(exports[kind], tmp_path / "index", images=photos)
    images = good_images(photos)
    assert sorted(index.ids) == sorted(images)
    assert index.metric == {"cosine": "cosine", "dot": "dot", "pairwise": "model"}[kind]
    assert index.manifest["skipped"] == [["a/broken.jpg", index.manifest["skipped"][0][1]],
                                         ["empty.jpeg", index.manifest["skipped"][1][1]]]
    assert "not a decodable JPEG/PNG image (Unknown image file format" in index.manifest["skipped"][0][1]

    loaded = tf.saved_model.load(str(exports[kind]))
    ids = sorted(images)
    image_encodings = loaded.encode_image_bytes(tf.constant([images[name] for name in ids])).numpy()
    text_encodings = loaded.encode_text(tf.constant(QUERIES)).numpy()
    expected_rows, expected_scores = brute_force_top(similarity_matrix(kind, image_encodings, text_encodings).T, 5)

    results = index.search(QUERIES, k=5)
    assert [[hit.id for hit in hits] for hits in results] == [[ids[j] for j in row] for row in expected_rows]
    np.testing.assert_allclose([[hit.score for hit in hits] for hits in results], expected_scores, rtol=1e-5,
                               atol=1e-5)
    one = index.search(QUERIES[0], k=3)
    assert_same_hits(one, results[0][:3])
    assert one[0].item == str(photos / one[0].id)


@pytest.mark.parametrize("kind", ["cosine", "pairwise"])
def test_a_caption_index_is_searched_by_image_file_or_features(kind, exports, photos, tmp_path):
    captions = tmp_path / "captions.txt"
    captions.write_text("".join(f"{caption}\n" for caption in CAPTIONS))
    index = Index.build(exports[kind], tmp_path / "index", captions=captions)
    assert list(index.ids) == [str(line) for line in range(1, len(CAPTIONS) + 1)]

    loaded = tf.saved_model.load(str(exports[kind]))
    files = [photos / "p0.png", photos / "a" / sorted(good_images(photos))[0].split("/")[1]]
    features = np.stack([pixels(file.read_bytes()).numpy() for file in files])
    text_encodings = loaded.encode_text(tf.constant(CAPTIONS)).numpy()
    expected_rows, expected_scores = brute_force_top(
        similarity_matrix(kind, loaded.encode_image(features).numpy(), text_encodings), 4)

    by_file = index.search([str(file) for file in files], k=4)
    by_features = index.search(features, k=4)
    for results in (by_file, by_features):
        assert [[hit.id for hit in hits] for hits in results] == [[str(j + 1) for j in row] for row in expected_rows]
        assert [[hit.item for hit in hits] for hits in results] == [[CAPTIONS[j] for j in row] for row in expected_rows]
        np.testing.assert_allclose([[hit.score for hit in hits] for hits in results], expected_scores, rtol=1e-5,
                                   atol=1e-5)


def test_exact_search_merges_blocks_and_shards(exports, photos, tmp_path, monkeypatch):
    """Shards of 2 items and blocks of 1 item and 1 query give the ranking
    of one block: the merge of the running top-k is exact."""
    whole = Index.build(exports["dot"], tmp_path / "whole", images=photos)
    monkeypatch.setattr(index_module, "ITEM_BLOCK", 1)
    monkeypatch.setattr(index_module, "QUERY_BLOCK", 1)
    build.build_index(_model(exports["dot"]), tmp_path / "sharded", images=photos, shard_items=2)
    sharded = Index.open(tmp_path / "sharded")
    assert len(sharded.manifest["shards"]) == 6  # 11 items, 2 a shard
    assert_same_hits(sharded.search(QUERIES, k=20), whole.search(QUERIES, k=20))
    assert len(whole.search(QUERIES[0], k=20)) == 11


def test_an_interrupted_build_resumes_where_it_stopped(exports, photos, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "IMAGE_BATCH", 2)
    encoded = []
    real_encode = build.Source.encode

    def encode(source, ids):
        if len(encoded) == 6 and not resumed_run:  # three batches done: two shards of 2 written, 2 items pending
            raise KeyboardInterrupt
        encoded.extend(ids)
        return real_encode(source, ids)

    monkeypatch.setattr(build.Source, "encode", encode)
    resumed_run = False
    out = tmp_path / "index"
    with pytest.raises(KeyboardInterrupt, match=r"^4 of 13 images are kept in .*index.partial; the same command "
                                                r"resumes from there$"):
        build.build_index(_model(exports["cosine"]), out, images=photos, shard_items=2)
    assert not out.exists()
    first = list(encoded)
    assert len(first) == 6
    encoded.clear()
    resumed_run = True
    resumed = Index.build(exports["cosine"], out, images=photos)
    assert sorted(encoded) == sorted((set(good_images(photos)) | {"a/broken.jpg", "empty.jpeg"}) - set(first[:4]))
    assert not (tmp_path / "index.partial").exists()
    fresh = Index.build(exports["cosine"], tmp_path / "fresh", images=photos)
    assert sorted(resumed.ids) == sorted(fresh.ids)
    assert_same_hits(resumed.search(QUERIES, k=11), fresh.search(QUERIES, k=11))
    assert resumed.manifest["skipped"] == fresh.manifest["skipped"]


def test_a_partial_index_of_another_model_is_started_anew(exports, photos, tmp_path, monkeypatch, capsys,
                                                          interrupt_second_batch):
    monkeypatch.setattr(store, "IMAGE_BATCH", 2)
    real_encode = interrupt_second_batch
    with pytest.raises(KeyboardInterrupt):
        build.build_index(_model(exports["cosine-other"]), tmp_path / "index", images=photos, shard_items=2)
    monkeypatch.setattr(build.Source, "encode", real_encode)
    index = Index.build(exports["cosine"], tmp_path / "index", images=photos)
    assert "an unfinished index of another model or source; starting it anew" in capsys.readouterr().err
    assert index.manifest["model"]["fingerprint"] == _model(exports["cosine"]).fingerprint
    assert len(index) == 11


def test_the_approximate_index_keeping_every_candidate_ranks_as_exact_search(exports, photos, tmp_path):
    index = Index.build(exports["cosine"], tmp_path / "index", images=photos, approximate="always")
    entry = index.manifest["approximate"]
    assert entry["index"] == "IndexHNSWFlat" and (tmp_path / "index" / entry["file"]).is_file()
    exact = index.search(QUERIES, k=5, exact=True)
    assert_same_hits(index.search(QUERIES, k=5, ef_search=len(index)), exact)


def test_an_approximate_index_needs_a_product_similarity(exports, photos, tmp_path):
    with pytest.raises(InputError, match="only exact search serves it"):
        Index.build(exports["pairwise"], tmp_path / "index", images=photos, approximate="always")
    assert not (tmp_path / "index.partial").exists()


def test_a_caption_the_model_refuses_names_its_line(exports, tmp_path):
    captions = tmp_path / "captions.txt"
    captions.write_text("a dog\n" + " ".join(["word"] * (MAX_WORDS + 1)) + "\n")
    with pytest.raises(InputError, match=r"captions.txt: line 2: the model refuses the caption "
                                         r"\(assertion failed: \[caption too long\]"):
        Index.build(exports["cosine"], tmp_path / "index", captions=captions)


def test_a_per_call_ef_search_leaves_the_index_as_it_was(exports, photos, tmp_path):
    index = Index.build(exports["cosine"], tmp_path / "index", images=photos, approximate="always")
    index.search(QUERIES, k=5, ef_search=16)
    assert index._approximate.hnsw.efSearch == 256  # approximate.DEFAULT_EF_SEARCH, as built
    assert_same_hits(index.search(QUERIES, k=5), Index.open(tmp_path / "index").search(QUERIES, k=5))


def test_a_query_text_the_model_refuses_is_an_input_error(exports, photos, tmp_path):
    index = Index.build(exports["cosine"], tmp_path / "index", images=photos)
    with pytest.raises(InputError, match=r"^the model refuses the query text \(assertion failed: \[caption too long\]"):
        index.search(" ".join(["dog"] * (MAX_WORDS + 1)))
    with pytest.raises(InputError, match=r"^the model refuses a query text \(assertion failed: \[caption too long\]"):
        index.search(["a dog", " ".join(["dog"] * (MAX_WORDS + 1))])


def test_another_model_is_refused(exports, photos, tmp_path):
    Index.build(exports["cosine"], tmp_path / "index", images=photos)
    with pytest.raises(InputError, match=r"index: built with another model \(.*cosine, fingerprint "):
        Index.open(tmp_path / "index", exports["cosine-other"])


def _model(path):
    from search.model import SearchModel

    return SearchModel(path)
