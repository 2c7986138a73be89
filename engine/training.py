"""Training, shared by every model of the zoo, in three stages.

`Trainer(config, model_dir).run()` runs them: `prepare` reads the data,
makes the vocabulary and builds the model; `train` trains it by gradient
steps (or fits a `models.base.FittedModel`), validating on dev and keeping
the best checkpoint by a dev metric; `finish` evaluates the best weights on
test and exports them as a SavedModel, two steps a caller may leave out
(`run(evaluate_test=False, export=False)`: a checkpoint is all it needs).

Model directory layout ("best" = the best dev `train.selection_metric`,
rsum by default):
  config.json        the full experiment config (rebuilds the model), with
                     the runtime it ran with
  vocab.json         the vocabulary (train split only)
  checkpoints/       the latest training state: weights, optimizer, epoch,
                     step in epoch (the data order is a function of seed and
                     epoch, so this is the data position), best score
  best/              the weights with the best dev score so far
  logs/              TensorBoard: train/ (loss, learning rate, the gradient
                     norm before clipping: mean and max between log steps,
                     and the model's own diagnostics/...), dev/
                     (every metric), hparams
  results.json       dev and test metrics of the best checkpoint, what a
                     fitted model chose, the command line of train.py, the
                     epochs trained and the time the run took, for
                     `python -m tools.report` (`common.records.RunResults`
                     declares it; the times are sums over the processes
                     that trained the run, see `engine.time_spent`)
  time_spent.json    each process's (piece's) times, kept up to date while
                     it trains
  saved_model/       the export (see `engine.export`)

Writes are atomic: TensorFlow's checkpoint manager updates its index only
after a checkpoint is complete, JSON files and the SavedModel are written
aside and renamed, so killing a run at any moment leaves the previous state
usable by `--resume`.
"""

import dataclasses
import functools
import logging
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from common import diagnostics, machine, progress
from common.errors import InputError, error_reason
from common.files import write_json_atomically
from common.records import RunResults
from common.wording import counted
from data import pipeline, provenance, splits, word_vectors
from data.readers import RetrievalSplit
from data.vocabulary import Vocabulary
from engine import evaluation, model_dirs, runtime
from engine.export import export_saved_model
from engine.scoring import CheckpointScorer
from engine.run_pace import RunPace
from engine.time_spent import TimeSpent
from engine.train_step import make_optimizer, make_train_step
from layers.text_vectorizer import MAX_INPUT_TOKENS
from models import registry
from models.base import FittedModel, RetrievalModel
from models.restore import BEST_DIR, restore_checkpoint

log = logging.getLogger("train")

LAST_DIR = "checkpoints"
SAVED_MODEL_DIR = "saved_model"


@dataclasses.dataclass
class PreparedRun:
    """What `Trainer.prepare` makes ready for training and finishing.

    Attributes:
      train_split, test_split: the `RetrievalSplit`s (dev is the loop's).
      vocabulary: the run's `Vocabulary`.
      model: the built `RetrievalModel` (restored when resuming).
      loop: the `_TrainingLoop` that trains or fits it, with its state and
        checkpoint managers.
      time_spent: the run's `TimeSpent`.
      steps_per_epoch: set by `Trainer.train` for gradient training (None
        for a fitted model).
    """

    train_split: RetrievalSplit
    test_split: RetrievalSplit
    vocabulary: Vocabulary
    model: RetrievalModel
    loop: "_TrainingLoop"
    time_spent: TimeSpent
    steps_per_epoch: int | None = None


