"""Tests of `engine.training_loop`'s bookkeeping, on a loop made without a
model run (`bare_loop`): when a phase is over, the learning rate of a
phase, an epoch and the plateaus, what a validation keeps (the best
checkpoint, the patience, early stopping), a fitted model validated from
its own dev scores, the writers of a worker that is not the chief, and a
checkpoint that cannot be written. (The loop training real models, its
phases and its resumption run in tests/engine/test_training.py,
tests/test_train.py and the training tests of each family.)"""

import json
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from common.config import TrainConfig
from models.base_config import ExperimentConfig
from common.errors import InputError
from data.splits import DataConfig
from engine import training, training_loop
from engine.training_loop import TrainingLoop, TrainingState
from models.base import Fit


@pytest.mark.parametrize("epochs_in_all, epoch, over", [
    (None, 199, False), (None, 200, False), (None, 236, False), (None, 237, True),
    (200, 199, False), (200, 200, True),
])
def test_epochs_in_all_cap_the_phases_together(epochs_in_all, epoch, over):
    # The last of two phases started at epoch 37: 200 epochs of its own end at 237; 200 in all, at 200.
    loop = types.SimpleNamespace(
        cfg=types.SimpleNamespace(train=TrainConfig(epochs=200, phase_patience=10, epochs_in_all=epochs_in_all)),
        state=types.SimpleNamespace(epoch=epoch, phase_start_epoch=37, phase=1, validations_since_best=0),
        model=types.SimpleNamespace(num_phases=2),
    )
    assert training_loop.TrainingLoop._phase_over(loop) is over
    assert training.epochs_at_most(loop.model, loop.cfg.train) == (epochs_in_all or 400)


@pytest.mark.parametrize("phase, waited, over", [(0, 2, False), (0, 3, True), (1, 3, False), (1, 50, False)])
def test_a_phase_before_the_last_ends_after_its_patience_the_last_never(phase, waited, over):
    loop = types.SimpleNamespace(
        cfg=types.SimpleNamespace(train=TrainConfig(epochs=10, phase_patience=3)),
        state=types.SimpleNamespace(epoch=4, phase_start_epoch=2, phase=phase, validations_since_best=waited),
        model=types.SimpleNamespace(num_phases=2),
    )
    assert TrainingLoop._phase_over(loop) is over


class Managers:
    """A checkpoint manager that records the numbers it saves."""

    def __init__(self, directory="ckpt", error=None):
        self.directory, self.error, self.saved = directory, error, []

    def save(self, checkpoint_number):
        if self.error:
            raise self.error
        self.saved.append(checkpoint_number)


def bare_loop(num_phases=1, validations=(), **train):
    """A TrainingLoop made without __init__ (no model, scorer or train
    step): a fresh TrainingState, an SGD optimizer, no-op writers, and
    `validate` giving {"rsum": v, ...} for each v of `validations` in
    turn."""
    loop = object.__new__(TrainingLoop)
    loop.cfg = ExperimentConfig(model_name="test", preset="paper", model=types.SimpleNamespace(),
                                train=TrainConfig(**train), data=DataConfig())
    loop.model = types.SimpleNamespace(num_phases=num_phases)
    loop.state = TrainingState()
    loop.validation_due = tf.Variable(False)  # set by an interrupted validation
    loop.fit_chosen = tf.Variable("")  # what a fit chose, as JSON
    loop.optimizer = keras.optimizers.SGD(1.0)
    loop.best, loop.last = Managers("best"), Managers("last")
    loop.train_writer, loop.dev_writer = training_loop.summary_writers(None, is_chief=False)
    loop.time_spent, loop.stop, loop.best_dev_metrics = None, False, None
    scores = iter(validations)
    loop.validated = 0

    def validate():
        loop.validated += 1
        return {"rsum": next(scores), "i2t_r1": 0.0, "t2i_r1": 0.0, "i2t_map": 0.0}

    loop.validate = validate
    return loop


