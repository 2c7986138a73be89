"""The zoo ensemble (`models.ensemble`): its combined score, what it fits
on dev, its refusals, and that the test split never reaches a choice."""

import itertools
import json

import numpy as np
import pytest
import tensorflow as tf

import evaluate
import train
from common import metrics
from common.errors import InputError
from data.splits import load_split
from models import ensemble
from models.ensemble_config import EnsembleConfig
from models.members import ensemble_members
from models.restore import restore_model
from tests.helpers import EMBEDDED_DATA, count_reads

TEXTS = ["A dog runs through the snow .", "Two children play on a beach", "a man rides a bike"]


def member_scores(directory, split, rows, texts):
    """A member's own similarity of a split's images `rows` (read with its
    own features) and `texts`, from its run directory alone."""
    run, member = restore_model(directory)
    config = run.experiment
    features = load_split(EMBEDDED_DATA, split, config.data.image_features).images[rows]
    return member.similarity(member.encode_image(features), member.encode_text(member.vectorizer(tf.constant(texts)))).numpy()


def ensemble_scores(model, split, rows, texts):
    features = load_split(EMBEDDED_DATA, split, "fc+fne").images[rows]
    return model.similarity(model.encode_image(features), model.encode_text(tf.constant(texts))).numpy()


def members_of(run):
    return json.loads((run / "config.json").read_text())["model"]["members"]


def test_score_is_the_weighted_sum_of_the_standardised_member_scores(trained_ensemble):
    _, model = restore_model(trained_ensemble)
    center, scale, mix = np.array([0.3, -2.0, 0.1]), np.array([0.5, 4.0, 0.2]), np.array([0.2, 0.5, 0.3])
    for variable, value in ((model.center, center), (model.scale, scale), (model.member_weights, mix)):
        variable.assign(value.astype(np.float32))
    rows = [0, 7, 42, 999]
    want = sum(w * (member_scores(d, "test", rows, TEXTS) - c) / s
               for d, c, s, w in zip(members_of(trained_ensemble), center, scale, mix))
    np.testing.assert_allclose(ensemble_scores(model, "test", rows, TEXTS), want, rtol=1e-5, atol=1e-5)


def test_rank_combination_is_each_members_dev_distribution_function(trained_ensemble):
    members = members_of(trained_ensemble)
    config = EnsembleConfig(members=tuple(members), combination="rank", quantiles=5)
    model = ensemble.build(config, ensemble_members(config), 1280 + 3120)
    for member, directory in zip(model.members, members):
        member.set_weights(restore_model(directory)[1].get_weights())
    rows = [3, 4, 500]
    raw = [member_scores(d, "test", rows, TEXTS) for d in members]
    # Five quantiles per member around its scores, so every score is inside them.
    tables = [np.sort(np.concatenate([[s.min() - 1, s.max() + 1], np.quantile(s, [0.2, 0.5, 0.9])])) for s in raw]
    model.score_quantiles.assign(np.stack(tables).astype(np.float32))
    model.member_weights.assign(np.array([0.5, 0.25, 0.25], np.float32))
    want = sum(w * np.interp(s, q, np.linspace(0, 1, 5)) for w, s, q in zip([0.5, 0.25, 0.25], raw, tables))
    np.testing.assert_allclose(ensemble_scores(model, "test", rows, TEXTS), want, rtol=1e-5, atol=1e-6)


