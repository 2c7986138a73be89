"""The training loop shared by every gradient-trained model of the zoo.

`Trainer(config, model_dir, strategy).run()` trains a registered model on a
dataset, validates on dev, keeps the best checkpoint by a dev metric,
evaluates it on test and exports it as a SavedModel.

Model directory layout ("best" = the best dev `train.selection_metric`,
rsum by default):
  config.json        the full experiment config (rebuilds the model)
  vocab.json         the vocabulary (train split only)
  checkpoints/       the latest training state: weights, optimizer, epoch,
                     step in epoch (the data order is a function of seed and
                     epoch, so this is the data position), best score
  best/              the weights with the best dev score so far
  logs/              TensorBoard: train/ (loss, learning rate, the gradient
                     norm before clipping: mean and max between log steps,
                     and the model's own diagnostics/...), dev/
                     (every metric), hparams
  results.json       dev and test metrics of the best checkpoint; "fit", what
                     a fitted model chose; "command", the command line of
                     train.py; "wall_seconds" (from the start of
                     the run to these metrics, this process only when
                     resumed) and "peak_memory_bytes" (the process's peak
                     resident memory), for `python -m report`
  saved_model/       the export (see export.py)

Writes are atomic: TensorFlow's checkpoint manager updates its index only
after a checkpoint is complete, JSON files and the SavedModel are written
aside and renamed, so killing a run at any moment leaves the previous state
usable by `--resume`.
"""

import contextlib
import dataclasses
import json
import logging
import os
import resource
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import diagnostics
import evaluate
import inference
import progress
from config import write_json_atomically
from data import pipeline, readers
from data.errors import InputError, error_reason
from data.tokenizer import tokenize_strings
from data.vocabulary import Vocabulary
from export import export_saved_model
from layers.text_vectorizer import MAX_INPUT_TOKENS
from models import registry

log = logging.getLogger("train")

LAST_DIR = "checkpoints"
SAVED_MODEL_DIR = "saved_model"
STRATEGIES = ("auto", "default", "mirrored", "multiworker")


def make_strategy(name):
    """The tf.distribute strategy for `--strategy`.

    "auto" mirrors over all GPUs when more than one is visible, else uses the
    default (single-device) strategy. "multiworker" reads the cluster from
    the TF_CONFIG environment variable.
    """
    if name == "auto":
        name = "mirrored" if len(tf.config.list_logical_devices("GPU")) > 1 else "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        if "TF_CONFIG" not in os.environ:
            raise InputError("--strategy multiworker: set TF_CONFIG to describe the cluster")
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise InputError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")


# `TrainConfig.mixed_precision` -> Keras dtype policy.
DTYPE_POLICIES = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