def test_the_learning_rate_decays_by_the_phases_own_epochs_and_the_plateaus():
    loop = bare_loop(num_phases=2, learning_rate=1.0, lr_decay_epochs=(2, 5), lr_decay_factor=0.5,
                     phase_learning_rates=(0.25,))
    rates = {}
    for phase, start, epoch, plateaus in [(0, 0, 0, 0), (0, 0, 2, 0), (0, 0, 5, 0), (0, 0, 5, 1), (1, 6, 6, 0),
                                          (1, 6, 7, 0), (1, 6, 8, 0), (1, 6, 11, 2)]:
        loop.state.phase.assign(phase)
        loop.state.phase_start_epoch.assign(start)
        loop.state.epoch.assign(epoch)
        loop.state.plateau_reductions.assign(plateaus)
        loop._set_learning_rate()
        rates[phase, epoch, plateaus] = float(loop.optimizer.learning_rate)
    # Phase 0 at 1.0, phase 1 at 0.25; halved at its own epochs 2 and 5 and at each plateau.
    assert rates == pytest.approx({(0, 0, 0): 1.0, (0, 2, 0): 0.5, (0, 5, 0): 0.25, (0, 5, 1): 0.125,
                                   (1, 6, 0): 0.25, (1, 7, 0): 0.25, (1, 8, 0): 0.125, (1, 11, 2): 0.25 / 16})


def test_validations_keep_the_best_count_the_patience_lower_the_rate_and_stop_early():
    # Dev rsum 10, 12, 11, 11, 11: best at the second; a plateau every 2 validations without improvement;
    # early stopping after 3.
    loop = bare_loop(validations=[10.0, 12.0, 11.0, 11.0, 11.0], learning_rate=1.0, lr_decay_factor=0.1, epochs=30,
                     plateau_patience=2, early_stopping_patience=3)
    seen = []
    for step in (5, 10, 15, 20, 25):
        loop.state.global_step.assign(step)
        loop._validate_and_save(loop.validate())
        seen.append((float(loop.state.best_score), int(loop.state.validations_since_best),
                     int(loop.state.plateau_reductions), round(float(loop.optimizer.learning_rate), 6), loop.stop))
    assert seen == [(10.0, 0, 0, 1.0, False), (12.0, 0, 0, 1.0, False), (12.0, 1, 0, 1.0, False),
                    (12.0, 2, 1, 0.1, False), (12.0, 3, 1, 0.1, True)]
    assert loop.best.saved == [5, 10] and loop.last.saved == [5, 10, 15, 20, 25]
    assert loop.best_dev_metrics["rsum"] == 12.0
    # The stop is part of the state: a resumed run finds its epochs used up.
    assert int(loop.state.epoch) == 30 and loop._phase_over()


def test_early_stopping_waits_for_the_last_phase():
    loop = bare_loop(num_phases=2, validations=[10.0, 9.0, 9.0, 9.0], early_stopping_patience=2)
    for _ in range(4):
        loop._validate_and_save(loop.validate())
    assert not loop.stop and int(loop.state.validations_since_best) == 3


def test_the_selection_metric_chooses_the_best():
    loop = bare_loop(selection_metric="i2t_map")
    loop._validate_and_save({"rsum": 300.0, "i2t_r1": 1.0, "t2i_r1": 1.0, "i2t_map": 0.2})
    loop.state.global_step.assign(1)
    loop._validate_and_save({"rsum": 100.0, "i2t_r1": 1.0, "t2i_r1": 1.0, "i2t_map": 0.3})  # lower rsum, better mAP
    assert loop.best.saved == [0, 1] and float(loop.state.best_score) == pytest.approx(0.3)


