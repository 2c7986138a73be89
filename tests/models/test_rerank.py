"""The two-stage model (`models.rerank`): a tiny `gru` proposes, the tiny
m-CNN ensemble re-ranks, tested on 100 images (`trained_rerank`); its
SavedModel."""

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import evaluate
import train
from common import metrics, reranking
from data import provenance, splits
from engine import evaluation
from engine.export import export_saved_model
from engine.scoring import CheckpointScorer
from models import rerank
from models.base import RetrievalModel
from models.restore import restore_model
from tests.engine.test_export import embedded_features, jpegs
from tests.helpers import EMBEDDED_DATA, EMBEDDED_IMAGES, count_reads, cut_splits


@pytest.fixture(scope="module")
def test_split(short_test_data):
    """The first 50 test images: their 250 captions are one batch of a
    scorer's text encoder (one trace of it)."""
    return splits.load_split(short_test_data, "test", "fc").first_images(50)


def scores(scorer, split):
    """A model's own matrix of the split, by its evaluation's scorer."""
    images, texts = evaluation.encode_split(scorer, split)
    return evaluation.score_matrix(scorer.similarity, images, texts)


@pytest.fixture(scope="module")
def stage_scores(trained, trained_mcnn_ens, test_split):
    """Each stage's own matrix of the test split, by its own run: (first
    stage's, second stage's)."""
    return tuple(scores(CheckpointScorer.from_model_dir(run), test_split) for run in (trained, trained_mcnn_ens))


@pytest.fixture(scope="module")
def rerank_encodings(trained_rerank, test_split):
    """The two-stage run's encodings of the test split (both stages' side by
    side; they do not depend on k), which its evaluations at each k rank."""
    return evaluation.encode_split(CheckpointScorer.from_model_dir(trained_rerank), test_split)


def test_the_fit_chooses_the_smallest_k_of_the_grid_within_the_margin_on_dev(trained_rerank):
    results = json.loads((trained_rerank / "results.json").read_text())
    fit = results["fit"]
    full, by_k = fit["dev_recall_sum_full_rerank"], fit["dev_recall_sum_by_k"]
    within = [int(k) for k, rsum in by_k.items() if rsum >= full - 1.0 - 0.01]
    assert fit["k"] == min(within)
    assert results["test"]["rerank_k"] == fit["k"]


def test_evaluation_equals_a_numpy_re_ranking_of_the_first_stage_lists(trained_rerank, rerank_encodings, stage_scores,
                                                                        test_split, k=3):
    scorer = CheckpointScorer.from_model_dir(trained_rerank, [f"model.k={k}"])
    result = evaluation.evaluate(scorer, test_split, encodings=rerank_encodings)
    first, second = stage_scores
    # The evaluation scores listed pairs with `pair_similarity`, the matrix with `similarity`: equal to
    # float32 rounding (about 1e-6 here, test_pair_similarity...), so the rankings agree when no two listed scores
    # are within 1e-5: true of these lists of 3, not of lists of 20 (two scores 6e-7 apart).
    for queries, candidates in ((first, second), (first.T, second.T)):
        listed = np.sort(np.take_along_axis(candidates, reranking.first_stage_order(queries)[:, :k], axis=1), axis=1)
        assert np.diff(listed, axis=1).min() > 1e-5
    assert result == pytest.approx(reranking.two_stage_metrics(first, second, test_split.caption_image, k)
                                   | {"rerank_k": k}, abs=1e-9)


def test_lists_of_every_candidate_give_exactly_the_second_stage_metrics(trained_rerank, rerank_encodings, stage_scores,
                                                                        test_split):
    every = len(test_split.captions)
    result = evaluation.evaluate(CheckpointScorer.from_model_dir(trained_rerank, [f"model.k={every}"]), test_split,
                                 encodings=rerank_encodings)
    # The m-CNN ensemble's own evaluation: its matrix, ranked as `evaluation.evaluate` ranks it.
    own = evaluation.evaluate_scores(stage_scores[1], test_split.caption_image)
    # The ranks exactly; the mAP to float64 rounding: the two-stage ranking sums each image's precisions at its
    # captions' positions, the matrix's ranking at every position (a 1e-17 apart here).
    ranked = [name for name in metrics.METRIC_NAMES if name != "i2t_map"]
    assert {name: result[name] for name in ranked} == {name: own[name] for name in ranked}
    assert result["i2t_map"] == pytest.approx(own["i2t_map"], rel=1e-12, abs=0)


