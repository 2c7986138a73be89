"""Search with a two-stage export (`HandTwoStageExport`: a cosine joint
space proposes, a pairwise model re-ranks): every search against a NumPy
re-ranking of the stages' own exports' encodings; over the embedded sample
images, the second stage's top 3 wherever the lists hold them; a right
answer outside the list comes after it."""

import json

import numpy as np
import pytest
import tensorflow as tf

import search.__main__ as search_main
from search import Index
from tests.helpers import EMBEDDED_IMAGES
from tests.search.hand_exports import HandExport, HandTwoStageExport, good_images, pixels, save
from tests.search.test_index import CAPTIONS, similarity_matrix

K = 4  # each query's list: 4 of the 8 sample images
# Queries whose second stage's top 3 are among the first stage's top 4 of the sample images (checked below).
LISTED_TOP_3 = ["a girl in a pink dress", "a dog", "children play in water", "a red car"]
# The second stage's best image for this query is the first stage's 7th.
OUTSIDE = "a boy jumps"


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    """{first, second, two_stage: SavedModel path}: the same weights under
    the cosine (first stage) and minus the L1 distance (second stage)."""
    root = tmp_path_factory.mktemp("two_stage_exports")
    first, second = HandExport("cosine"), HandExport("pairwise")
    return {"first": save(first, root / "first"), "second": save(second, root / "second"),
            "two_stage": save(HandTwoStageExport(first, second, K), root / "two_stage")}


@pytest.fixture(scope="module")
def stage_exports(stages):
    """{first, second: the stage's own export by `tf.saved_model.load`},
    loaded once for the module's tests."""
    return {stage: tf.saved_model.load(str(stages[stage])) for stage in ("first", "second")}


def stage_scores(stage_exports, stage, images, texts):
    """[n_texts, n_images] scores of one stage's own export, in NumPy."""
    loaded = stage_exports[stage]
    image_encodings = loaded.encode_image(images).numpy()
    text_encodings = loaded.encode_text(tf.constant(texts)).numpy()
    return similarity_matrix("cosine" if stage == "first" else "pairwise", image_encodings, text_encodings).T


def numpy_re_ranking(first, second, k):
    """Each row's candidates ranked in two stages and their scores: the
    first stage's k best (a stable sort: equal scores by lower index) by
    the second stage's scores, equal ones by higher index (VSE++'s
    argsort(scores)[::-1], as the zoo's metrics order ties), then the
    others in the first stage's order at min(listed) - 1 - j."""
    rankings, scores = [], []
    for first_row, second_row in zip(first, second):
        order = np.argsort(-first_row, kind="stable")
        listed = order[:k][np.lexsort((-order[:k], -second_row[order[:k]]))]
        rankings.append([*listed, *order[k:]])
        scores.append([*second_row[listed], *(second_row[listed].min() - 1.0 - np.arange(len(order) - k))])
    return np.array(rankings), np.array(scores)


def sample_images():
    """(ids, pixel features) of the embedded sample JPEGs, in the index's order."""
    images = good_images(EMBEDDED_IMAGES)
    ids = sorted(images)
    return ids, np.stack([pixels(tf.constant(images[name])).numpy() for name in ids])


@pytest.mark.parametrize("approximate", ["never", "always"])
def test_an_image_index_ranks_as_a_numpy_re_ranking_of_each_stages_scores(stages, stage_exports, approximate, tmp_path):
    index = Index.build(stages["two_stage"], tmp_path / "index", images=EMBEDDED_IMAGES, approximate=approximate)
    assert index.rerank_k == K and index.metric == "cosine"
    assert bool(index.manifest["approximate"]) == (approximate == "always")
    ids, features = sample_images()
    queries = [*LISTED_TOP_3, OUTSIDE, "two dogs play in the grass"]
    rankings, scores = numpy_re_ranking(stage_scores(stage_exports, "first", features, queries),
                                        stage_scores(stage_exports, "second", features, queries), K)
    results = index.search(queries, k=len(ids))
    assert [[hit.id for hit in hits] for hits in results] == [[ids[j] for j in row] for row in rankings]
    np.testing.assert_allclose([[hit.score for hit in hits] for hits in results], scores, rtol=1e-5, atol=1e-4)
    # Fewer results than the list: its best, all re-ranked.
    assert [hit.id for hit in index.search(OUTSIDE, k=2)] == [ids[j] for j in rankings[queries.index(OUTSIDE)][:2]]


