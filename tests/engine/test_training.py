"""The trainer's training step and phases (a curriculum such as Vilalta et al.'s PH), and a fitted model's validation."""

import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import train
from common.config import TrainConfig
from common.errors import InputError
from common.metrics import METRIC_NAMES
from data.splits import load_experiment_splits
from engine import evaluation, runtime, training, training_loop
from engine.scoring import CheckpointScorer
from engine.train_step import make_optimizer, make_train_step
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from models.restore import restore_model
from tests.conftest import TINY
from tests.helpers import skip_where_bfloat16_crashes
from tests.models.test_registered_models import batch, tiny_model

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

    def validate_metrics(loop):
        done = len([e for e in events if e[0] == "validate"])
        rsum = SCRIPTED_RSUM[done] if done < len(SCRIPTED_RSUM) else 9.0
        events.append(("validate", rsum, int(loop.state.phase), type(loop.model.hinge),
                       [w.copy() for w in loop.model.get_weights()]))
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
        monkeypatch.setattr(training_loop.TrainingLoop, "validate_metrics", validate_metrics)
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

    def validate_metrics(loop):
        rsum, i2t_map = scripted[min(len(seen), 2)]
        seen.append(int(loop.state.global_step))
        return {**dict.fromkeys(METRIC_NAMES, 0.0), "rsum": rsum, "i2t_map": i2t_map}

    monkeypatch.setattr(training_loop.TrainingLoop, "validate_metrics", validate_metrics)
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


def test_unknown_phase_hinge_is_an_input_error():
    from models import registry

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
    assert (config["model"]["image_input"], config["data"]["image_features"], config["image_dim"]) == ("fne", "stages", 3120)
    train_features = readers.load_precomp(data, "train", "stages").images[:160].astype(np.float64)
    checkpoint = tf.train.load_checkpoint(str(model_dir / "checkpoints"))
    assert checkpoint.get_tensor("state/phase/.ATTRIBUTES/VARIABLE_VALUE") == 1
    [mean_key] = [k for k in checkpoint.get_variable_to_shape_map() if "image_input/mean" in k]
    np.testing.assert_allclose(checkpoint.get_tensor(mean_key), train_features.mean(axis=0), rtol=1e-4, atol=1e-4)
    # The export applies them to raw per-layer features.
    loaded = tf.saved_model.load(str(model_dir / "saved_model"))
    test_features = readers.load_precomp(data, "test", "stages").images[:4].astype(np.float32)
    assert loaded.encode_image(test_features).shape == (4, 32)  # TINY embed_dim


def test_train_step_reports_the_gradient_norm_before_clipping():
    model = tiny_model("gru")
    images, token_ids = batch(size=6)
    image_index = tf.range(6, dtype=tf.int64)
    with tf.GradientTape() as tape:
        loss = model.pair_loss(model.encode_image(images), model.encode_text(token_ids), image_index)
    norm = tf.linalg.global_norm([tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)])
    before = [v.numpy() for v in model.trainable_variables]
    step = make_train_step(model, keras.optimizers.SGD(1.0), tf.distribute.get_strategy(), clip_norm=1e-3)
    result = step({"image_features": images, "token_ids": token_ids, "image_index": image_index})
    assert float(norm) > 1e-2
    np.testing.assert_allclose(result["grad_norm"], norm, rtol=1e-5)
    assert result["diagnostics"] == {}
    # The update itself was clipped: SGD at rate 1 moved the weights by 1e-3.
    moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(model.trainable_variables, before)))
    np.testing.assert_allclose(moved, 1e-3, rtol=1e-3)


def one_step(model, optimizer, clip_norm=None, jit_compile=False, size=6):
    images, token_ids = batch(size=size)
    step = make_train_step(model, optimizer, tf.distribute.get_strategy(), clip_norm, jit_compile)
    return step({"image_features": images, "token_ids": token_ids, "image_index": tf.range(size, dtype=tf.int64)})


@pytest.mark.parametrize("mixed_precision, compute", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_mixed_precision_computes_low_but_keeps_weights_similarity_loss_and_norms_float32(
    mixed_precision, compute
):
    if mixed_precision == "bf16":
        skip_where_bfloat16_crashes()
    keras.utils.set_random_seed(0)
    reference = tiny_model("gru")
    with runtime.dtype_policy(mixed_precision):
        keras.utils.set_random_seed(0)
        model = tiny_model("gru")
    assert keras.config.dtype_policy().name == "float32"  # restored
    assert model.sentence_encoder.compute_dtype == model.image_projection.compute_dtype == compute
    assert all(v.dtype == "float32" for v in model.variables if v.trainable)
    for layer in (model.text_norm, model.image_norm, model.similarity_layer):
        assert layer.compute_dtype == "float32"
    images, token_ids = batch(size=6)
    sims = model.similarity(model.encode_image(images), model.encode_text(token_ids))
    assert sims.dtype == tf.float32
    expected = reference.similarity(reference.encode_image(images), reference.encode_text(token_ids))
    np.testing.assert_allclose(sims, expected, atol=0.05)

    config = TrainConfig(optimizer="sgd", learning_rate=1.0)
    optimizer = make_optimizer(config, mixed_precision)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) == (mixed_precision == "fp16")
    if mixed_precision == "fp16":
        # Keras starts at 2**15, which this batch's gradients overflow (the
        # step would be skipped, next test); a scale they fit under.
        optimizer.build(model.trainable_variables)
        optimizer.dynamic_scale.assign(16.0)
    before = [v.numpy() for v in model.trainable_variables]
    result = one_step(model, optimizer, clip_norm=1e-3)
    expected = one_step(reference, keras.optimizers.SGD(1.0), clip_norm=1e-3)
    # The reported norm is the unscaled gradient's, and clipping acts on it.
    np.testing.assert_allclose(result["loss"], expected["loss"], rtol=0.05)
    np.testing.assert_allclose(result["grad_norm"], expected["grad_norm"], rtol=0.1)
    moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(model.trainable_variables, before)))
    np.testing.assert_allclose(moved, 1e-3, rtol=0.02)