def test_quantile_rank_is_linear_between_quantiles_and_continues_beyond_them():
    quantiles = tf.constant([0.0, 1.0, 3.0, 3.0, 7.0])  # levels 0, .25, .5, .75, 1
    scores = tf.constant([[0.5, 2.0, 5.0], [-1.0, 9.0, 3.0]])
    # 2.0: halfway from 1 (.25) to 3 (.5); 5.0: halfway from 3 (.75) to 7 (1);
    # beyond: -1 one unit below 0 on the first slope (.25 a unit), 9 two
    # units above 7 on the last (.0625 a unit); 3.0, a repeated quantile: .75.
    want = [[0.125, 0.375, 0.875], [-0.25, 1.125, 0.75]]
    np.testing.assert_allclose(ensemble.quantile_rank(scores, quantiles).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("members, step", [(2, 0.5), (3, 0.1), (4, 0.25)])
def test_simplex_grid_is_every_point_of_the_step_summing_to_one(members, step):
    parts = round(1 / step)
    want = {point for point in itertools.product(range(parts + 1), repeat=members) if sum(point) == parts}
    grid = ensemble.simplex_grid(members, step)
    assert {tuple(round(w * parts) for w in point) for point in grid} == want and len(grid) == len(want)


def test_simplex_grid_refuses_a_step_that_does_not_divide_one():
    with pytest.raises(InputError, match="1 / 0.3 is not a whole number"):
        ensemble.simplex_grid(3, 0.3)


def test_fit_standardises_on_dev_and_chooses_the_best_grid_point(trained_ensemble):
    results = json.loads((trained_ensemble / "results.json").read_text())
    fit = results["fit"]
    _, model = restore_model(trained_ensemble)
    dev = load_split(EMBEDDED_DATA, "dev").first_images(200)
    rows = np.arange(200)
    raw = [member_scores(d, "dev", rows, dev.captions) for d in members_of(trained_ensemble)]
    np.testing.assert_allclose(model.center.numpy(), [s.mean() for s in raw], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.scale.numpy(), [s.std() for s in raw], rtol=1e-4)
    z = [(s - s.mean()) / s.std() for s in raw]
    # Every point of the 0.1 grid, ranked by the zoo's full evaluation.
    grid = [np.array(p) / 10 for p in itertools.product(range(11), repeat=3) if sum(p) == 10]
    best = max(metrics.retrieval_metrics(sum(w * s for w, s in zip(p, z)), dev.caption_image)["rsum"] for p in grid)
    chosen = np.array(fit["weights"])
    assert fit["grid_points"] == len(grid) == 66 and fit["weights_from"] == "dev grid, step 0.1"
    np.testing.assert_allclose(model.member_weights.numpy(), chosen, rtol=1e-6)
    assert metrics.retrieval_metrics(sum(w * s for w, s in zip(chosen, z)), dev.caption_image)["rsum"] == pytest.approx(best, abs=0.2)
    assert results["dev"]["rsum"] == pytest.approx(fit["dev_recall_sum"], abs=0.2)
    assert fit["dev_recall_sum"] >= max(fit["member_dev_recall_sums"])


def test_weights_come_from_dev_alone(trained_ensemble, tmp_path):
    # The embedded data with its test split shuffled: the same fit.
    rng = np.random.default_rng(0)
    test = load_split(EMBEDDED_DATA, "test")
    order = rng.permutation(len(test.images))
    for name in ("train", "dev"):
        for suffix in ("ims.npy", "stages.npy", "caps.txt", "ids.txt"):
            (tmp_path / f"{name}_{suffix}").symlink_to(EMBEDDED_DATA / f"{name}_{suffix}")
    for kind in ("ims", "stages"):
        np.save(tmp_path / f"test_{kind}.npy", np.load(EMBEDDED_DATA / f"test_{kind}.npy")[order])
    (tmp_path / "test_ids.txt").write_text("\n".join(test.image_ids[i] for i in order) + "\n")
    captions = [test.captions[c] for i in order for c in np.flatnonzero(test.caption_image == i)]
    (tmp_path / "test_caps.txt").write_text("\n".join(captions) + "\n")
    run = tmp_path / "shuffled"
    argv = ["--model", "ensemble", "--model-dir", str(run), "--data", str(tmp_path),
            "--set", f"model.members={','.join(members_of(trained_ensemble))}", "--set", "train.validate_max_images=200"]
    assert train.main(argv, export=False) == 0
    ours, theirs = (json.loads((r / "results.json").read_text()) for r in (trained_ensemble, run))
    assert ours["fit"]["weights"] == theirs["fit"]["weights"] and ours["dev"] == theirs["dev"]
    assert theirs["test"]["rsum"] == pytest.approx(ours["test"]["rsum"], abs=0.5)


def _zeroed_copy(run, tmp_path):
    """A copy of `run` whose best checkpoint has every weight 0: a model
    whose every score is the same."""
    import shutil

    copy = tmp_path / "zeroed"
    shutil.copytree(run, copy)
    _, model = restore_model(copy)
    for variable in model.trainable_variables:
        variable.assign(tf.zeros_like(variable))
    shutil.rmtree(copy / "best")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(copy / "best"), max_to_keep=1).save(0)
    return copy


