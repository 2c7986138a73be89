"""One distributed training step, and the optimizer it applies."""

import keras
import tensorflow as tf

from common import diagnostics


def make_optimizer(train_config, mixed_precision="none"):
    """The optimizer of `train_config`; under float16 (`mixed_precision`,
    see `RuntimeConfig`) wrapped in Keras' dynamic loss scaling
    (`make_train_step` scales the loss with it)."""
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
    if mixed_precision == "fp16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def make_train_step(model, optimizer, strategy, clip_norm=None, jit_compile=False, batch_spec=None):
    """A tf.function running one distributed training step (XLA-compiled
    with `jit_compile`).

    Its argument is a distributed batch (see `engine.training_loop`'s `TrainingLoop._distribute`). With
    `batch_spec`, the batches' `element_spec` (their caption length left
    open), it is traced once for every batch; without, at the first batch
    and again, with the shapes that differ left open, at the first batch
    of another caption length (seconds each for a recurrent model). It
    returns a dict of scalars: "loss", "grad_norm" (the global norm of the
    gradient before clipping) and "diagnostics", {name: value} of what the
    model's layers published with `common.diagnostics.record` (averaged over the
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
            # Losses that layers add on this replica's batch (e.g. a mask
            # regulariser, Francis et al. eq. 15), in the units of the
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

    @tf.function(reduce_retracing=True, jit_compile=jit_compile,
                 input_signature=None if batch_spec is None else [batch_spec])
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