@contextlib.contextmanager
def dtype_policy(mixed_precision):
    """Layers created inside take the Keras dtype policy of
    `TrainConfig.mixed_precision`; the previous global policy is restored
    on leaving."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(DTYPE_POLICIES[mixed_precision])
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def make_optimizer(train_config):
    """The optimizer of `train_config`; under float16 wrapped in Keras'
    dynamic loss scaling (`make_train_step` scales the loss with it)."""
    # Gradient clipping is done by the train step on the all-reduced
    # gradient, not by the optimizer (which would clip each replica's share).
    optimizers = {
        "adam": keras.optimizers.Adam,
        "rmsprop": keras.optimizers.RMSprop,
        "sgd": keras.optimizers.SGD,
    }
    kwargs = {"learning_rate": train_config.learning_rate}
    if train_config.optimizer_epsilon is not None:
        kwargs["epsilon"] = train_config.optimizer_epsilon
    optimizer = optimizers[train_config.optimizer](**kwargs)
    if train_config.mixed_precision == "fp16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


class Trainer:
    """Trains, validates, checkpoints, evaluates and exports one experiment.

    Args:
      config: an `ExperimentConfig`.
      model_dir: where everything is written.
      strategy: a tf.distribute strategy.
      resume: continue the run in `model_dir` instead of starting one.
      command: the command line that started this process, for
        results.json.
    """

    def __init__(self, config, model_dir, strategy, resume=False, command=None):
        self.config = config
        self.command = command
        self.model_dir = Path(model_dir)
        self.strategy = strategy
        self.resume = resume
        self.spec = registry.get(config.model_name)
        self.is_chief = _is_chief(strategy)

    def run(self):
        """Runs the experiment; returns {"dev": metrics, "test": metrics}."""
        start = time.monotonic()
        self._check_model_dir()
        train_split, dev_split, test_split = self._load_data()
        vectors = None if self.resume else self._word_vectors(train_split)
        vocabulary = self._vocabulary(train_split, vectors)
        # Only once every input has been read and checked.
        if self.is_chief:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            if not self.resume:
                vocabulary.save(self.model_dir / "vocab.json")
        cfg = self.config
        keras.utils.set_random_seed(cfg.train.seed)
        replicas = self.strategy.num_replicas_in_sync
        if cfg.train.batch_size % replicas:
            raise InputError(
                f"train.batch_size={cfg.train.batch_size} does not split evenly over {replicas} replicas"
            )
        with self.strategy.scope(), dtype_policy(cfg.train.mixed_precision):
            model = self.spec.build_model(cfg.model, vocabulary, cfg.image_dim)
            optimizer = make_optimizer(cfg.train)
            optimizer.build(model.trainable_variables)
        # Plain (not mirrored) variables: the loop reads and sets them eagerly.
        state = _TrainingState()
        # The states of the dropout random generators too (not part of the
        # model's checkpoint graph), so a resumed run draws the same masks.
        random_states = [v for v in model.variables if "seed_generator_state" in v.path]
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state, random=random_states)
        last = tf.train.CheckpointManager(checkpoint, self._private_dir(LAST_DIR), max_to_keep=2)
        best = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model), self._private_dir(inference.BEST_DIR), max_to_keep=1
        )
        if self.resume and last.checkpoints:
            resumed = _restore_newest_intact(checkpoint, last, self.model_dir)
            log.info("resumed from %s (epoch %d, step %d of it)", resumed, int(state.epoch), int(state.step_in_epoch))
        else:
            # A resumed run killed before its first checkpoint starts over.
            model.adapt(train_split.images)
            if vectors is not None:
                log.info("%s: %s", cfg.model.word_vectors, model.set_word_vectors(vectors, cfg.train.seed))
            if self.is_chief:
                write_json_atomically(self.model_dir / "config.json", cfg.to_json() + "\n")

        train_data = pipeline.tokenize_split(train_split, model.vectorizer)
        scorer = inference.CheckpointScorer(model, cfg.image_dim)
        loop = _Loop(self, model, optimizer, state, last, best, scorer, dev_split)
        fit = loop.fit_split(train_split) if model.fits_without_gradients else loop.train(train_data)

        best_checkpoint = best.latest_checkpoint
        if cfg.train.mixed_precision != "none":
            # The test and the export in float32: the best weights (float32
            # under any policy) in a float32 model.
            model = self.spec.build_model(cfg.model, vocabulary, cfg.image_dim)
            scorer = inference.CheckpointScorer(model, cfg.image_dim)
        inference.restore_checkpoint(tf.train.Checkpoint(model=model), best_checkpoint).expect_partial()
        results = {
            # The best validation's metrics, unless this process never saw it.
            "dev": loop.best_dev_metrics or loop.validate_metrics(),
            "test": inference.score_split(scorer, test_split),
            "checkpoint": best_checkpoint,
            **({"fit": fit} if fit else {}),
            **({"command": self.command} if self.command else {}),
            "wall_seconds": round(time.monotonic() - start, 1),
            # ru_maxrss is in KiB on Linux.
            "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        if self.is_chief:
            write_json_atomically(self.model_dir / "results.json", json.dumps(results, indent=2) + "\n")
            export_saved_model(model, cfg.image_dim, self.model_dir / SAVED_MODEL_DIR)
        return results

    def _check_model_dir(self):
        if not self.is_chief:
            # Other workers follow the chief, which writes config.json.
            return
        if self.model_dir.exists() and not self.model_dir.is_dir():
            raise InputError(f"--model-dir {self.model_dir}: exists and is not a directory")
        has_run = (self.model_dir / "config.json").exists()
        if self.resume and not has_run:
            raise InputError(f"--resume: {self.model_dir} holds no training run to resume")
        if not self.resume and has_run:
            raise InputError(
                f"--model-dir {self.model_dir} already holds a training run; pass --resume to continue it or choose another directory"
            )

    def _private_dir(self, name):
        # Non-chief workers of a multi-worker run must write their (identical)
        # checkpoints elsewhere: only the chief's are kept.
        if self.is_chief:
            return str(self.model_dir / name)
        task = self.strategy.cluster_resolver.task_id
        return str(self.model_dir / ".workers" / str(task) / name)

    def _load_data(self):
        """The train, dev and test splits, read and checked before any
        training."""
        cfg = self.config
        data = cfg.data
        train_split = readers.load_split(data.path, data.train_split, data.image_features)
        if cfg.train.max_train_images:
            train_split = _first_images(train_split, cfg.train.max_train_images)
        image_dim = train_split.images.shape[1]
        if self.resume and cfg.image_dim != image_dim:
            raise InputError(
                f"{data.path}: train features have dimension {image_dim}, the model being resumed expects {cfg.image_dim}"
            )
        self.config = cfg = _with_image_dim(cfg, image_dim)
        dev_split = readers.load_split(data.path, data.dev_split, data.image_features)
        if cfg.train.validate_max_images:
            dev_split = _first_images(dev_split, cfg.train.validate_max_images)
        test_split = readers.load_split(data.path, data.test_split, data.image_features)
        for name, split in ((data.dev_split, dev_split), (data.test_split, test_split)):
            inference.check_image_dim(split, image_dim, f"{data.path} ({name}, {data.image_features})")
        for split in (train_split, dev_split, test_split):
            pipeline.check_captions(split, cfg.model.tokenizer, MAX_INPUT_TOKENS)
        tc = cfg.train
        pairs = len(train_split.images) if tc.sampling == "one_caption_per_image" else len(train_split.captions)
        if tc.batch_size > pairs:
            raise InputError(
                f"train.batch_size={tc.batch_size} is larger than the {pairs} training pairs of {train_split.captions_file} "
                f"(train.sampling={tc.sampling})"
            )
        return train_split, dev_split, test_split

    def _word_vectors(self, train_split):
        """The word vectors of `model.word_vectors` (None when unset)."""
        cfg = self.config.model
        if cfg.word_vectors is None:
            return None
        from data import word_vectors  # gensim is slow to import; only here.

        if cfg.word_vectors == "word2vec":
            return word_vectors.train_word2vec(
                tokenize_strings(train_split.captions, cfg.tokenizer), cfg.word_dim, self.config.train.seed
            )
        return word_vectors.load_word_vectors(cfg.word_vectors)

    def _vocabulary(self, train_split, vectors):
        path = self.model_dir / "vocab.json"
        if self.resume:
            return Vocabulary.load(path)
        # The vocabulary comes from the training captions only (and, for
        # some models, the word vectors): test words must not leak into
        # the model.
        vocabulary = self.spec.vocabulary(self.config.model, train_split.captions, vectors)
        log.info("vocabulary: %d tokens from %d training captions", len(vocabulary), len(train_split.captions))
        return vocabulary


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


class _Loop:
    """The epoch/step loop of a `Trainer` (split out to keep `run` readable)."""

    def __init__(self, trainer, model, optimizer, state, last, best, scorer, dev_split):
        self.trainer = trainer
        self.cfg = trainer.config
        self.strategy = trainer.strategy
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.last = last
        self.best = best
        self.scorer = scorer
        self.dev_split = dev_split
        self.stop = False
        self.best_dev_metrics = None
        logs = trainer.model_dir / "logs"
        chief = trainer.is_chief
        self.train_writer = tf.summary.create_file_writer(str(logs / "train")) if chief else tf.summary.create_noop_writer()
        self.dev_writer = tf.summary.create_file_writer(str(logs / "dev")) if chief else tf.summary.create_noop_writer()
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
            self._set_learning_rate()
            batches = pipeline.epoch_order(
                train_data, tc.sampling, tc.batch_size, tc.seed, epoch, tc.bucket_by_length
            )
            skip = int(self.state.step_in_epoch)
            dataset = self._distribute(train_data, batches[skip:])
            # Pairs of the epoch, so the bar shows pairs/s and the epoch's ETA.
            bar = progress.bar(total=len(batches) * tc.batch_size, initial=skip * tc.batch_size, unit="pair",
                               desc=f"epoch {epoch + 1}", leave=True)
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
                bar.update(tc.batch_size)
                bar.set_postfix(step=step, loss=f"{loss:.4g}", refresh=False)
                if step % tc.log_every == 0:
                    summary = window.flush()
                    with self.train_writer.as_default(step=step):
                        tf.summary.scalar("loss", loss)
                        tf.summary.scalar("learning_rate", float(self.optimizer.learning_rate))
                        tf.summary.scalar("phase", int(self.state.phase))
                        for name, value in summary.items():
                            tf.summary.scalar(name, value)
                    log.info("epoch %d step %d loss %.4f grad norm %.3g (max %.3g since the last line)", epoch,
                             step, loss, summary["grad_norm"], summary["grad_norm_max"])
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
                 int(state.phase), int(state.epoch), self.cfg.train.selection_metric, float(state.best_score))
        _save(self.last, int(state.global_step))

    def _enter_phase(self):
        # The train step is traced for the phase's loss.
        self.model.start_phase(int(self.state.phase))
        self._set_learning_rate()
        tc = self.cfg.train
        self.train_step = make_train_step(self.model, self.optimizer, self.strategy, tc.grad_clip_norm, tc.jit_compile)

    def validate_metrics(self):
        split = self.dev_split
        return evaluate.evaluate_encodings(
            self.scorer.similarity,
            self.scorer.encode_images(split.images),
            self.scorer.encode_texts(split.captions),
            split.caption_image,
            sentence_similarity=False,  # the test reports it; validation needs only the selection metric
        )

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
        _save(self.last, step)

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
        for section in ("model", "train", "data"):
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

def make_train_step(model, optimizer, strategy, clip_norm=None, jit_compile=False):
    """A tf.function running one distributed training step (XLA-compiled
    with `jit_compile`).

    Its argument is a distributed batch (see `_Loop._distribute`). It
    returns a dict of scalars: "loss", "grad_norm" (the global norm of the
    gradient before clipping) and "diagnostics", {name: value} of what the
    model's layers published with `diagnostics.record` (averaged over the
    replicas). The function's `diagnostic_reductions` attribute maps those
    names to their reductions once it has been traced.
    """
    reductions = {}

    def replica_step(batch):
        context = tf.distribute.get_replica_context()
        replicas = strategy.num_replicas_in_sync
        variables = model.trainable_variables
        with tf.GradientTape() as tape, diagnostics.recording() as recorded:
            image_encodings = model.encode_image(batch["image_features"], training=True)
            text_encodings = model.encode_text(batch["token_ids"], training=True)
            # Every replica computes the loss of the global batch, so
            # hardest negatives are searched over all of it and 1 and N
            # replicas train the same model; the gather's gradient sends
            # each replica the gradient of its own rows.
            # The similarity and the loss in float32 under mixed precision.
            image_encodings = _gather_replicas(context, tf.cast(image_encodings, tf.float32))
            loss = model.pair_loss(
                image_encodings,
                _gather_replicas(context, tf.cast(text_encodings, tf.float32)),
                tf.cast(_gather_replicas(context, tf.cast(batch["image_index"], tf.float32)), tf.int64),
            )
            # Losses that layers add on this replica's batch (e.g. the RCN's
            # mask regulariser, Francis et al. eq. 15), in the units of the
            # model's loss; averaged over replicas.
            if model.losses:
                loss += model.layer_loss_scale(tf.shape(image_encodings)[0]) * tf.add_n(model.losses)
            scaled = loss / replicas
            # float16: Keras' dynamic loss scale s; the gradients are s times
            # the loss's until the optimizer unscales them (and skips a step
            # whose gradients overflowed).
            loss_scale = getattr(optimizer, "dynamic_scale", None)
            objective = scaled if loss_scale is None else optimizer.scale_loss(scaled)
        # Dense gradients (the word embedding's are IndexedSlices) can be
        # all-reduced, clipped and rescaled uniformly.
        gradients = [tf.convert_to_tensor(g) for g in tape.gradient(objective, variables)]
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        scaled_norm = tf.linalg.global_norm(gradients)
        scale = 1.0 if loss_scale is None else tf.cast(loss_scale, scaled_norm.dtype)
        grad_norm = scaled_norm / scale
        if clip_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, clip_norm * scale, use_norm=scaled_norm)
        # The optimizer sums the replicas' gradients once more: hand it
        # each replica's share of the already reduced gradient.
        optimizer.apply_gradients(zip([g / replicas for g in gradients], variables))
        reductions.update({name: reduction for name, (_, reduction) in recorded.items()})
        return scaled, grad_norm, {name: tf.cast(value, tf.float32) for name, (value, _) in recorded.items()}

    @tf.function(reduce_retracing=True, jit_compile=jit_compile)
    def train_step(batch):
        losses, grad_norms, recorded = strategy.run(replica_step, args=(batch,))
        mean = tf.distribute.ReduceOp.MEAN
        return {
            "loss": strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
            "grad_norm": strategy.reduce(mean, grad_norms, axis=None),
            "diagnostics": {name: strategy.reduce(mean, value, axis=None) for name, value in recorded.items()},
        }

    train_step.diagnostic_reductions = reductions
    return train_step


def _gather_replicas(context, x):
    """Concatenates every replica's `x` (equal shapes) along axis 0.

    Written as a sum of zero-padded blocks so that it only needs all_reduce,
    which every strategy supports with gradients (MultiWorkerMirrored's
    all_gather fails inside a training step in TF 2.21). Image indices go
    through it as float32, exact below 2**24.
    """
    replicas = context.num_replicas_in_sync
    if replicas == 1:
        return x
    rows = tf.shape(x)[0]
    before = context.replica_id_in_sync_group * rows
    padding = [[before, (replicas - 1) * rows - before]] + [[0, 0]] * (len(x.shape) - 1)
    return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.pad(x, padding))


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
            inference.restore_checkpoint(checkpoint, path).assert_existing_objects_matched()
            return path
        except InputError as error:
            log.warning("%s; trying the previous checkpoint", error)
        except (AssertionError, ValueError) as error:
            raise InputError(f"{path}: the checkpoint does not fit the model built from {model_dir / 'config.json'} "
                             f"and {model_dir / 'vocab.json'} ({error_reason(error)}); were they edited?") from None
    raise InputError(f"{manager.directory}: every checkpoint is damaged; start the run again in a new --model-dir")


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in (None, "chief") or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict()
    )


def _first_images(split, n_images):
    keep = split.caption_image < n_images
    return readers.RetrievalSplit(
        images=split.images[:n_images],
        captions=[c for c, k in zip(split.captions, keep) if k],
        caption_image=split.caption_image[keep],
        image_ids=split.image_ids[:n_images],
        source=split.source,
        captions_file=split.captions_file,
    )


def _with_image_dim(config, image_dim):
    return dataclasses.replace(config, image_dim=image_dim)