def test_a_fitted_model_is_validated_from_its_own_dev_scores():
    # 2 images, captions of images [0, 0, 1, 1]. Image 0's best caption is caption 2 (image 1's), its own
    # caption 0 second: i2t ranks 2 and 1. Caption 1's best image is image 1, caption 2's image 0: t2i ranks
    # 1, 2, 2, 1. So i2t and t2i R@1 are 50, R@5 and R@10 100: rsum 500.
    scores = np.array([[0.5, 0.1, 0.9, 0.0], [0.0, 0.2, 0.1, 0.8]])
    loop = bare_loop()
    loop.dev_split = types.SimpleNamespace(caption_image=np.array([0, 0, 1, 1]))
    fitted = []

    def fit_split(train_split, dev_split, writer, seed):
        fitted.append((train_split, dev_split, seed))
        return Fit(chosen={"eta": 0.5}, dev_scores=scores)

    loop.model = types.SimpleNamespace(num_phases=1, fit_split=fit_split)
    assert loop.fit_split("train split") == {"eta": 0.5}
    assert fitted == [("train split", loop.dev_split, 0)]
    assert loop.validated == 0  # dev is not scored a second time
    metrics = loop.best_dev_metrics
    assert (metrics["i2t_r1"], metrics["t2i_r1"], metrics["i2t_r5"], metrics["t2i_r10"], metrics["rsum"]) == (
        50.0, 50.0, 100.0, 100.0, 500.0)
    assert loop.best.saved == [0] and loop.last.saved == [0]
    assert json.loads(loop.fit_chosen.numpy()) == {"eta": 0.5}  # checkpointed with the state


def test_a_resumed_fit_returns_its_checkpointed_choices_without_fitting_or_validating_again():
    loop = bare_loop()
    loop.model = types.SimpleNamespace(num_phases=1, fit_split=lambda *args: pytest.fail("fitted again"))
    loop.state.best_score.assign(240.0)  # restored: the fit was validated
    loop.fit_chosen.assign('{"eta": 0.5}')
    assert loop.fit_split("train split") == {"eta": 0.5}
    assert loop.validated == 0 and loop.best.saved == [] and loop.last.saved == []


def test_a_fit_without_dev_scores_is_validated_by_scoring_dev():
    loop = bare_loop(validations=[42.0])
    loop.dev_split = None
    loop.model = types.SimpleNamespace(num_phases=1, fit_split=lambda *args: Fit(chosen={}))
    loop.fit_split("train split")
    assert loop.validated == 1 and float(loop.state.best_score) == 42.0


def test_a_worker_that_is_not_the_chief_writes_no_logs(tmp_path):
    train_writer, dev_writer = training_loop.summary_writers(tmp_path / "logs", is_chief=False)
    with train_writer.as_default(step=1):
        tf.summary.scalar("loss", 1.0)
    assert not (tmp_path / "logs").exists()
    train_writer, dev_writer = training_loop.summary_writers(tmp_path / "logs", is_chief=True)
    with dev_writer.as_default(step=1):
        tf.summary.scalar("rsum", 1.0)
    dev_writer.flush()
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["dev", "train"]
    assert list((tmp_path / "logs" / "dev").glob("events.out.tfevents.*"))


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"),
                                   tf.errors.ResourceExhaustedError(None, None, "quota exceeded")])
def test_a_checkpoint_that_cannot_be_written_is_one_line_naming_the_step(error):
    with pytest.raises(InputError) as raised:
        training_loop._save(Managers("runs/x/checkpoints", error), 7)
    message = str(raised.value)
    assert message.startswith("runs/x/checkpoints: the checkpoint of step 7 cannot be written (")
    assert message.endswith("the previous one is intact: free space, then continue with --resume")
    assert "\n" not in message


def test_a_new_training_state_starts_at_nothing():
    state = TrainingState()
    values = {name: variable.numpy() for name, variable in vars(state).items() if isinstance(variable, tf.Variable)}
    assert values == {"epoch": 0, "step_in_epoch": 0, "global_step": 0, "best_score": -1.0,
                      "validations_since_best": 0, "plateau_reductions": 0, "phase": 0, "phase_start_epoch": 0}
