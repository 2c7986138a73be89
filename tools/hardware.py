"""Which `runtime.mixed_precision` suits the machine this runs on, computed
from what its hardware does natively rather than asserted about one CPU.

A CPU's native low-precision arithmetic comes from its flags in
/proc/cpuinfo (x86 `flags`, aarch64 `Features`, read by `common.machine`);
a GPU's from its compute capability
(`tf.config.experimental.get_device_details`). With a GPU the advice is
the GPU's (training runs there); without one, the CPU's.

    python -m tools.bench --hardware
"""

import dataclasses

from common.machine import read_cpu_flags

# x86 flags and aarch64 features (`fphp` scalar, `asimdhp` vector half precision).
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
FP16_FLAGS = ("avx512_fp16", "amx_fp16", "fphp", "asimdhp")
# bf16 from Ampere (8.0), fp16 tensor cores from Volta (7.0): Keras' mixed-precision guide.
GPU_BF16_CAPABILITY = (8, 0)
GPU_FP16_CAPABILITY = (7, 0)

MEASURE = ("measure: `python -m tools.bench --skip-eval` and again with `--set runtime.mixed_precision={}`"
           " (compare train_step_ms)")
FP16_CAVEAT = ("fp16 needs loss scaling and overflowed in this project's runs (the sum-reduced VSE++ loss"
               " skips steps until the scale falls)")


@dataclasses.dataclass(frozen=True)
class Advice:
    """A `runtime.mixed_precision` ("none", "bf16" or "fp16") and why (to
    follow it in a sentence)."""

    mixed_precision: str
    reason: str


def cpu_advice(flags):
    """The mixed precision for a CPU with `flags` (a set of flag names, or
    None when unknown)."""
    if flags is None:
        return Advice("none", "(this CPU's arithmetic is unknown: no x86 flags or aarch64 Features read)")
    bf16, fp16 = flags.intersection(BF16_FLAGS), flags.intersection(FP16_FLAGS)
    if not bf16 and not fp16:
        return Advice("none", "(no native bf16 or fp16 arithmetic on this CPU: emulated low precision is slower than float32)")
    # Native instructions make low-precision matmuls possible; whether oneDNN turns them into a faster step is not.
    chosen = "bf16" if bf16 else "fp16"
    reason = f"may be faster here (native {chosen} instructions, but oneDNN's speed-up is not guaranteed); "
    reason += MEASURE.format(chosen)
    if fp16:
        reason += f". {FP16_CAVEAT}" + (", so bf16 is preferred" if bf16 else "")
    return Advice(chosen, reason)


def gpu_advice(capability):
    """The mixed precision for a GPU of compute capability `capability`
    ((major, minor), or None when unknown)."""
    if capability is None:
        return Advice("none", "(the GPU's compute capability is unknown)")
    version = ".".join(map(str, capability))
    if tuple(capability) >= GPU_BF16_CAPABILITY:
        return Advice("bf16", f"(compute capability {version} has native bf16; no loss scaling needed)")
    if tuple(capability) >= GPU_FP16_CAPABILITY:
        return Advice("fp16", f"(compute capability {version} has fp16 tensor cores but no bf16); {FP16_CAVEAT}")
    return Advice("none", f"(compute capability {version} has no fast fp16 or bf16 arithmetic)")


def describe(flags, gpus):
    """Two lines, `hardware: ...` and `precision: ...`, for a CPU with
    `flags` (see `cpu_advice`) and `gpus`, a list of (name, compute
    capability or None). Several GPUs get the advice of the least capable."""

    def native(names):
        if flags is None:
            return "unknown"
        found = sorted(flags.intersection(names))
        return f"yes ({', '.join(found)})" if found else "no"

    hardware = f"CPU native bf16 {native(BF16_FLAGS)}, native fp16 {native(FP16_FLAGS)}; "
    if gpus:
        hardware += "; ".join(
            f"GPU {name} (compute capability {'.'.join(map(str, c)) if c else 'unknown'})" for name, c in gpus)
        capabilities = [c for _, c in gpus]
        advice = gpu_advice(None if None in capabilities else min(capabilities))
    else:
        hardware += "no GPU"
        advice = cpu_advice(flags)
    return [f"hardware: {hardware}", f"precision: runtime.mixed_precision={advice.mixed_precision} {advice.reason}"]


def gpu_capabilities():
    """(name, compute capability or None) of each GPU TensorFlow sees."""
    import tensorflow as tf

    gpus = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        gpus.append((details.get("device_name", device.name), details.get("compute_capability")))
    return gpus


def machine_lines():
    """`describe` for the machine this runs on."""
    return describe(read_cpu_flags(), gpu_capabilities())
