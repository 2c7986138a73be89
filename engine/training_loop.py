"""The gradient loop of a training run (`engine.training`'s fit stage):
epochs of steps over the training batches, validations on dev and what
they decide (the best checkpoint, the patience, early stopping), the
latest checkpoints, the phases of a curriculum, and a fitted model's
single fit and validation."""

import contextlib
import json
import logging

import numpy as np
import tensorflow as tf

from common import diagnostics, progress
from common.errors import InputError, error_reason
from data import pipeline
from engine import evaluation
from engine.stop_signals import StopRequest, stop_requests
from engine.train_step import make_train_step

log = logging.getLogger("train")


def summary_writers(logs, is_chief):
    """TensorBoard writers of the training and dev scalars (no-op writers
    on a worker that is not the chief)."""
    if not is_chief:
        return tf.summary.create_noop_writer(), tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(str(logs / "train")), tf.summary.create_file_writer(str(logs / "dev"))


class TrainingState(tf.Module):
    """The counters a resumed run needs, saved in every checkpoint."""

    def __init__(self):
        super().__init__()
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.step_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False)
        # The best dev value of `train.selection_metric` (all are >= 0).
        self.best_score = tf.Variable(-1.0, dtype=tf.float64, trainable=False)
        self.validations_since_best = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.plateau_reductions = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.phase = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.phase_start_epoch = tf.Variable(0, dtype=tf.int64, trainable=False)


