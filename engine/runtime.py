"""How a run uses the machine (`common.config.RuntimeConfig`): the
tf.distribute strategy, the Keras dtype policy of mixed precision (and a
model built under it computing in float32 for its test and export), and
which worker of a cluster writes the run's files."""

import contextlib
import os

import keras
import tensorflow as tf

from common.config import STRATEGIES
from common.errors import InputError
from common.machine import TENSORFLOW_ISA_CAPS

# `RuntimeConfig.mixed_precision` -> Keras dtype policy.
DTYPE_POLICIES = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# oneDNN capped below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, how the AVX2 code
# paths are measured on a newer CPU) has no bfloat16 kernels, while
# TensorFlow (2.21), seeing the CPU's own bfloat16 support, still sends
# bfloat16 matrix products to it: the process dies of a segmentation fault.
# Capped at AVX512_CORE, oneDNN emulates them and bf16 works.
ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI")


def resolve_strategy(name):
    """The strategy name that "auto" stands for on this machine: "mirrored"
    over all GPUs when more than one is visible, else "default"; any other
    name is itself."""
    if name == "auto":
        return "mirrored" if len(tf.config.list_logical_devices("GPU")) > 1 else "default"
    return name


def make_strategy(name):
    """The tf.distribute strategy of `RuntimeConfig.strategy` (`--strategy`):
    "default" (single device), "mirrored" (all local GPUs), "multiworker"
    (the cluster from the TF_CONFIG environment variable) or "auto" (see
    `resolve_strategy`)."""
    name = resolve_strategy(name)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        if "TF_CONFIG" not in os.environ:
            raise InputError("--strategy multiworker: set TF_CONFIG to describe the cluster")
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise InputError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")


def bfloat16_cap():
    """The variable of the environment ("NAME=VALUE") that caps oneDNN
    below bfloat16's kernels (`ISAS_WITHOUT_BF16`), or None."""
    for name in TENSORFLOW_ISA_CAPS:
        if os.environ.get(name, "").upper() in ISAS_WITHOUT_BF16:
            return f"{name}={os.environ[name]}"
    return None


@contextlib.contextmanager
def dtype_policy(mixed_precision):
    """Layers created inside take the Keras dtype policy of
    `RuntimeConfig.mixed_precision`; the previous global policy is restored
    on leaving."""
    if mixed_precision == "bf16" and (cap := bfloat16_cap()):
        raise InputError(f"runtime.mixed_precision=bf16: {cap} caps TensorFlow's oneDNN kernels below "
                         "bfloat16's, where its bfloat16 products crash; unset it, cap at AVX512_CORE, or train in float32")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(DTYPE_POLICIES[mixed_precision])
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


@contextlib.contextmanager
def computing_in_float32(model):
    """Inside, `model` computes in float32 whatever policy it was built
    under: each of its layers under a mixed policy takes the float32 one.
    A mixed policy's variables are float32 (the master weights), so the
    model inside is the float32 model of the same weights, what a test
    evaluation and an export need, without building a second one. The
    policies return on leaving; functions traced inside keep float32, and
    functions traced before keep the precision they were traced in."""
    # Keras has no public walk of a model's nested layers (an ensemble's members, a GRU's cell).
    mixed = [layer for layer in model._flatten_layers() if layer.compute_dtype != layer.variable_dtype]
    policies = [layer.dtype_policy for layer in mixed]
    for layer in mixed:
        layer.dtype_policy = layer.variable_dtype
    try:
        yield model
    finally:
        for layer, policy in zip(mixed, policies):
            layer.dtype_policy = policy


def is_chief(strategy):
    """Whether this process is the chief of its cluster (the one that writes
    the run's files); True outside a cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in (None, "chief") or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict()
    )
