"""The timing primitives of the benchmarks: a registered model built as the
trainer builds it, untrained (`untrained_model`); its first training
batches (`training_batches`) and the trainer's own step over them
(`zoo_step`); the seconds of a run of steps (`time_steps`) and the
pairs/s and step time they make (`throughput`); the FLOPs of a training
step (`training_flops`) and this machine's float32 matmul rate
(`machine_matmul_gflops`), together `time_training`; and the process's
peak resident memory (`peak_rss_mb`). `add_experiment_arguments` gives a
benchmark's command line the options these read.
"""

import resource
import time

import numpy as np

from common import machine
from common.errors import count, count_or_zero
from data import splits
from data.image_features import ImageFeatures


def add_experiment_arguments(parser):
    """The options that choose an experiment's preset and overrides and the
    timed training steps (shared with the family benchmarks)."""
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--steps", type=count, default=30, help="timed training steps")
    parser.add_argument("--warmup", type=count_or_zero, default=3, help="untimed training steps first")


def peak_rss_mb(status="/proc/self/status"):
    """This process's peak resident memory so far, in MB: Linux's VmHWM,
    which starts anew in a spawned process (`ru_maxrss` carries the
    parent's peak over fork and exec), else `ru_maxrss`."""
    try:
        with open(status, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def untrained_model(name, preset, overrides=(), every_word=False):
    """The experiment of `name` under `preset` and `overrides`, its
    training split, and its model built as the trainer builds it (under
    its precision policy) with a vocabulary of the training captions: the
    model's own vocabulary, or with `every_word` every training word.
    Returns (config, train_split, model)."""
    import keras

    from data.vocabulary import Vocabulary
    from engine import runtime
    from models import registry

    spec = registry.get(name)
    config = spec.experiment(preset, overrides)
    parts = spec.parts(config.model) if spec.parts else None
    if spec.prepare:
        config = spec.prepare(config, parts)
    train_split = splits.load_split(config.data.path, config.data.train_split, config.data.image_features)
    # Without word vectors: they only change initial values (and the size of
    # a frozen lookup table), not the cost of a step.
    if every_word:
        vocabulary = Vocabulary.build(train_split.captions, tokenizer=config.model.tokenizer)
    else:
        vocabulary = spec.vocabulary(config.model, train_split.captions, None)
    keras.utils.set_random_seed(config.train.seed)
    with runtime.dtype_policy(config.runtime.mixed_precision):
        model = spec.build_model(config.model, vocabulary,
                                 ImageFeatures(config.data.image_features, train_split.images.shape[1]), parts)
    return config, train_split, model


def time_training(model, config, train_split, args):
    """Training throughput on real batches through the trainer's own step,
    and the GFLOP/s that makes of the model's matrix products (training =
    3 x `forward_flops`), against this machine's float32 matmul rate; with
    the instruction set TensorFlow's kernels ran on (`isa`, e.g. "avx512",
    or "avx2 (ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)")."""
    batches = training_batches(model, config, train_split, args.warmup + args.steps)
    step = zoo_step(model, config, batches[: args.warmup])
    seconds = time_steps(step, batches[args.warmup :])
    report = {"isa": str(machine.instruction_set()), "batch_size": config.train.batch_size,
              **throughput(config, args.steps, seconds)}
    flops = training_flops(model, batches[args.warmup :])
    if flops is not None:
        report["train_gflop_per_step"] = significant(flops / 1e9)
        report["train_gflops_per_s"] = significant(flops / 1e9 / (seconds / args.steps))
        report["machine_matmul_gflops_per_s"] = machine_matmul_gflops()
    return report


def significant(x, digits=4):
    return float(f"{x:.{digits}g}")


def training_batches(model, config, train_split, count):
    """The first `count` training batches of the run's epoch order (as
    tensors: what the trainer's dataset yields)."""
    from data import pipeline

    data = pipeline.tokenize_split(train_split, model.vectorizer)
    order = pipeline.epoch_order(
        data, config.train.sampling, config.train.batch_size, config.train.seed, 0, config.train.bucket_by_length
    )
    dataset = iter(pipeline.training_dataset(data, np.resize(order, (count, order.shape[1]))))
    return [next(dataset) for _ in range(count)]


def zoo_step(model, config, warmup_batches):
    """One training step of the trainer (its optimizer, clipping, precision
    and XLA settings), waiting for the loss; already run (and traced) on
    `warmup_batches`."""
    import tensorflow as tf

    from engine import train_step

    optimizer = train_step.make_optimizer(config.train, config.runtime.mixed_precision)
    optimizer.build(model.trainable_variables)
    step = train_step.make_train_step(
        model, optimizer, tf.distribute.get_strategy(), config.train.grad_clip_norm, config.runtime.jit_compile
    )

    def run(batch):
        return float(step(batch)["loss"])

    for batch in warmup_batches:
        run(batch)
    return run


def time_steps(step, batches):
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return time.perf_counter() - start


def throughput(config, steps, seconds):
    return {
        "train_pairs_per_s": round(steps * config.train.batch_size / seconds, 1),
        "train_step_ms": round(1000 * seconds / steps, 1),
    }


def training_flops(model, batches):
    """Mean FLOPs of a training step over `batches`, or None."""
    counts = [model.forward_flops(b["token_ids"].numpy(), b["image_features"].numpy()) for b in batches]
    return None if None in counts else 3 * sum(counts) / len(counts)


def machine_matmul_gflops(repeats=20):
    """The best float32 rate of a [128, 1024] x [1024, 3072] product here
    (a GRU's recurrent product at batch 128), in GFLOP/s: the best of
    reading the [1024, 3072] matrix as it is and transposed, as
    `layers.packed_gru` does (oneDNN's AVX2 kernels run the first at about
    half their rate)."""
    import tensorflow as tf

    a, b = tf.random.normal([128, 1024]), tf.random.normal([1024, 3072])
    b_transposed = tf.transpose(b)
    best = float("inf")
    for product in (lambda: a @ b, lambda: tf.matmul(a, b_transposed, transpose_b=True)):
        summed = tf.function(lambda: tf.reduce_sum(product()))
        summed()
        best = min(best, *(time_steps(lambda _: float(summed()), [None]) for _ in range(repeats)))
    return round(2 * 128 * 1024 * 3072 / best / 1e9, 1)