class Trainer:
    """Trains, validates, checkpoints, evaluates and exports one experiment.

    Args:
      config: an `ExperimentConfig`; its `runtime` section chooses the
        strategy and the precision, and is recorded in config.json (with
        the strategy "auto" stands for on this machine).
      model_dir: where everything is written.
      resume: continue the run in `model_dir` instead of starting one.
      command: the command line that started this process, for
        results.json.
    """

    def __init__(self, config, model_dir, resume=False, command=None):
        # config.json records the strategy the run used, not "auto".
        strategy = runtime.resolve_strategy(config.runtime.strategy)
        self.config = dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, strategy=strategy))
        self.command = command
        self.model_dir = Path(model_dir)
        self.strategy = runtime.make_strategy(strategy)
        self.resume = resume
        self.spec = registry.get(config.model_name)
        self.is_chief = runtime.is_chief(self.strategy)

    def run(self, evaluate_test=True, export=True):
        """Runs the experiment's three stages: `prepare` (the data, the
        vocabulary, the model), `train` (a gradient loop, or the fit of a
        `FittedModel`) and `finish` (the best weights, the test evaluation
        and the export, either of which a caller may leave out); returns
        what `finish` does."""
        prepared = self.prepare()
        fit = self.train(prepared)
        return self.finish(prepared, fit, evaluate_test=evaluate_test, export=export)

    def prepare(self):
        """Reads and checks every input, builds the model (restored from
        the newest intact checkpoint when resuming) and writes config.json
        and vocab.json; returns the `PreparedRun`."""
        self._check_model_dir()
        time_spent = TimeSpent(self.model_dir, self.resume, self.command)
        if not self.resume and self.spec.prepare:
            self.config = self.spec.prepare(self.config)
        train_split, dev_split, test_split = self._load_data()
        cfg = self.config
        if self.resume:
            vectors, vocabulary = None, Vocabulary.load(self.model_dir / "vocab.json")
        else:
            vectors = word_vectors.for_model(cfg.model.word_vectors, train_split.captions, cfg.model.tokenizer,
                                             cfg.model.word_dim, cfg.train.seed)
            # The vocabulary comes from the training captions only (and, for
            # some models, the word vectors): test words must not leak into
            # the model.
            vocabulary = self.spec.vocabulary(cfg.model, train_split.captions, vectors)
            log.info("vocabulary: %s", _vocabulary_origin(vocabulary, len(train_split.captions)))
        keras.utils.set_random_seed(cfg.train.seed)
        replicas = self.strategy.num_replicas_in_sync
        if cfg.train.batch_size % replicas:
            raise InputError(
                f"train.batch_size={cfg.train.batch_size} does not split evenly over {replicas} replicas"
            )
        with self.strategy.scope(), runtime.dtype_policy(cfg.runtime.mixed_precision):
            model = self.spec.build_model(cfg.model, vocabulary, cfg.image_dim)
            optimizer = make_optimizer(cfg.train, cfg.runtime.mixed_precision)
            optimizer.build(model.trainable_variables)
        # Plain (not mirrored) variables: the loop reads and sets them eagerly.
        state = _TrainingState()
        # The states of the dropout random generators too (not part of the
        # model's checkpoint graph), so a resumed run draws the same masks.
        random_states = [v for v in model.variables if "seed_generator_state" in v.path]
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state, random=random_states)
        last = tf.train.CheckpointManager(checkpoint, self._private_dir(LAST_DIR), max_to_keep=2)
        best = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), self._private_dir(BEST_DIR), max_to_keep=1)
        if self.resume and last.checkpoints:
            resumed = _restore_newest_intact(checkpoint, last, self.model_dir)
            log.info("resumed from %s (epoch %d, step %d of it)", resumed, int(state.epoch) + 1, int(state.step_in_epoch))
        else:
            # A resumed run killed before its first checkpoint starts over.
            model.adapt(train_split.images)
            if vectors is not None:
                log.info("%s: %s", cfg.model.word_vectors, model.set_word_vectors(vectors, cfg.train.seed))
                vectors = None  # the model keeps what it needs (a word vector file can be gigabytes)
        # Only once every input has been read and checked and the model is
        # built; config.json last, as it marks the folder as a run (`engine.model_dirs`).
        if self.is_chief:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            if not self.resume:
                vocabulary.save(self.model_dir / "vocab.json")
            write_json_atomically(self.model_dir / model_dirs.CONFIG_FILE, cfg.to_json() + "\n")

        writers = _summary_writers(self.model_dir / "logs", self.is_chief)
        loop = _TrainingLoop(cfg, self.strategy, model, optimizer, state, last, best, dev_split, writers,
                             time_spent if self.is_chief else None)
        return PreparedRun(train_split, test_split, vocabulary, model, loop, time_spent)

    def train(self, prepared):
        """Trains the prepared model by gradient steps, or fits it (a
        `FittedModel`), validating and checkpointing as it goes; returns
        what a fit chose (None for gradient training). Ctrl-C saves the
        run's time and says what is kept."""
        model, loop, train_split = prepared.model, prepared.loop, prepared.train_split
        if isinstance(model, FittedModel):
            log.info("plan: %s", self._plan(f"fitted to {len(train_split.captions):,} training captions "
                                            "(no gradient steps)"))
            work = functools.partial(loop.fit_split, train_split)
        else:
            tc = self.config.train
            train_data = pipeline.tokenize_split(train_split, model.vectorizer)
            prepared.steps_per_epoch = len(pipeline.epoch_order(train_data, tc.sampling, tc.batch_size, tc.seed, 0,
                                                                tc.bucket_by_length))
            total = epochs_at_most(model, tc) * prepared.steps_per_epoch
            loop.pace = RunPace(total, self._quick_preset_advice())
            phases = f"{model.num_phases} phases of " if model.num_phases > 1 else ""
            log.info("plan: %s", self._plan(
                f"{phases}{counted(tc.epochs, 'epoch')} × {counted(prepared.steps_per_epoch, 'step', spec=',')} "
                f"of {counted(tc.batch_size, 'pair')} ({counted(total, 'step', spec=',')} at most)"))
            work = functools.partial(loop.train, train_data)
        try:
            return work()
        except KeyboardInterrupt:
            if self.is_chief:
                prepared.time_spent.save()
            raise KeyboardInterrupt(self._what_is_kept(loop.last)) from None

    def finish(self, prepared, fit, evaluate_test=True, export=True):
        """Loads the best weights, then, each unless left out, evaluates
        them on the test split (and writes results.json) and exports them
        as a SavedModel; saves the run's time. Returns the `RunResults`
        (what results.json holds), or None when the test evaluation is left
        out (then no results.json is written: it records the test's numbers)."""
        cfg, loop = self.config, prepared.loop
        model = prepared.model
        best_checkpoint = loop.best.latest_checkpoint
        if cfg.runtime.mixed_precision != "none":
            # The test and the export in float32: the best weights (float32
            # under any policy) in a float32 model.
            model = self.spec.build_model(cfg.model, prepared.vocabulary, model.image_dim)
        restore_checkpoint(tf.train.Checkpoint(model=model), best_checkpoint).expect_partial()
        results = None
        if evaluate_test:
            # The best validation's metrics, unless this process never saw it.
            dev = loop.best_dev_metrics or loop.validate_metrics()
            test = evaluation.evaluate(CheckpointScorer(model), prepared.test_split)
            steps = prepared.steps_per_epoch
            results = RunResults(dev=dev, test=test, checkpoint=best_checkpoint, fit=fit or {},
                                 epochs=round(int(loop.state.global_step) / steps, 2) if steps else None,
                                 **prepared.time_spent.totals())
        if self.is_chief:
            prepared.time_spent.save()
            if results is not None:
                write_json_atomically(self.model_dir / "results.json", results.to_json())
            if export:
                export_saved_model(model, self.model_dir / SAVED_MODEL_DIR, cfg.data.image_features, cfg.image_provenance)
        return results

    def _plan(self, work):
        """The run in one line: model, preset, the `work` (steps or a fit),
        data, device, where."""
        cfg = self.config
        gpus = len(tf.config.list_physical_devices("GPU"))
        device = f"{gpus} GPU{'s' if gpus > 1 else ''}" if gpus else f"CPU ({counted(machine.cores(), 'core')})"
        precision = "float32" if cfg.runtime.mixed_precision == "none" else cfg.runtime.mixed_precision
        return (f"{cfg.model_name}, preset {cfg.preset}: {work}, on {cfg.data.path}; "
                f"{device}, {precision}, strategy {cfg.runtime.strategy}; into {self.model_dir}")

    def _quick_preset_advice(self):
        """What to say when the paper preset would take over an hour on a
        machine without a GPU (None otherwise): the quick preset's command,
        which works as written (a free model directory, this run's kept)."""
        if self.config.preset != "paper" or "quick" not in self.spec.presets or tf.config.list_physical_devices("GPU"):
            return None
        command = f"python train.py --model {self.config.model_name} --preset quick"
        default = model_dirs.default(self.config.model_name, "quick")
        free = model_dirs.free(default)
        return (f"the paper's settings are for a GPU; the 'quick' preset is sized for a CPU: "
                f"{command}{'' if free == default else f' --model-dir {free}'}")

    def _what_is_kept(self, last):
        """What an interrupted run leaves, and how to go on from it."""
        resume = f"python train.py --model-dir {self.model_dir} --resume"
        if last.latest_checkpoint is None:
            return f"no checkpoint was written yet; `{resume}` starts the run over"
        return f"the training state is kept in {last.latest_checkpoint}; continue with `{resume}`"

    def _check_model_dir(self):
        if not self.is_chief:
            # Other workers follow the chief, which writes config.json.
            return
        if self.resume:
            model_dirs.check_run(self.model_dir, "--resume")
        else:
            model_dirs.check_new(self.model_dir, self.config)

    def _private_dir(self, name):
        # Non-chief workers of a multi-worker run must write their (identical)
        # checkpoints elsewhere: only the chief's are kept.
        if self.is_chief:
            return str(self.model_dir / name)
        task = self.strategy.cluster_resolver.task_id
        return str(self.model_dir / ".workers" / str(task) / name)

    def _load_data(self):
        """The train, dev and test splits, read and checked before any
        training; sets the config's `image_dim` from the training features
        and, for a new run, its `image_provenance` from their folder."""
        cfg = self.config
        tc = cfg.train
        train_split, dev_split, test_split = splits.load_experiment_splits(
            cfg.data, tc.max_train_images, tc.validate_max_images
        )
        image_dim = train_split.images.shape[1]
        if self.resume and cfg.image_dim != image_dim:
            raise InputError(
                f"{cfg.data.path}: train features have dimension {image_dim}, the model being resumed expects {cfg.image_dim}"
            )
        if self.resume:  # on the features it started on
            provenance.check_same(cfg.image_provenance, self.model_dir / "config.json", cfg.data.path)
        recorded = cfg.image_provenance if self.resume else provenance.read(cfg.data.path)
        self.config = dataclasses.replace(cfg, image_dim=image_dim, image_provenance=recorded)
        for split in (train_split, dev_split, test_split):
            pipeline.check_captions(split, cfg.model.tokenizer, MAX_INPUT_TOKENS)
        pairs = len(train_split.images) if tc.sampling == "one_caption_per_image" else len(train_split.captions)
        if tc.batch_size > pairs:
            raise InputError(
                f"train.batch_size={tc.batch_size} is larger than the {pairs} training pairs of {train_split.captions_file} "
                f"(train.sampling={tc.sampling})"
            )
        return train_split, dev_split, test_split