class TrainingLoop:
    """The epoch/step loop of a `Trainer`'s fit: trains `model` (or fits
    it), validates it with `validate`, keeps the best weights in the `best`
    checkpoint manager and the training state in `last`.

    Args:
      config: the `ExperimentConfig`.
      strategy: the tf.distribute strategy the model was built under.
      model, optimizer: built, the optimizer's variables created.
      state: the `TrainingState` (restored when resuming).
      validation_due: a boolean variable checkpointed in `last` beside
        the state: whether its step's validation is still to do (the run
        stopped during it), which `train` then does first.
      fit_chosen: a string variable checkpointed in `last` beside the
        state: what a fitted model's fit chose, as JSON (`fit_split`).
      last, best: `tf.train.CheckpointManager`s.
      dev_split: the `RetrievalSplit` of validation (a fitted model
        chooses its settings on it).
      validate: a function of no arguments: the dev metrics of the model's
        current weights (`engine.training.Trainer.validate`).
      writers: (train, dev) `tf.summary` writers.
      time_spent: the run's `TimeSpent`, saved at every log line and
        checkpoint (None: not saved, on a worker that is not the chief).
    """

    def __init__(self, config, strategy, model, optimizer, state, validation_due, fit_chosen, last, best, dev_split,
                 validate, writers, time_spent):
        self.cfg = config
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.validation_due = validation_due
        self.fit_chosen = fit_chosen
        self.last = last
        self.best = best
        self.dev_split = dev_split
        self.validate = validate
        self.train_writer, self.dev_writer = writers
        self.time_spent = time_spent
        self.stop = False
        self.best_dev_metrics = None
        self.pace = None  # a `RunPace` of the run's steps (gradient training)
        self._enter_phase()

    def train(self, train_data):
        """Trains by gradient steps until the last phase is over. A SIGINT
        or SIGTERM stops it between two steps, with a checkpoint of the
        step it stopped at (`engine.stop_signals`): KeyboardInterrupt. A
        validation is interrupted (a resumed run does it first)."""
        with self._stop_requests() as stop_request:
            self._train(train_data, stop_request)

    def _stop_requests(self):
        # The workers of a cluster would stop at different steps, waiting
        # for one another: there a signal acts at once.
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return contextlib.nullcontext(StopRequest())
        return stop_requests()

    def _train(self, train_data, stop_request):
        tc = self.cfg.train
        self._log_hparams()
        # Gradient norms and the model's diagnostics, summarised between log
        # steps (see `diagnostics`).
        window = diagnostics.WindowSummary()
        if bool(self.validation_due):
            log.info("validating step %d first: the run stopped during its validation", int(self.state.global_step))
            self._validate_and_save(self._validate(stop_request))
        while not self.stop:
            if stop_request:
                raise KeyboardInterrupt  # asked for after the validation that ended the epoch, which checkpointed
            if self._phase_over():
                if int(self.state.phase) == self.model.num_phases - 1:
                    break
                self._next_phase()
            epoch = int(self.state.epoch)
            # The phase's last epoch, at most (early stopping may end it sooner).
            last_epoch = int(self.state.phase_start_epoch) + tc.epochs
            if tc.epochs_in_all:
                last_epoch = min(last_epoch, tc.epochs_in_all)
            self._set_learning_rate()
            batches = pipeline.epoch_order(
                train_data, tc.sampling, tc.batch_size, tc.seed, epoch, tc.bucket_by_length
            )
            skip = int(self.state.step_in_epoch)
            dataset = self._distribute(train_data, batches[skip:])
            # Pairs of the epoch, so the bar shows pairs/s and the epoch's ETA.
            bar = progress.bar(total=len(batches) * tc.batch_size, initial=skip * tc.batch_size, unit="pair",
                               desc=f"epoch {epoch + 1} of {last_epoch}", leave=True)
            train_step = self._train_step_for(dataset)
            for batch in dataset:
                result = train_step(batch)
                loss = float(result["loss"])
                if not np.isfinite(loss):
                    raise FloatingPointError(f"training loss became {loss} at step {int(self.state.global_step)}")
                reductions = train_step.diagnostic_reductions
                window.add({"grad_norm": (float(result["grad_norm"]), "mean"),
                            "grad_norm_max": (float(result["grad_norm"]), "max"),
                            **{f"diagnostics/{name}": (float(value), reductions[name])
                               for name, value in result["diagnostics"].items()}})
                self.state.step_in_epoch.assign_add(1)
                self.state.global_step.assign_add(1)
                step = int(self.state.global_step)
                self.pace.tick(step)
                bar.update(tc.batch_size)
                bar.set_postfix(step=step, loss=f"{loss:.4g}", run_left=self.pace.left(step) or "?", refresh=False)
                if step % tc.log_every == 0:
                    summary = window.flush()
                    with self.train_writer.as_default(step=step):
                        tf.summary.scalar("loss", loss)
                        tf.summary.scalar("learning_rate", float(self.optimizer.learning_rate))
                        tf.summary.scalar("phase", int(self.state.phase))
                        for name, value in summary.items():
                            tf.summary.scalar(name, value)
                    self._save_time_spent()
                    left = self.pace.left(step)
                    log.info("epoch %d step %d loss %.4f grad norm %.3g (max %.3g since the last line)%s", epoch + 1,
                             step, loss, summary["grad_norm"], summary["grad_norm_max"],
                             f"; about {left} of the run left" if left else "")
                # The epoch counter moves before the end-of-epoch checkpoint,
                # so a resumed run starts the next epoch.
                epoch_done = int(self.state.step_in_epoch) == len(batches)
                if epoch_done:
                    self.state.epoch.assign_add(1)
                    self.state.step_in_epoch.assign(0)
                if epoch_done:
                    bar.close()
                validated = epoch_done or (tc.validate_every and step % tc.validate_every == 0)
                if validated:
                    self._validate_and_save(self._validate(stop_request))
                    if self.stop or self._phase_over():
                        break
                if stop_request:
                    if not validated:
                        self._save_time_spent()
                        _save(self.last, step)  # mid-epoch: a resumed run goes on from the next step
                    bar.close()
                    raise KeyboardInterrupt
            bar.close()

    def fit_split(self, train_split):
        """Fits a model that is not trained by gradients, then validates
        and checkpoints it once; returns what the fit chose. A resumed run
        whose fit was checkpointed (it stopped in its test or its export)
        is not fitted again: the checkpoint holds the model and its
        choices."""
        if float(self.state.best_score) >= 0:  # validated: the fit's checkpoint was restored
            chosen = self.fit_chosen.numpy().decode()
            log.info("the fit is in the checkpoint: not fitted again%s", "" if chosen else
                     " (a checkpoint that does not hold what the fit chose: results.json will not list it)")
            return json.loads(chosen) if chosen else {}
        self._log_hparams()
        fit = self.model.fit_split(train_split, self.dev_split, self.train_writer, self.cfg.train.seed)
        log.info("fit: %s", ", ".join(f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}"
                                      for name, value in fit.chosen.items()))
        self.fit_chosen.assign(json.dumps(fit.chosen))
        self._validate_and_save(self.validate() if fit.dev_scores is None else
                                evaluation.evaluate_scores(fit.dev_scores, self.dev_split.caption_image))
        return fit.chosen

    def _phase_over(self):
        """Whether the current phase has used its epochs, or (a phase before
        the last) its patience."""
        tc = self.cfg.train
        state = self.state
        if int(state.epoch) >= int(state.phase_start_epoch) + tc.epochs:
            return True
        if tc.epochs_in_all and int(state.epoch) >= tc.epochs_in_all:
            return True
        last = int(state.phase) == self.model.num_phases - 1
        return not last and tc.phase_patience > 0 and int(state.validations_since_best) >= tc.phase_patience

    def _next_phase(self):
        """Starts the next phase from the best weights so far, with a fresh
        optimizer state, at the start of an epoch; checkpointed at once."""
        state = self.state
        tf.train.Checkpoint(model=self.model).restore(self.best.latest_checkpoint).expect_partial()
        # The moments, not a loss scale.
        for variable in getattr(self.optimizer, "inner_optimizer", self.optimizer).variables:
            variable.assign(tf.zeros_like(variable))
        if int(state.step_in_epoch):
            state.epoch.assign_add(1)
            state.step_in_epoch.assign(0)
        state.phase.assign_add(1)
        state.phase_start_epoch.assign(state.epoch)
        state.validations_since_best.assign(0)
        state.plateau_reductions.assign(0)
        self._enter_phase()
        log.info("phase %d starts at epoch %d from the best checkpoint (dev %s %.4g)",
                 int(state.phase), int(state.epoch) + 1, self.cfg.train.selection_metric, float(state.best_score))
        _save(self.last, int(state.global_step))

    def _enter_phase(self):
        self.model.start_phase(int(self.state.phase))
        self._set_learning_rate()
        # Made at the phase's first batches, for their spec (`_train_step_for`).
        self.train_step = None

    def _train_step_for(self, dataset):
        """The phase's train step (traced for its loss), made once for the
        spec of its batches: one trace for every caption length."""
        if self.train_step is None:
            tc = self.cfg.train
            self.train_step = make_train_step(self.model, self.optimizer, self.strategy, tc.grad_clip_norm,
                                              self.cfg.runtime.jit_compile, batch_spec=dataset.element_spec)
        return self.train_step

    def _validate(self, stop_request):
        """The dev metrics of the weights; a stop asked for meanwhile
        interrupts the validation, after a checkpoint of the step with its
        validation due (`train` does it first when the run resumes)."""
        try:
            with stop_request.interrupting():
                return self.validate()
        except KeyboardInterrupt:
            self.validation_due.assign(True)
            self._save_time_spent()
            _save(self.last, int(self.state.global_step))
            raise

    def _validate_and_save(self, result):
        """Logs a validation's `result` (the dev metrics), keeps the best
        checkpoint, counts the patience and checkpoints the step."""
        tc = self.cfg.train
        step = int(self.state.global_step)
        with self.dev_writer.as_default(step=step):
            for name, value in result.items():
                tf.summary.scalar(name, value)
        score = result[tc.selection_metric]
        improved = score > float(self.state.best_score)
        log.info("dev at step %d: rsum %.1f (i2t R@1 %.1f, t2i R@1 %.1f, i2t mAP %.3f)%s", step, result["rsum"],
                 result["i2t_r1"], result["t2i_r1"], result["i2t_map"],
                 f"  new best {tc.selection_metric}" if improved else "")
        if improved:
            self.state.best_score.assign(score)
            self.best_dev_metrics = result
            self.state.validations_since_best.assign(0)
            _save(self.best, step)
        else:
            self.state.validations_since_best.assign_add(1)
            waited = int(self.state.validations_since_best)
            if tc.plateau_patience and waited % tc.plateau_patience == 0:
                self.state.plateau_reductions.assign_add(1)
                self._set_learning_rate()
            last_phase = int(self.state.phase) == self.model.num_phases - 1
            if last_phase and tc.early_stopping_patience and waited >= tc.early_stopping_patience:
                log.info("early stopping: %d validations without improvement", waited)
                self.stop = True
                # The stop is part of the state: a resumed run must not go on.
                self.state.epoch.assign(int(self.state.phase_start_epoch) + tc.epochs)
        self.validation_due.assign(False)
        self._save_time_spent()  # first, so that a checkpoint never lacks the time that led to it
        _save(self.last, step)

    def _save_time_spent(self):
        if self.time_spent is not None:
            self.time_spent.save()

    def _set_learning_rate(self):
        tc = self.cfg.train
        phase = int(self.state.phase)
        base = tc.phase_learning_rates[phase - 1] if phase and tc.phase_learning_rates else tc.learning_rate
        # Step decay counts the phase's own epochs.
        epoch_in_phase = int(self.state.epoch) - int(self.state.phase_start_epoch)
        decays = sum(epoch_in_phase >= e for e in tc.lr_decay_epochs)
        decays += int(self.state.plateau_reductions)
        self.optimizer.learning_rate.assign(base * tc.lr_decay_factor**decays)

    def _log_hparams(self):
        from tensorboard.plugins.hparams import api as hparams

        flat = {"model_name": self.cfg.model_name, "preset": self.cfg.preset}
        for section in ("model", "train", "data", "runtime"):
            for key, value in vars(getattr(self.cfg, section)).items():
                flat[f"{section}.{key}"] = value if isinstance(value, (bool, int, float, str)) else str(value)
        with self.dev_writer.as_default():
            hparams.hparams(flat)

    def _distribute(self, data, batches):
        """A distributed dataset giving each replica its share of each batch."""
        strategy = self.strategy
        replicas = strategy.num_replicas_in_sync

        def dataset_fn(context):
            # [steps, replicas, per_replica]: this input pipeline's replicas.
            per_replica = batches.reshape(len(batches), replicas, -1)
            local = replicas // context.num_input_pipelines
            first = context.input_pipeline_id * local
            mine = per_replica[:, first : first + local].reshape(-1, per_replica.shape[-1])
            return pipeline.training_dataset(data, mine)

        return strategy.distribute_datasets_from_function(dataset_fn)


def _save(manager, number):
    """Writes a checkpoint; a full disk or a quota is an `InputError` (the
    manager's index still names the previous, complete checkpoint)."""
    try:
        manager.save(checkpoint_number=number)
    except (OSError, tf.errors.OpError) as error:
        raise InputError(f"{manager.directory}: the checkpoint of step {number} cannot be written ({error_reason(error)}); "
                         "the previous one is intact: free space, then continue with --resume") from None