def test_pair_similarity_of_every_family_here_is_its_similarity_of_those_pairs(trained_rerank):
    _, model = restore_model(trained_rerank)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(6, sum(part.run.image_features.width for part in model.parts))).astype(np.float32)
    images = model.encode_image(features[:, : max(part.columns[1] for part in model.parts)])
    texts = model.encode_text(np.asarray(["a dog runs", "two children play on a beach", "a man", "a red car",
                                          "people", "a black dog jumps over a log"], dtype=object))
    pairs = rng.integers(0, 6, size=(2, 10))
    for stage, (stage_images, stage_texts) in zip((model.first_stage, model.second_stage),
                                                  model.stage_encodings(images, texts)):
        matrix = np.asarray(stage.similarity(stage_images, stage_texts))[pairs[0], pairs[1]]
        for function in (stage.pair_similarity, lambda i, t: RetrievalModel.pair_similarity(stage, i, t)):
            got = np.asarray(function(np.asarray(stage_images)[pairs[0]], np.asarray(stage_texts)[pairs[1]]))
            # float32 sums in another order (m-CNN: blocks against pairs), as tests/models/test_mcnn.py.
            np.testing.assert_allclose(got, matrix, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def gru_ensemble_rerank(trained, trained_ensemble, tmp_path_factory):
    """`gru` proposes, the zoo ensemble holding that very run re-ranks. Its
    one test reads its checkpoint: no test evaluation, no export."""
    model_dir = tmp_path_factory.mktemp("rerank") / "gru-ensemble"
    assert train.main(["--model", "rerank", "--model-dir", str(model_dir),
                       "--set", f"model.members={trained},{trained_ensemble}", "--set", "model.k=3",
                       "--set", "train.validate_max_images=50"], evaluate_test=False, export=False) == 0
    return model_dir


def test_a_first_stage_the_second_holds_is_encoded_once_and_ranks_as_a_numpy_re_ranking(
        gru_ensemble_rerank, trained, trained_ensemble, k=3):
    run, model = restore_model(gru_ensemble_rerank)
    _, second_stage = restore_model(trained_ensemble)
    text = tf.constant(["a dog runs"])
    assert model.encode_text(text).shape == second_stage.encode_text(text).shape

    def test_split(features):
        """The test split's first 50 images, with the features a run reads."""
        return splits.load_split(EMBEDDED_DATA, "test", features).first_images(50)

    split = test_split(run.experiment.data.image_features)
    result = evaluation.evaluate(CheckpointScorer(model), split)
    first = scores(CheckpointScorer.from_model_dir(trained), test_split("fc"))
    second = scores(CheckpointScorer(second_stage), test_split("fc+fne"))
    # As test_evaluation_equals_...: the ensemble's pair scores equal its matrix to float32 rounding, so the
    # rankings agree when no two listed scores are that close; the proposals are the gru run's own encodings.
    for queries, candidates in ((first, second), (first.T, second.T)):
        listed = np.sort(np.take_along_axis(candidates, reranking.first_stage_order(queries)[:, :k], axis=1), axis=1)
        assert np.diff(listed, axis=1).min() > 1e-5
    assert result == pytest.approx(reranking.two_stage_metrics(first, second, split.caption_image, k)
                                   | {"rerank_k": k}, rel=1e-9, abs=1e-9)


@pytest.fixture(scope="module")
def twenty_test_images(tmp_path_factory):
    """The embedded data (both kinds of features) with a test split of its
    first 20 images and no provenance: a run's test is cheap and its export
    takes no backbone."""
    data = cut_splits(tmp_path_factory.mktemp("twenty") / "data", {"test": 20})
    (data / "provenance.json").unlink()
    return data


def test_a_train_a_resume_and_an_evaluation_read_each_runs_files_once(trained, trained_mcnn_ens, trained_mcnn_members,
                                                                      twenty_test_images, tmp_path, monkeypatch):
    """Each process reads each stage's config.json and vocab.json once, and those of the runs the second stage (an
    ensemble) is made of (`models.members.TrainedRun.parts`)."""
    runs = [trained, trained_mcnn_ens, *trained_mcnn_members.values()]
    once = {f"{run.name}/{name}": 1 for run in runs for name in ("config.json", "vocab.json")}
    model_dir = tmp_path / "rerank"
    for argv, command in [
        (["--model", "rerank", "--data", str(twenty_test_images),
          "--set", f"model.members={trained},{trained_mcnn_ens}", "--set", "model.k=3",
          "--set", "train.validate_max_images=50"], train.main),
        (["--resume"], train.main),
        ([], evaluate.main),
    ]:
        reads = count_reads(monkeypatch, runs)
        finish = {"evaluate_test": False, "export": False} if command is train.main else {}
        assert command([*argv, "--model-dir", str(model_dir)], **finish) == 0
        assert reads == once, argv


def test_a_first_stage_other_than_the_second_stages_copy_of_it_is_refused(trained, trained_ensemble, tmp_path,
                                                                          monkeypatch, capsys):
    # As if the gru run had been trained again after the ensemble was fitted: its best weights are not the
    # ensemble's copy of them.
    restore = rerank.restore_parts

    def retrained(models, parts):
        restore(models, parts)
        for model, part in zip(models, parts):
            if Path(part.run.directory) == trained:
                model.weights[0].assign(model.weights[0] + 1.0)

    monkeypatch.setattr(rerank, "restore_parts", retrained)
    argv = ["--model", "rerank", "--model-dir", str(tmp_path / "run"),
            "--set", f"model.members={trained},{trained_ensemble}", "--set", "model.k=3",
            "--set", "train.validate_max_images=50"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"holds {trained} with other weights than {trained}'s best checkpoint" in err
    assert len(err.splitlines()) == 1, err


def test_a_pairwise_first_stage_or_a_single_member_is_refused(trained, trained_mcnn_ens, short_test_data, tmp_path,
                                                              capsys):
    for members, message in ((f"{trained_mcnn_ens},{trained}", "cannot be the first stage"),
                             (f"{trained}", "needs two run directories")):
        argv = ["--model", "rerank", "--model-dir", str(tmp_path / "run"), "--data", str(short_test_data),
                "--set", f"model.members={members}"]
        assert train.main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.fixture(scope="module")
def rerank_export(trained_rerank, tmp_path_factory):
    """The run's SavedModel as train.py wrote it, and one at k = 10 (the k
    the tiny run chose on dev may list all 50 captions below) taking images
    too (its features are the embedded ones: their provenance)."""
    _, model = restore_model(trained_rerank, ["model.k=10"])
    model.image_features = dataclasses.replace(model.image_features, provenance=provenance.read(EMBEDDED_DATA))
    at_10 = export_saved_model(model, tmp_path_factory.mktemp("rerank-export") / "saved_model")
    return {"written": trained_rerank / "saved_model", "k=10": at_10}


@pytest.fixture(scope="module")
def export_at_10(rerank_export):
    """The export at k = 10, loaded once for the module's tests (with its
    backbone, seconds a load) as search loads it: a `search.model.SearchModel`,
    its `scorer` a `SavedModelScorer` and `loaded` the SavedModel."""
    from search.model import SearchModel

    return SearchModel(rerank_export["k=10"])


def test_train_writes_the_two_stage_export_with_the_k_chosen_on_dev(trained_rerank, rerank_export, loaded_once):
    loaded = loaded_once(rerank_export["written"])
    assert int(loaded.rerank_k.numpy()) == json.loads((trained_rerank / "results.json").read_text())["fit"]["k"]
    # encode_* are the first stage's, a joint space; the second stage's are rerank_*.
    assert bool(loaded.joint_space.numpy())
    assert {"score", "similarity", "encode_text", "encode_image", "rerank_encode_text", "rerank_encode_image",
            "rerank_score_pairs"} <= set(loaded.signatures)


def test_export_only_writes_the_same_two_stage_export(trained_rerank, rerank_export, test_split, loaded_once,
                                                      tmp_path):
    copy = tmp_path / trained_rerank.name
    shutil.copytree(trained_rerank, copy, ignore=shutil.ignore_patterns("saved_model"))
    assert train.main(["--model-dir", str(copy), "--export-only"]) == 0
    written, again = loaded_once(rerank_export["written"]), tf.saved_model.load(str(copy / "saved_model"))
    features, texts = test_split.images[:4].astype(np.float32), tf.constant(test_split.captions[:30])
    assert int(again.rerank_k.numpy()) == int(written.rerank_k.numpy())
    np.testing.assert_array_equal(again.score(features, texts).numpy(), written.score(features, texts).numpy())


def test_the_exports_score_of_an_image_and_its_50_best_captions_is_a_numpy_re_ranking(
        export_at_10, trained, trained_mcnn_ens, test_split, loaded_once, k=10):
    """Each stage scored by its own run's export; the list, its re-ranking and the tail's scores in NumPy."""
    features = test_split.images[:1].astype(np.float32)
    captions = np.asarray(test_split.captions, dtype=object)
    first_stage, second_stage = loaded_once(trained / "saved_model"), loaded_once(trained_mcnn_ens / "saved_model")
    best = np.argsort(-first_stage.score(features, tf.constant(captions)).numpy()[0], kind="stable")[:50]
    texts = tf.constant(captions[best])
    first = first_stage.score(features, texts).numpy()[0]
    order = np.argsort(-first, kind="stable")
    # No two first-stage scores within float32 noise of each other: the list and the tail's order are not ties.
    assert np.diff(np.sort(first)).min() > 1e-6
    listed = order[:k]
    second = second_stage.score(features, tf.constant(captions[best][listed])).numpy()[0]
    expected = np.empty(50)
    expected[listed] = second
    expected[order[k:]] = second.min() - 1.0 - np.arange(50 - k)

    got = export_at_10.loaded.score(features, texts).numpy()[0]
    # The export scores listed pairs with pair_similarity, the m-CNN export the matrix: float32 sums in another
    # order (test_pair_similarity_...), 1e-5 apart at most.
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.diff(np.sort(second)).min() > 1e-4  # so the ranking below is no tie-break of float noise
    assert np.argsort(-got, kind="stable").tolist() == [*listed[np.argsort(-second, kind="stable")], *order[k:]]


def test_the_export_evaluates_in_two_stages_as_its_checkpoint(export_at_10, trained_rerank, rerank_encodings,
                                                              test_split):
    by_export = evaluation.evaluate(export_at_10.scorer, test_split)
    by_checkpoint = evaluation.evaluate(CheckpointScorer.from_model_dir(trained_rerank, ["model.k=10"]), test_split,
                                        encodings=rerank_encodings)
    assert by_export["rerank_k"] == 10
    assert by_export == pytest.approx(by_checkpoint, abs=1e-9)


def test_the_exports_image_signatures_run_the_backbone_once_for_both_stages(export_at_10):
    loaded = export_at_10.loaded
    features = embedded_features(loaded.image_features.numpy().decode())
    texts = tf.constant(["A dog runs through the snow .", "Two children play on a beach", "a man rides a bike"])
    # Features from the JPEGs agree with the stored float16 ones to 2.4e-4 (relative, tests/engine/test_export.py).
    extracted = loaded.extract_image_features(jpegs()).numpy()
    np.testing.assert_allclose(extracted, features, rtol=2e-3, atol=2e-3 * np.abs(features).max())
    first = loaded.encode_image(features).numpy()
    np.testing.assert_allclose(loaded.encode_image_bytes(jpegs()).numpy(), first, rtol=2e-3,
                               atol=2e-3 * np.abs(first).max())
    # Lists of 10 hold all 3 texts: every score is a second-stage score, as smooth in the features as they are.
    expected = loaded.score(features, texts).numpy()
    np.testing.assert_allclose(loaded.score_images(jpegs(), texts).numpy(), expected, rtol=2e-3,
                               atol=2e-3 * np.abs(expected).max())


def test_stages_reading_different_features_export_each_its_own_columns(trained, trained_fne, twenty_test_images,
                                                                        loaded_once, tmp_path, k=5):
    """`gru` on `ims` proposes, the FNE `poe` on `stages` re-ranks: the export reads both side by side and gives
    each stage its columns; its score of an image and 20 captions is the NumPy re-ranking of the stages' own exports'
    scores."""
    model_dir = tmp_path / "gru-poe-fne"
    assert train.main(["--model", "rerank", "--model-dir", str(model_dir), "--data", str(twenty_test_images),
                       "--set", f"model.members={trained},{trained_fne}", "--set", f"model.k={k}",
                       "--set", "train.validate_max_images=50"], evaluate_test=False) == 0
    two_stages = tf.saved_model.load(str(model_dir / "saved_model"))
    assert two_stages.image_features.numpy() == b"fc+fne"
    ims, stages = (np.load(EMBEDDED_DATA / f"test_{kind}.npy")[:1].astype(np.float32) for kind in ("ims", "stages"))
    texts = tf.constant((EMBEDDED_DATA / "test_caps.txt").read_text().splitlines()[:20])
    first_stage, second_stage = (loaded_once(run / "saved_model") for run in (trained, trained_fne))
    first = first_stage.score(ims, texts).numpy()[0]
    order = np.argsort(-first, kind="stable")
    assert np.diff(np.sort(first)).min() > 1e-6
    second = second_stage.score(stages, tf.gather(texts, order[:k])).numpy()[0]
    expected = np.empty(20)
    expected[order[:k]] = second
    expected[order[k:]] = second.min() - 1.0 - np.arange(20 - k)
    got = two_stages.score(np.concatenate([ims, stages], axis=1), texts).numpy()[0]
    # Listed pairs through poe's pair similarity, its export's through the matrix: float32 rounding apart.
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_search_of_the_sample_images_gives_the_second_stages_top_3(export_at_10, trained_mcnn_ens, loaded_once,
                                                                      tmp_path):
    """The export at k = 10 indexes the 8 embedded sample JPEGs (their lists hold them all); each of their captions
    finds the top 3 that the m-CNN ensemble's own export gives the stored features of those images."""
    from search import Index

    index = Index.build(export_at_10, tmp_path / "samples.index", images=EMBEDDED_IMAGES)
    ids = (EMBEDDED_DATA / "test_ids.txt").read_text().split()[:8]
    captions = (EMBEDDED_DATA / "test_caps.txt").read_text().splitlines()[:40]
    second_stage = loaded_once(trained_mcnn_ens / "saved_model")
    alone = second_stage.score(np.load(EMBEDDED_DATA / "test_ims.npy")[:8].astype(np.float32),
                               tf.constant(captions)).numpy().T  # [captions, images]
    # JPEG-made features differ from the stored float16 ones by about 2e-4 (relative): compared where the second
    # stage's 4 best are further apart than that could move them.
    best = np.sort(alone, axis=1)[:, ::-1][:, :4]
    clear = np.flatnonzero(np.diff(best, axis=1).min(axis=1) < -1e-2 * np.abs(best).max())
    assert len(clear) >= 10
    results = index.search([captions[c] for c in clear], k=3)
    assert [[hit.id for hit in hits] for hits in results] == [[ids[j] for j in np.argsort(-alone[c])[:3]]
                                                              for c in clear]