def epochs_at_most(model, train_config):
    """The epochs of every phase of a run together, at most."""
    epochs = model.num_phases * train_config.epochs
    return min(epochs, train_config.epochs_in_all) if train_config.epochs_in_all else epochs


def _summary_writers(logs, is_chief):
    """TensorBoard writers of the training and dev scalars (no-op writers
    on a worker that is not the chief)."""
    if not is_chief:
        return tf.summary.create_noop_writer(), tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(str(logs / "train")), tf.summary.create_file_writer(str(logs / "dev"))


class _TrainingState(tf.Module):
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


class _TrainingLoop:
    """The epoch/step loop of a `Trainer`: trains `model` (or fits it),
    validates on `dev_split`, keeps the best weights in the `best`
    checkpoint manager and the training state in `last`.

    Args:
      config: the `ExperimentConfig`.
      strategy: the tf.distribute strategy the model was built under.
      model, optimizer: built, the optimizer's variables created.
      state: the `_TrainingState` (restored when resuming).
      last, best: `tf.train.CheckpointManager`s.
      dev_split: the `RetrievalSplit` of validation.
      writers: (train, dev) `tf.summary` writers.
      time_spent: the run's `TimeSpent`, saved at every log line and
        checkpoint (None: not saved, on a worker that is not the chief).
    """

    def __init__(self, config, strategy, model, optimizer, state, last, best, dev_split, writers, time_spent):
        self.cfg = config
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.last = last
        self.best = best
        self.scorer = CheckpointScorer(model)
        self.dev_split = dev_split
        self.train_writer, self.dev_writer = writers
        self.time_spent = time_spent
        self.stop = False
        self.best_dev_metrics = None
        self.pace = None  # a `RunPace` of the run's steps (gradient training)
        later_phases = model.num_phases - 1
        if self.cfg.train.phase_learning_rates and len(self.cfg.train.phase_learning_rates) != later_phases:
            raise InputError(
                f"train.phase_learning_rates needs {later_phases} value(s) for model {self.cfg.model_name!r} "
                f"({model.num_phases} phases), got {list(self.cfg.train.phase_learning_rates)}"
            )
        self._enter_phase()

    def train(self, train_data):
        tc = self.cfg.train
        self._log_hparams()
        # Gradient norms and the model's diagnostics, summarised between log
        # steps (see `diagnostics`).
        window = diagnostics.WindowSummary()
        while not self.stop:
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
            for batch in dataset:
                result = self.train_step(batch)
                loss = float(result["loss"])
                if not np.isfinite(loss):
                    raise FloatingPointError(f"training loss became {loss} at step {int(self.state.global_step)}")
                reductions = self.train_step.diagnostic_reductions
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
                if epoch_done or (tc.validate_every and step % tc.validate_every == 0):
                    self._validate_and_save()
                    if self.stop or self._phase_over():
                        break
            bar.close()

    def fit_split(self, train_split):
        """Fits a model that is not trained by gradients, then validates
        and checkpoints it once; returns what the fit chose."""
        self._log_hparams()
        fit = self.model.fit_split(train_split, self.dev_split, self.train_writer, self.cfg.train.seed)
        log.info("fit: %s", ", ".join(f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}"
                                      for name, value in fit.items()))
        self._validate_and_save()
        return fit

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
        # The train step is traced for the phase's loss.
        self.model.start_phase(int(self.state.phase))
        self._set_learning_rate()
        tc = self.cfg.train
        self.train_step = make_train_step(self.model, self.optimizer, self.strategy, tc.grad_clip_norm,
                                          self.cfg.runtime.jit_compile)

    def validate_metrics(self):
        # The test reports the sentence-similarity rank; validation needs
        # only the selection metric.
        return evaluation.evaluate(self.scorer, self.dev_split, sentence_similarity=False)

    def _validate_and_save(self):
        tc = self.cfg.train
        result = self.validate_metrics()
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