def test_the_sample_images_top_3_is_the_second_stages_where_the_lists_hold_it(stages, stage_exports, tmp_path):
    two_stages = Index.build(stages["two_stage"], tmp_path / "two_stages", images=EMBEDDED_IMAGES)
    second_alone = Index.build(stages["second"], tmp_path / "second", images=EMBEDDED_IMAGES)
    _, features = sample_images()
    first = stage_scores(stage_exports, "first", features, LISTED_TOP_3)
    second = stage_scores(stage_exports, "second", features, LISTED_TOP_3)
    for first_row, second_row in zip(first, second):
        assert set(np.argsort(-second_row)[:3]) <= set(np.argsort(-first_row, kind="stable")[:K])
    for got, alone in zip(two_stages.search(LISTED_TOP_3, k=3), second_alone.search(LISTED_TOP_3, k=3)):
        assert [hit.id for hit in got] == [hit.id for hit in alone]
        np.testing.assert_allclose([hit.score for hit in got], [hit.score for hit in alone], rtol=1e-5)


def test_a_right_answer_outside_the_list_comes_after_it_in_the_first_stages_order(stages, stage_exports, tmp_path):
    index = Index.build(stages["two_stage"], tmp_path / "index", images=EMBEDDED_IMAGES)
    ids, features = sample_images()
    first = stage_scores(stage_exports, "first", features, [OUTSIDE])[0]
    second = stage_scores(stage_exports, "second", features, [OUTSIDE])[0]
    first_order = np.argsort(-first, kind="stable")
    best = int(np.argmax(second))
    assert list(first_order).index(best) == 6  # the first stage's 7th: outside its list of 4
    hits = index.search(OUTSIDE, k=8)
    assert [hit.id for hit in hits][K:] == [ids[j] for j in first_order[K:]]
    assert [hit.id for hit in hits].index(ids[best]) == 6
    assert max(hit.score for hit in hits[K:]) < min(hit.score for hit in hits[:K])


def test_a_caption_index_is_re_ranked_for_image_features(stages, stage_exports, tmp_path):
    captions = tmp_path / "captions.txt"
    captions.write_text("".join(f"{caption}\n" for caption in CAPTIONS))
    index = Index.build(stages["two_stage"], tmp_path / "index", captions=captions)
    _, features = sample_images()
    first = stage_scores(stage_exports, "first", features, CAPTIONS).T
    second = stage_scores(stage_exports, "second", features, CAPTIONS).T
    rankings, scores = numpy_re_ranking(first, second, K)
    # "a dog runs" is on lines 1 and 2: equal scores in both stages, both listed for some image.
    assert any({0, 1} <= set(row[:K]) for row in rankings)
    results = index.search(features, k=len(CAPTIONS))
    assert [[int(hit.id) - 1 for hit in hits] for hits in results] == rankings.tolist()
    np.testing.assert_allclose([[hit.score for hit in hits] for hits in results], scores, rtol=1e-5, atol=1e-4)
    # An image file: the backbone (here its pixels) once, both stages' encodings of it.
    ids, _ = sample_images()
    by_file = index.search(str(EMBEDDED_IMAGES / ids[0]), k=len(CAPTIONS))
    assert [hit.id for hit in by_file] == [hit.id for hit in results[0]]


def test_the_command_line_indexes_and_queries_in_two_stages(stages, tmp_path, capsys):
    out = tmp_path / "photos.index"
    assert search_main.main(["index", "--saved-model", str(stages["two_stage"]), "--images", str(EMBEDDED_IMAGES),
                             "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == f"{out}: 8 images, re-ranked by the second stage in lists of {K}\n"
    manifest = json.loads((out / "index.json").read_text())
    assert manifest["model"]["rerank_k"] == K and manifest["shards"][0]["rerank_bytes"] > 0
    assert search_main.main(["query", str(out), LISTED_TOP_3[0], "--k", "3", "--json", "--quiet"]) == 0
    got = [result["id"] for result in json.loads(capsys.readouterr().out)["results"]]
    assert got == [hit.id for hit in Index.open(out).search(LISTED_TOP_3[0], k=3)]
    (out / "shard-000000.rerank.npy").write_bytes(b"")
    assert search_main.main(["query", str(out), LISTED_TOP_3[0]]) == 2
    err = capsys.readouterr().err
    assert "shard-000000.rerank.npy: missing or damaged" in err and len(err.strip().splitlines()) == 1, err
