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
  results.json       dev and test metrics of the best checkpoint, that
                     checkpoint (relative to this folder) and the metric
                     that chose it, what a fitted model chose, the command
                     line of train.py (its paths relative to the
                     repository: `common.records.portable_path`), the
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
import os
from pathlib import Path

import keras
import tensorflow as tf

from common import machine
from common.errors import InputError, error_reason
from common.files import write_json_atomically
from common.records import RunResults
from common.wording import counted
from data import pipeline, provenance, splits, word_vectors
from data.image_features import ImageFeatures
from data.readers import RetrievalSplit
from data.vocabulary import Vocabulary
from engine import evaluation, model_dirs, runtime, training_loop
from engine.export import export_saved_model
from engine.scoring import CheckpointScorer
from engine.run_pace import RunPace
from engine.time_spent import TimeSpent
from engine.train_step import make_optimizer
from layers.text_vectorizer import MAX_INPUT_TOKENS
from models import registry
from models.base import FittedModel, RetrievalModel
from models.experiments import BEST_DIR, CONFIG_FILE, RunConfig, load_run
from models.restore import restore_checkpoint

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
      loop: the `engine.training_loop.TrainingLoop` that trains or fits it, with its state and
        checkpoint managers.
      time_spent: the run's `TimeSpent`.
      steps_per_epoch: set by `Trainer.train` for gradient training (None
        for a fitted model).
    """

    train_split: RetrievalSplit
    test_split: RetrievalSplit
    vocabulary: Vocabulary
    model: RetrievalModel
    loop: "training_loop.TrainingLoop"
    time_spent: TimeSpent
    steps_per_epoch: int | None = None


class Trainer:
    """Trains, validates, checkpoints, evaluates and exports one experiment.

    Args:
      config: an `ExperimentConfig`, complete: for a composite model (an
        ensemble, a two-stage model) the one its registration's `prepare`
        returned, as `train.py` makes it; its `runtime` section chooses the
        strategy and the precision, and is recorded in config.json (with
        the strategy "auto" stands for on this machine).
      model_dir: where everything is written.
      resume: continue the run in `model_dir` instead of starting one.
      command: the command line that started this process, for
        results.json.
      parts: a composite model's trained runs, as its registration's
        `parts` read them (`train.py` reads them once); None for other
        models, or to have them read when the model is built.
    """

    def __init__(self, config, model_dir, resume=False, command=None, parts=None):
        # config.json records the strategy the run used, not "auto".
        strategy = runtime.resolve_strategy(config.runtime.strategy)
        self.config = dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, strategy=strategy))
        self.command = command
        self.model_dir = Path(model_dir)
        self.strategy = runtime.make_strategy(strategy)
        self.resume = resume
        self.parts = parts
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
            model = self.spec.build_model(cfg.model, vocabulary, self.image_features, self.parts)
            optimizer = make_optimizer(cfg.train, cfg.runtime.mixed_precision)
            optimizer.build(model.trainable_variables)
        # Plain (not mirrored) variables: the loop reads and sets them eagerly.
        state = training_loop.TrainingState()
        # The states of the dropout random generators too (not part of the
        # model's checkpoint graph), so a resumed run draws the same masks.
        random_states = [v for v in model.variables if "seed_generator_state" in v.path]
        checkpointed = {"model": model, "optimizer": optimizer, "state": state, "random": random_states}
        # Whether the checkpoint's step awaits its validation (the run stopped during it): saved beside the state,
        # not in it, so that a checkpoint written before it was saved still restores whole.
        validation_due = tf.Variable(False, trainable=False)
        last = tf.train.CheckpointManager(tf.train.Checkpoint(**checkpointed, validation_due=validation_due),
                                          self._private_dir(LAST_DIR), max_to_keep=2)
        best = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), self._private_dir(BEST_DIR), max_to_keep=1)
        if self.resume and last.checkpoints:
            resumed = _restore_newest_intact(tf.train.Checkpoint(**checkpointed), last, self.model_dir)
            tf.train.Checkpoint(validation_due=validation_due).restore(resumed).expect_partial()
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
            write_json_atomically(self.model_dir / CONFIG_FILE, RunConfig(cfg, self.image_features).to_json())

        writers = training_loop.summary_writers(self.model_dir / "logs", self.is_chief)
        loop = training_loop.TrainingLoop(cfg, self.strategy, model, optimizer, state, validation_due, last, best,
                                          dev_split, writers, time_spent if self.is_chief else None)
        return PreparedRun(train_split, test_split, vocabulary, model, loop, time_spent)

    def train(self, prepared):
        """Trains the prepared model by gradient steps, or fits it (a
        `FittedModel`), validating and checkpointing as it goes; returns
        what a fit chose (None for gradient training). Ctrl-C (or, in
        gradient training, SIGTERM: `engine.stop_signals`) saves the run's
        time and says what is kept."""
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
            model = self.spec.build_model(cfg.model, prepared.vocabulary, model.image_features, self.parts)
        restore_checkpoint(tf.train.Checkpoint(model=model), best_checkpoint).expect_partial()
        results = None
        if evaluate_test:
            # The best validation's metrics, unless this process never saw it.
            dev = loop.best_dev_metrics or loop.validate_metrics()
            log.info("testing %s on %s", best_checkpoint, prepared.test_split.captions_file)
            test = evaluation.evaluate(CheckpointScorer(model), prepared.test_split)
            steps = prepared.steps_per_epoch
            results = RunResults(dev=dev, test=test, checkpoint=os.path.relpath(best_checkpoint, self.model_dir),
                                 selection_metric=cfg.train.selection_metric, fit=fit or {},
                                 epochs=round(int(loop.state.global_step) / steps, 2) if steps else None,
                                 **prepared.time_spent.totals())
        if self.is_chief:
            prepared.time_spent.save()
            if results is not None:
                write_json_atomically(self.model_dir / "results.json", results.to_json())
            if export:
                log.info("exporting %s as a SavedModel into %s", best_checkpoint, self.model_dir / SAVED_MODEL_DIR)
                export_saved_model(model, self.model_dir / SAVED_MODEL_DIR)
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
        training; sets `image_features`, the run's `ImageFeatures`: for a
        new run, those of the training features (their width, their
        folder's provenance); for a resumed one, its config.json's, which
        the training features must match."""
        cfg = self.config
        tc = cfg.train
        train_split, dev_split, test_split = splits.load_experiment_splits(
            cfg.data, tc.max_train_images, tc.validate_max_images
        )
        image_dim = train_split.images.shape[1]
        if self.resume:  # on the features it started on
            self.image_features = load_run(self.model_dir).image_features
            if self.image_features.width != image_dim:
                raise InputError(f"{cfg.data.path}: train features have dimension {image_dim}, the model being "
                                 f"resumed expects {self.image_features.width}")
            provenance.check_same(self.image_features.provenance, self.model_dir / CONFIG_FILE, cfg.data.path)
        else:
            self.image_features = ImageFeatures(cfg.data.image_features, image_dim, provenance.read(cfg.data.path))
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


def _vocabulary_origin(vocabulary, captions):
    """Where a vocabulary's tokens come from, in words: the training
    captions' words have counts; others came from elsewhere (a word-vector
    file's words, for some models)."""
    if vocabulary.counts is None:
        return f"{len(vocabulary):,} tokens, the model's own word list (not counted in the training captions)"
    seen = sum(count > 0 for count in vocabulary.counts[2:])
    return (f"{len(vocabulary):,} tokens: <pad>, <unk>, {seen:,} words of the {captions:,} training captions"
            f" and {len(vocabulary) - 2 - seen:,} from elsewhere (a word-vector file)")


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