def test_bad_members_are_one_line_errors(trained, trained_fv, trained_ensemble, trained_mcnn_st, tmp_path, capsys):
    fv, gru = str(trained_fv), str(trained)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_text("{not json")
    cases = [
        ([gru], "model.members: an ensemble needs at least two run directories"),
        ([gru, str(tmp_path / "missing")], f"{tmp_path / 'missing'}/config.json: no config.json"),
        ([gru, str(damaged)], f"{damaged}/config.json: unreadable model config"),
        ([gru, gru], f"model.members: {gru} is listed twice"),
        ([gru, str(trained_ensemble)], "a member may not be an ensemble ('ensemble'); list its members instead"),
        # trained on a 100-image test split
        ([gru, str(trained_mcnn_st)], f"{trained_mcnn_st}/config.json: its test split"),
        ([gru, str(trained_mcnn_st)], f"is not the one of {gru} ({EMBEDDED_DATA / 'test'}): 1000 images against 100"),
    ]
    for i, (members, message) in enumerate(cases):
        run = tmp_path / f"ens{i}"
        assert train.main(["--model", "ensemble", "--model-dir", str(run), "--set", f"model.members={','.join(members)}"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
        assert not run.exists()  # refused before the run directory is written
    argv = ["--model", "ensemble", "--model-dir", str(tmp_path / "w"), "--set", f"model.members={gru},{fv}",
            "--set", "model.weights=[1,2,3]"]
    assert train.main(argv) == 2
    assert "model.weights: 3 weights for 2 members" in capsys.readouterr().err


def test_the_ensembles_dev_split_must_be_its_members(trained, trained_fv, tmp_path, capsys):
    for name in ("train", "test"):
        for suffix in ("ims.npy", "caps.txt", "ids.txt"):
            (tmp_path / f"{name}_{suffix}").symlink_to(EMBEDDED_DATA / f"{name}_{suffix}")
    for suffix in ("ims.npy", "caps.txt", "ids.txt"):  # dev: the test split
        (tmp_path / f"dev_{suffix}").symlink_to(EMBEDDED_DATA / f"test_{suffix}")
    argv = ["--model", "ensemble", "--model-dir", str(tmp_path / "run"), "--data", str(tmp_path),
            "--set", f"model.members={trained},{trained_fv}"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'dev'}: the ensemble's dev split is not its members' ") and "\n" not in err


def test_a_member_with_constant_scores_is_refused(trained, trained_fv, tmp_path, capsys):
    zeroed = _zeroed_copy(trained, tmp_path)
    argv = ["--model", "ensemble", "--model-dir", str(tmp_path / "run"), "--set", f"model.members={trained_fv},{zeroed}",
            "--set", "train.validate_max_images=50"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"{zeroed}: its scores of the dev split are constant" in err and "\n" not in err


def test_a_checkpoint_holds_every_member_weight(trained_ensemble, tmp_path):
    # Members held in a Python list would be neither saved nor restored.
    _, model = restore_model(trained_ensemble)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    stored = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    assert sum(1 for key in stored if key.startswith("model/")) == len(model.weights)
    assert len(model.weights) == 3 + sum(len(m.weights) for m in model.members)


def test_the_member_weights_keep_their_checkpoint_key(trained_ensemble, tmp_path):
    # Runs trained before `mix` became `member_weights` hold the weights
    # under the old key; a checkpoint of today must hold them there too.
    _, model = restore_model(trained_ensemble)
    model.member_weights.assign([0.5, 0.2, 0.3])
    reader = tf.train.load_checkpoint(tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt")))
    np.testing.assert_array_equal(reader.get_tensor("model/mix/.ATTRIBUTES/VARIABLE_VALUE"), np.float32([0.5, 0.2, 0.3]))
    assert not any("member_weights" in key for key in reader.get_variable_to_shape_map())


def test_a_members_encoding_columns_hold_its_own_runs_encodings(trained, trained_fv, trained_ensemble, tmp_path):
    _, model = restore_model(trained_ensemble)
    features = load_split(EMBEDDED_DATA, "test", "fc+fne").images[:4]
    images, texts = model.encode_image(features).numpy(), model.encode_text(tf.constant(TEXTS)).numpy()
    for directory in (trained, trained_fv):
        run, member = restore_model(directory)
        (image_start, image_stop), (text_start, text_stop) = model.run_encoding_columns(str(directory))
        own_images = member.encode_image(load_split(EMBEDDED_DATA, "test", run.experiment.data.image_features).images[:4])
        own_texts = member.encode_text(member.vectorizer(tf.constant(TEXTS)))
        np.testing.assert_allclose(images[:, image_start:image_stop], own_images, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(texts[:, text_start:text_stop], own_texts, rtol=1e-6, atol=1e-6)
    assert model.run_encoding_columns(str(tmp_path)) is None


def test_a_train_a_resume_and_an_evaluation_read_each_members_files_once(trained, trained_fv, short_test_data,
                                                                          tmp_path, monkeypatch):
    """Each process reads a member's config.json and vocab.json once (`models.members.TrainedRun`), whether it
    checks the members, builds the ensemble, fits it or rebuilds it to evaluate it."""
    run = tmp_path / "ensemble"
    once = {f"{member.name}/{name}": 1 for member in (trained, trained_fv) for name in ("config.json", "vocab.json")}
    for argv, command in [
        (["--model", "ensemble", "--data", str(short_test_data), "--set", f"model.members={trained},{trained_fv}",
          "--set", "train.validate_max_images=50"], train.main),
        (["--resume"], train.main),
        ([], evaluate.main),
    ]:
        reads = count_reads(monkeypatch, [trained, trained_fv])
        finish = {"evaluate_test": False, "export": False} if command is train.main else {}
        assert command([*argv, "--model-dir", str(run)], **finish) == 0
        assert reads == once, argv