def _vocabulary_origin(vocabulary, captions):
    """Where a vocabulary's tokens come from, in words: the training
    captions' words have counts; others came from elsewhere (a word-vector
    file's words, for some models)."""
    if vocabulary.counts is None:
        return f"{len(vocabulary):,} tokens, the model's own word list (not counted in the training captions)"
    seen = sum(count > 0 for count in vocabulary.counts[2:])
    return (f"{len(vocabulary):,} tokens: <pad>, <unk>, {seen:,} words of the {captions:,} training captions"
            f" and {len(vocabulary) - 2 - seen:,} from elsewhere (a word-vector file)")


def _save(manager, number):
    """Writes a checkpoint; a full disk or a quota is an `InputError` (the
    manager's index still names the previous, complete checkpoint)."""
    try:
        manager.save(checkpoint_number=number)
    except (OSError, tf.errors.OpError) as error:
        raise InputError(f"{manager.directory}: the checkpoint of step {number} cannot be written ({error_reason(error)}); "
                         "the previous one is intact: free space, then continue with --resume") from None


def _restore_newest_intact(checkpoint, manager, model_dir):
    """Restores the newest checkpoint of `manager` that is not damaged (a
    file truncated by a crash or a full disk), logging the damaged ones;
    returns its path."""
    for path in reversed(manager.checkpoints):
        try:
            restore_checkpoint(checkpoint, path).assert_existing_objects_matched()
            return path
        except InputError as error:
            log.warning("%s; trying the previous checkpoint", error)
        except (AssertionError, ValueError) as error:
            raise InputError(f"{path}: the checkpoint does not fit the model built from {model_dir / 'config.json'} "
                             f"and {model_dir / 'vocab.json'} ({error_reason(error)}); were they edited?") from None
    raise InputError(f"{manager.directory}: every checkpoint is damaged; start the run again in a new --model-dir")