def test_a_layer_loss_joins_the_float32_loss_under_mixed_precision():
    """The RCN's mask regulariser (eq. 15, a layer loss on bfloat16 masks)
    is added to the float32 ranking loss: the step's loss is float32's."""
    skip_where_bfloat16_crashes()
    keras.utils.set_random_seed(0)
    reference = tiny_model("rcn")
    with runtime.dtype_policy("bf16"):
        keras.utils.set_random_seed(0)
        model = tiny_model("rcn")
    result = one_step(model, keras.optimizers.SGD(0.0))
    assert model.losses and all(loss.dtype == tf.float32 for loss in model.losses)
    np.testing.assert_allclose(result["loss"], one_step(reference, keras.optimizers.SGD(0.0))["loss"], rtol=0.05)

def test_an_overflowing_float16_step_is_skipped_and_the_loss_scale_lowered():
    with runtime.dtype_policy("fp16"):
        model = tiny_model("gru")
    optimizer = make_optimizer(TrainConfig(), "fp16")
    optimizer.build(model.trainable_variables)
    optimizer.dynamic_scale.assign(2.0**60)  # overflows float16 at once
    before = [v.numpy() for v in model.trainable_variables]
    one_step(model, optimizer)
    assert float(optimizer.dynamic_scale) == 2.0**59
    for v, b in zip(model.trainable_variables, before):
        np.testing.assert_array_equal(v.numpy(), b)


def test_an_xla_compiled_step_equals_the_plain_one():
    keras.utils.set_random_seed(0)
    plain, compiled = tiny_model("gru"), tiny_model("gru")
    compiled.set_weights(plain.get_weights())
    expected = one_step(plain, keras.optimizers.SGD(0.1), clip_norm=2.0)
    result = one_step(compiled, keras.optimizers.SGD(0.1), clip_norm=2.0, jit_compile=True)
    np.testing.assert_allclose(result["loss"], expected["loss"], rtol=1e-5)
    np.testing.assert_allclose(result["grad_norm"], expected["grad_norm"], rtol=1e-5)
    for a, b in zip(compiled.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


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
    import shutil

    from tests.helpers import EMBEDDED_DATA

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("saved_model", "logs"))
    config = json.loads((run / "config.json").read_text())
    config["image_provenance"]["crops"] = 10
    (run / "config.json").write_text(json.dumps(config))
    assert train.main(["--model-dir", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {EMBEDDED_DATA / 'provenance.json'}: these features were made differently")
    assert str(run / "config.json") in err and err.count("\n") == 1


@pytest.mark.parametrize("epochs_in_all, epoch, over", [
    (None, 199, False), (None, 200, False), (None, 236, False), (None, 237, True),
    (200, 199, False), (200, 200, True),
])
def test_epochs_in_all_cap_the_phases_together(epochs_in_all, epoch, over):
    # The last of two phases started at epoch 37: 200 epochs of its own end at 237; 200 in all, at 200.
    import types

    loop = types.SimpleNamespace(
        cfg=types.SimpleNamespace(train=TrainConfig(epochs=200, phase_patience=10, epochs_in_all=epochs_in_all)),
        state=types.SimpleNamespace(epoch=epoch, phase_start_epoch=37, phase=1, validations_since_best=0),
        model=types.SimpleNamespace(num_phases=2),
    )
    assert training_loop.TrainingLoop._phase_over(loop) is over
    assert training.epochs_at_most(loop.model, loop.cfg.train) == (epochs_in_all or 400)


def test_the_full_network_embeddings_statistics_are_the_training_images(trained_fne):
    # The tiny run trained on the first 160 training images (TINY): its FNE standardises by their per-feature
    # mean and standard deviation, read here from the file by hand; the dev images' would be another model.
    from tests.helpers import EMBEDDED_DATA

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
    config, _ = restore_model(run)
    _, dev, _ = load_experiment_splits(config.data, validate_max_images=config.train.validate_max_images)
    want = evaluation.evaluate(CheckpointScorer.from_model_dir(run), dev, sentence_similarity=False)
    assert json.loads((run / "results.json").read_text())["dev"] == pytest.approx(want, abs=1e-6)


def test_a_fitted_model_is_validated_from_its_fit_without_scoring_dev_again(trained, trained_fv, monkeypatch,
                                                                             tmp_path):
    scored = []
    monkeypatch.setattr(training_loop.TrainingLoop, "validate_metrics", lambda loop: scored.append(1))
    argv = ["--model", "ensemble", "--model-dir", str(tmp_path / "run"), "--set", f"model.members={trained},{trained_fv}",
            "--set", "train.validate_max_images=100"]
    assert train.main(argv, export=False) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert not scored and results["dev"]["rsum"] == pytest.approx(results["fit"]["dev_recall_sum"], abs=0.5)
