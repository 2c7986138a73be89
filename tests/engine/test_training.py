"""The trainer's stages, each called alone (build, validate, test,
export: the last two in float32 under mixed precision, without a second
model), its phases (a curriculum such as Vilalta et al.'s PH), and a
fitted model's validation."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import train
from common.errors import InputError
from common.metrics import METRIC_NAMES
from common.records import RunResults
from data.splits import load_experiment_splits
from engine import evaluation, training, training_loop
from engine.scoring import CheckpointScorer, SavedModelScorer
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from models import registry
from models.experiments import load_run
from models.restore import restore_model
from tests.conftest import TINY
from tests.helpers import EMBEDDED_DATA, light_copy, randomize_weights, skip_where_bfloat16_crashes

# Dev rsums the patched validation reports, in order (then 9 forever):
# phase 0 improves twice, then fails once (phase_patience=1), so phase 1
# must start after the third validation from the weights of the second.
SCRIPTED_RSUM = [10.0, 12.0, 11.0, 13.0, 14.0]


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    """One scripted run for the tests below, its training only (no test
    evaluation, no export): (events, model_dir, the "train" logger's
    messages)."""
    events, messages = [], []

    def validate(trainer, built):
        done = len([e for e in events if e[0] == "validate"])
        rsum = SCRIPTED_RSUM[done] if done < len(SCRIPTED_RSUM) else 9.0
        events.append(("validate", rsum, int(built.state.phase), type(built.model.hinge),
                       [w.copy() for w in built.model.get_weights()]))
        return {**dict.fromkeys(METRIC_NAMES, 0.0), "rsum": rsum}

    original_next_phase = training_loop.TrainingLoop._next_phase

    def next_phase(loop):
        original_next_phase(loop)
        events.append(("phase", int(loop.state.phase), int(loop.state.epoch), type(loop.model.hinge),
                       [w.copy() for w in loop.model.get_weights()], float(loop.optimizer.learning_rate)))

    model_dir = tmp_path_factory.mktemp("scripted") / "run"
    argv = ["--model", "gru", "--preset", "quick", "--model-dir", str(model_dir), *TINY,
            "--set", "model.hinge=sum-max", "--set", "train.phase_patience=1",
            "--set", "train.phase_learning_rates=[0.0005]", "--set", "train.epochs=2"]
    logger, handler = logging.getLogger("train"), logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    level = logger.level
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(training.Trainer, "validate", validate)
        monkeypatch.setattr(training_loop.TrainingLoop, "_next_phase", next_phase)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            assert train.main(argv, evaluate_test=False, export=False) == 0
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
    return events, model_dir, messages


def test_phase_two_starts_after_patience_from_the_best_weights(scripted_run):
    events, _, _ = scripted_run
    validations = [e for e in events if e[0] == "validate"]
    [phase] = [e for e in events if e[0] == "phase"]
    # Three validations in phase 0 (the third did not improve), the rest in 1.
    assert [v[2] for v in validations[:3]] == [0, 0, 0] and all(v[2] == 1 for v in validations[3:])
    assert all(v[3] is SumOfHinges for v in validations[:3]) and all(v[3] is MaxOfHinges for v in validations[3:])
    _, number, epoch, hinge, weights, learning_rate = phase
    # Phase 0 ended mid-epoch 0 (at step 21 of 25): phase 1 starts epoch 1.
    assert (number, epoch) == (1, 1) and hinge is MaxOfHinges and learning_rate == pytest.approx(0.0005)
    best_of_phase_0 = validations[1][4]
    for got, want in zip(weights, best_of_phase_0):
        np.testing.assert_array_equal(got, want)
    # Phase 1 then runs its own 2 epochs of 25 steps, validating every 7
    # global steps and at epoch ends: steps 28, 35, 42, 46, 49, 56, 63, 70, 71.
    assert len(validations) == 3 + 9


def test_a_phase_traces_its_train_step_once_for_batches_of_every_caption_length(tmp_path, monkeypatch):
    made, make = [], training_loop.make_train_step

    def spy(*args, **kwargs):
        step, widths = make(*args, **kwargs), set()

        def recorded(batch):
            widths.add(int(batch["token_ids"].shape[1]))
            return step(batch)

        recorded.diagnostic_reductions = step.diagnostic_reductions
        made.append((step, widths))
        return recorded

    monkeypatch.setattr(training_loop, "make_train_step", spy)
    argv = ["--model", "gru", "--preset", "quick", "--model-dir", str(tmp_path / "run"), *TINY, "--set", "train.epochs=1"]
    assert train.main(argv, evaluate_test=False, export=False) == 0
    (step, widths), = made
    assert len(widths) > 1  # batches cut to several caption lengths reached it
    assert step.experimental_get_tracing_count() == 1


def test_phases_are_logged_to_tensorboard(scripted_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, model_dir, _ = scripted_run
    accumulator = EventAccumulator(str(model_dir / "logs" / "train"), size_guidance={"tensors": 0})
    accumulator.Reload()
    phases = {int(np.asarray(training_tensor_value(e))) for e in accumulator.Tensors("phase")}
    assert phases == {0, 1}


def training_tensor_value(event):
    import tensorflow as tf

    return tf.make_ndarray(event.tensor_proto)


@pytest.mark.slow  # over 10 s on 2 cores
def test_the_selection_metric_picks_the_best_checkpoint(monkeypatch, tmp_path):
    # rsum and i2t_map disagree on the best validation: with
    # selection_metric=i2t_map the checkpoint of the 2nd validation is kept.
    scripted = [(50.0, 0.1), (40.0, 0.3), (60.0, 0.2)]
    seen = []

    def validate(trainer, built):
        rsum, i2t_map = scripted[min(len(seen), 2)]
        seen.append(int(built.state.global_step))
        return {**dict.fromkeys(METRIC_NAMES, 0.0), "rsum": rsum, "i2t_map": i2t_map}

    monkeypatch.setattr(training.Trainer, "validate", validate)
    model_dir = tmp_path / "run"
    argv = ["--model", "gru", "--preset", "quick", "--model-dir", str(model_dir), *TINY,
            "--set", "train.epochs=1", "--set", "train.selection_metric=i2t_map"]
    assert train.main(argv) == 0
    assert (model_dir / "best" / f"ckpt-{seen[1]}.index").exists()
    assert json.loads((model_dir / "results.json").read_text())["dev"]["i2t_map"] == 0.3


def test_phase_learning_rates_must_match_the_phases(tmp_path, capsys):
    argv = ["--model", "gru", "--preset", "quick", "--model-dir", str(tmp_path / "run"), *TINY,
            "--set", "train.phase_learning_rates=[0.1]"]
    assert train.main(argv) == 2
    assert "train.phase_learning_rates needs 0 value(s)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused as the model is built, before config.json


def test_unknown_phase_hinge_is_an_input_error():
    with pytest.raises(InputError, match="sum-max"):
        registry.get("gru").experiment("paper", ["model.hinge=sum-maxx"])


@pytest.mark.slow  # over 10 s on 2 cores
def test_poe_on_full_network_embeddings_end_to_end(tmp_path):
    """The order-embedding curriculum on real per-layer features: FNE
    statistics from the training images, both phases, the export."""
    import json

    import tensorflow as tf

    from data import readers
    from tests.helpers import EMBEDDED_DATA as data

    model_dir = tmp_path / "poe"
    argv = ["--model", "poe", "--preset", "quick", "--data", str(data), "--image-features", "fne",
            "--model-dir", str(model_dir), *TINY, "--set", "train.epochs=1", "--set", "train.phase_patience=1"]
    assert train.main(argv) == 0
    config = json.loads((model_dir / "config.json").read_text())
    assert (config["model"]["image_input"], config["data"]["image_features"]) == ("fne", "fne")
    assert (config["image_features"]["kind"], config["image_features"]["width"]) == ("fne", 3120)
    train_features = readers.load_precomp(data, "train", "stages").images[:160].astype(np.float64)
    checkpoint = tf.train.load_checkpoint(str(model_dir / "checkpoints"))
    assert checkpoint.get_tensor("state/phase/.ATTRIBUTES/VARIABLE_VALUE") == 1
    [mean_key] = [k for k in checkpoint.get_variable_to_shape_map() if "image_input/mean" in k]
    np.testing.assert_allclose(checkpoint.get_tensor(mean_key), train_features.mean(axis=0), rtol=1e-4, atol=1e-4)
    # The export applies them to raw per-layer features.
    loaded = tf.saved_model.load(str(model_dir / "saved_model"))
    test_features = readers.load_precomp(data, "test", "stages").images[:4].astype(np.float32)
    assert loaded.encode_image(test_features).shape == (4, 32)  # TINY embed_dim


def test_the_run_states_its_plan_before_training(scripted_run):
    # 160 images × 5 captions = 800 pairs, 25 batches of 32; sum-max has two phases of 2 epochs each.
    [plan] = [message for message in scripted_run[2] if message.startswith("plan: ")]
    assert plan.startswith("plan: gru, preset quick: 2 phases of 2 epochs × 25 steps of 32 pairs (100 steps at most), on ")
    cores = len(os.sched_getaffinity(0))
    assert plan.endswith(f"; CPU ({cores} core{'s' * (cores != 1)}), float32, strategy default; into {scripted_run[1]}")


def test_the_vocabulary_line_says_where_its_words_come_from():
    from data.vocabulary import Vocabulary

    built = Vocabulary.build(["a dog runs", "a cat"], extra_words=["zebra", "dog"])
    assert training._vocabulary_origin(built, 2) == (
        "7 tokens: <pad>, <unk>, 4 words of the 2 training captions and 1 from elsewhere (a word-vector file)")
    listed = Vocabulary(["<pad>", "<unk>", "dog", "zebra"])
    assert training._vocabulary_origin(listed, 2) == (
        "4 tokens, the model's own word list (not counted in the training captions)")


def test_resuming_on_features_made_otherwise_is_refused(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("saved_model", "logs"))
    config = json.loads((run / "config.json").read_text())
    config["image_features"]["provenance"]["crops"] = 10
    (run / "config.json").write_text(json.dumps(config))
    assert train.main(["--model-dir", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {EMBEDDED_DATA / 'provenance.json'}: these features were made differently")
    assert str(run / "config.json") in err and err.count("\n") == 1


def test_the_full_network_embeddings_statistics_are_the_training_images(trained_fne):
    # The tiny run trained on the first 160 training images (TINY): its FNE standardises by their per-feature
    # mean and standard deviation, read here from the file by hand; the dev images' would be another model.
    checkpoint = tf.train.load_checkpoint(str(trained_fne / "best"))
    names = checkpoint.get_variable_to_shape_map()
    [mean_key] = [name for name in names if "image_input/mean" in name]
    [std_key] = [name for name in names if "image_input/std" in name]
    train = np.load(EMBEDDED_DATA / "train_stages.npy")[:160].astype(np.float64)
    dev = np.load(EMBEDDED_DATA / "dev_stages.npy")[:160].astype(np.float64)
    # float16 features summed in float32 over 160 rows: agreement to ~1e-4 of the values' scale.
    np.testing.assert_allclose(checkpoint.get_tensor(mean_key), train.mean(axis=0), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(checkpoint.get_tensor(std_key), np.where(train.std(axis=0) > 0, train.std(axis=0), 1.0),
                               rtol=1e-3, atol=1e-4)
    assert np.abs(checkpoint.get_tensor(mean_key) - dev.mean(axis=0)).max() > 100 * 1e-4


@pytest.mark.parametrize("fixture", ["trained_fv", "trained_ensemble"])
def test_a_fitted_runs_dev_metrics_are_its_best_checkpoints_evaluation(fixture, request):
    # Validated from the fit's own dev scores (`models.base.Fit`), against
    # the route of every other validation: the evaluation of the run's best
    # checkpoint, which scores dev with the restored model.
    run = request.getfixturevalue(fixture)
    config = restore_model(run)[0].experiment
    _, dev, _ = load_experiment_splits(config.data, validate_max_images=config.train.validate_max_images)
    want = evaluation.evaluate(CheckpointScorer.from_model_dir(run), dev, sentence_similarity=False)
    got = json.loads((run / "results.json").read_text())["dev"]
    # The two routes sum the members' scores in another order, so pairs
    # tied to a few ulps may swap ranks (seen on AVX2: 5 of the captions by
    # one rank). The mean ranks move by 1/N per swap; a recall only where
    # such a pair straddles R@K, which a wrong dev matrix changes by far more.
    mean_ranks = {key for key in want if key.endswith("_meanr")}
    assert {key: got[key] for key in mean_ranks} == pytest.approx({key: want[key] for key in mean_ranks}, abs=0.01)
    assert {key: got[key] for key in want.keys() - mean_ranks} == pytest.approx(
        {key: want[key] for key in want.keys() - mean_ranks}, abs=1e-6)


def test_a_fitted_model_is_validated_from_its_fit_without_scoring_dev_again(trained, trained_fv, short_test_data,
                                                                             monkeypatch, tmp_path):
    scored = []
    monkeypatch.setattr(training.Trainer, "validate", lambda trainer, built: scored.append(1))
    # Tested on 100 images (the embedded dev split, a shorter test split): results.json is written after the test.
    argv = ["--model", "ensemble", "--model-dir", str(tmp_path / "run"), "--set", f"model.members={trained},{trained_fv}",
            "--data", str(short_test_data), "--set", "train.validate_max_images=100"]
    assert train.main(argv, export=False) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert not scored and results["dev"]["rsum"] == pytest.approx(results["fit"]["dev_recall_sum"], abs=0.5)


def test_a_fitted_run_stopped_after_its_fit_resumes_without_fitting_again(trained_fv, tmp_path, monkeypatch):
    # As a run stopped in its test evaluation or its export leaves it: the fit's checkpoints, no results.json.
    run = light_copy(trained_fv, tmp_path / "run", leave_out=("saved_model", "results.json"))
    monkeypatch.setattr(type(restore_model(trained_fv)[1]), "fit_split", lambda *args: pytest.fail("fitted again"))
    assert train.main(["--model-dir", str(run), "--resume"], export=False) == 0
    first, resumed = (json.loads((folder / "results.json").read_text()) for folder in (trained_fv, run))
    # What the fit chose comes back from the checkpoint, and the same weights give the same numbers.
    assert resumed["fit"] == first["fit"] and {"cca_eta", "cca_dev_rsum"} <= set(first["fit"])
    for split in ("dev", "test"):
        assert resumed[split] == pytest.approx(first[split], abs=1e-6), split
    assert resumed["pieces"] == first["pieces"] + 1


# --- Each stage alone -----------------------------------------------------------------------------------------------


def tiny_config(*overrides):
    """The experiment config of the tiny `gru` run (tests/conftest.py's TINY), with `overrides`."""
    return registry.get("gru").experiment("quick", [*TINY[1::2], *overrides])


@pytest.fixture(scope="module")
def new_run(tmp_path_factory):
    """A new tiny `gru` run, built and nothing more: (the trainer, what its build returned)."""
    trainer = training.Trainer(tiny_config(), tmp_path_factory.mktemp("built") / "run")
    return trainer, trainer.build()


@pytest.fixture
def finished_copy(trained, short_test_data, tmp_path):
    """A copy of the tiny `gru` run without its results.json and export, built again to resume: (the trainer,
    what its build returned). Tested on 100 images, its export without an image backbone (`light_copy`)."""
    run = light_copy(trained, tmp_path / "run", data=short_test_data, leave_out=("saved_model", "results.json", "logs"))
    trainer = training.Trainer(load_run(run).experiment, run, resume=True)
    return trainer, trainer.build()


def test_build_alone_reads_the_inputs_builds_the_model_and_writes_config_and_vocabulary_only(new_run):
    trainer, built = new_run
    assert sorted(path.name for path in trainer.model_dir.iterdir()) == ["config.json", "vocab.json"]
    # 160 training images × 5 captions: 800 pairs, 25 batches of 32; the first 100 dev images; all 1,000 test images.
    assert len(built.train_data.token_ids) == 800 and built.steps_per_epoch == 25
    assert (len(built.dev_split.images), len(built.dev_split.captions)) == (100, 500)
    assert (len(built.test_split.images), len(built.test_split.captions)) == (1000, 5000)
    assert int(built.state.global_step) == 0 and built.best.latest_checkpoint is None
    assert load_run(trainer.model_dir).image_features.width == built.model.image_features.width == 1280


def dev_recalls(model):
    """The recalls of `model` on the first 100 dev images, by hand: their rows of dev_ims.npy, their 500 captions
    (five an image, in order), each query's rank the number of candidates scored above its best true one."""
    images = np.load(EMBEDDED_DATA / "dev_ims.npy")[:100].astype(np.float32)
    captions = (EMBEDDED_DATA / "dev_caps.txt").read_text().splitlines()[:500]
    sims = np.asarray(model.similarity(model.encode_image(images),
                                       model.encode_text(model.vectorizer(tf.constant(captions)))), np.float64)
    caption_image = np.repeat(np.arange(100), 5)
    i2t = np.array([min((row > row[c]).sum() for c in np.flatnonzero(caption_image == i)) for i, row in enumerate(sims)])
    t2i = np.array([(sims[:, c] > sims[image, c]).sum() for c, image in enumerate(caption_image)])
    recalls = {f"{direction}_r{k}": 100 * np.mean(ranks < k) for direction, ranks in (("i2t", i2t), ("t2i", t2i))
               for k in (1, 5, 10)}
    return {**recalls, "rsum": sum(recalls.values())}


def test_validate_alone_is_the_dev_evaluation_of_the_current_weights(new_run):
    trainer, built = new_run
    first = trainer.validate(built)
    assert {name: first[name] for name in dev_recalls(built.model)} == pytest.approx(dev_recalls(built.model), abs=1e-6)
    randomize_weights(built.model, seed=1, scale=0.1)
    second = trainer.validate(built)  # the weights it holds now, through the functions it traced before
    assert second["rsum"] != first["rsum"]
    assert {name: second[name] for name in dev_recalls(built.model)} == pytest.approx(dev_recalls(built.model),
                                                                                     abs=1e-6)


def test_test_alone_evaluates_the_best_weights_and_writes_results_that_read_back(finished_copy, trained):
    trainer, built = finished_copy
    results = trainer.test(built)
    assert RunResults.read(json.loads((trainer.model_dir / "results.json").read_text()), "results.json") == results
    assert not (trainer.model_dir / "saved_model").exists()
    # What evaluate.py gives for the run's best checkpoint: the model rebuilt from config.json, its best weights.
    scorer = CheckpointScorer.from_model_dir(trainer.model_dir)
    _, dev, test = load_experiment_splits(trainer.config.data, validate_max_images=100)
    assert results.test == pytest.approx(evaluation.evaluate(scorer, test), abs=1e-6)
    # No fit in this process: dev is the best weights' validation again.
    assert results.dev == pytest.approx(evaluation.evaluate(scorer, dev, sentence_similarity=False), abs=1e-6)
    best = json.loads((trained / "results.json").read_text())["checkpoint"]
    assert (results.checkpoint, results.epochs, results.fit) == (best, 2.0, {})  # TINY: 2 epochs


def test_export_alone_writes_the_best_weights_as_a_saved_model(finished_copy):
    trainer, built = finished_copy
    path = trainer.export(built)
    assert path == trainer.model_dir / "saved_model" and not (trainer.model_dir / "results.json").exists()
    exported, checkpoint = SavedModelScorer(path), CheckpointScorer.from_model_dir(trainer.model_dir)
    images = np.load(EMBEDDED_DATA / "test_ims.npy")[:8].astype(np.float32)
    captions = (EMBEDDED_DATA / "test_caps.txt").read_text().splitlines()[:40]
    # The same float32 operations on the same weights, in a graph or eagerly: to float32's roundoff on scores ~1.
    np.testing.assert_allclose(
        exported.similarity(exported.encode_images(images), exported.encode_texts(captions)),
        checkpoint.similarity(checkpoint.encode_images(images), checkpoint.encode_texts(captions)),
        rtol=1e-5, atol=1e-6)


def test_under_mixed_precision_test_and_export_are_float32s_without_building_the_model_again(short_test_data, tmp_path,
                                                                                               monkeypatch):
    # A bfloat16 run's best weights (random ones, checkpointed as the best): its test numbers and its export are
    # those of the model rebuilt in float32 (what evaluate.py builds), which the trainer no longer builds. Tested
    # on 100 images; its data records no provenance, so the export takes features only (no image backbone).
    skip_where_bfloat16_crashes()
    built_models = []
    build_model = registry.ModelSpec.build_model
    monkeypatch.setattr(registry.ModelSpec, "build_model",
                        lambda spec, *args: built_models.append(args) or build_model(spec, *args))
    config = tiny_config("runtime.mixed_precision=bf16", f"data.path={short_test_data}")
    trainer = training.Trainer(config, tmp_path / "run")
    built = trainer.build()
    randomize_weights(built.model, scale=0.1)
    built.best.save(checkpoint_number=0)
    results = trainer.test(built)
    trainer.export(built)
    assert len(built_models) == 1
    scorer = CheckpointScorer.from_model_dir(trainer.model_dir)
    assert results.test == pytest.approx(evaluation.evaluate(scorer, built.test_split), abs=1e-6)
    # In bfloat16 (its roundoff 3.9e-3) the scores of these captions move by far more than 1e-6.
    captions = (EMBEDDED_DATA / "test_caps.txt").read_text().splitlines()[:40]
    images = built.test_split.images[:8]
    want = scorer.similarity(scorer.encode_images(images), scorer.encode_texts(captions))
    exported = SavedModelScorer(trainer.model_dir / "saved_model")
    np.testing.assert_allclose(exported.similarity(exported.encode_images(images), exported.encode_texts(captions)),
                               want, rtol=1e-5, atol=1e-6)
    mixed = built.scorer.similarity(built.scorer.encode_images(images), built.scorer.encode_texts(captions))
    assert np.abs(mixed - want).max() > 1e-4
