"""What a run or a measurement records of the machine it ran on: the cores
it may use, the 1-minute load average, the CPU's model name and its flags
(from /proc/cpuinfo), and the vector instruction set that kernels run on
here (`instruction_set`)."""

import dataclasses
import os
import platform

CPUINFO = "/proc/cpuinfo"


def cores():
    """The cores this process may use (all of the machine's where the
    system cannot say)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on macOS or Windows
        return os.cpu_count()


def load_average():
    """The 1-minute load average, to 2 decimals."""
    return round(os.getloadavg()[0], 2)


def cpu_model(path=CPUINFO):
    """The CPU's model name: the first `model name` of a /proc/cpuinfo
    file, else `platform.processor()`, else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, colon, value = line.partition(":")
                if colon and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def read_cpu_flags(path=CPUINFO):
    """The CPU's flags: the words of the first x86 `flags` or aarch64
    `Features` line of a /proc/cpuinfo file, or None when the file cannot be
    read or has neither line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, colon, value = line.partition(":")
                if colon and key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return None


# x86 vector instruction sets, best first, each with the /proc/cpuinfo flag
# that shows it; then aarch64's.
X86_ISA_LEVELS = ("avx512", "avx2", "avx", "sse4.2", "sse4.1", "sse2")
X86_ISA_FLAGS = ("avx512f", "avx2", "avx", "sse4_2", "sse4_1", "sse2")
ARM_ISA_LEVELS = ("sve2", "sve", "neon")
ARM_ISA_FLAGS = ("sve2", "sve", "asimd")
# Variables that cap the instruction set of a library's kernels below the
# CPU's: oneDNN's (TensorFlow's CPU kernels, the products of its Eigen
# ones too) and, for PyTorch's matrix products, MKL's.
TENSORFLOW_ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
PYTORCH_ISA_CAPS = ("MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# Every variable that chooses which kernels run (the caps above, and
# TensorFlow's switch between oneDNN's and Eigen's).
KERNEL_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "TF_ENABLE_ONEDNN_OPTS")


@dataclasses.dataclass(frozen=True)
class InstructionSet:
    """The vector instruction set kernels run on: `level` (e.g. "avx2";
    None when unknown), the CPU's own best `cpu_level`, and `caps`, the
    variables set that lower it ("NAME=VALUE" strings)."""

    level: str | None
    cpu_level: str | None
    caps: tuple = ()

    def __str__(self):
        """E.g. "avx512", or "avx2 (ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)"."""
        if not self.caps:
            return self.level or "unknown"
        return f"{self.level or 'unknown'} ({', '.join(self.caps)} on an {self.cpu_level or 'unknown'} CPU)"


def cpu_isa(flags):
    """The best vector instruction set of a CPU with `flags` (see
    `read_cpu_flags`): one of `X86_ISA_LEVELS` or `ARM_ISA_LEVELS`, or None."""
    for levels, names in ((X86_ISA_LEVELS, X86_ISA_FLAGS), (ARM_ISA_LEVELS, ARM_ISA_FLAGS)):
        for level, flag in zip(levels, names):
            if flags and flag in flags:
                return level
    return None


def cap_isa(value):
    """The x86 level a cap's value allows, e.g. "AVX2" -> "avx2",
    "AVX512_CORE_BF16" -> "avx512" (oneDNN's names), "SSE4_2" (MKL's) ->
    "sse4.2"; None for no cap ("ALL", "DEFAULT") or a value not known."""
    value = value.strip().upper()
    prefixes = (("AVX512", "avx512"), ("AVX10", "avx512"), ("AVX2", "avx2"), ("AVX", "avx"),
                ("SSE4_2", "sse4.2"), ("SSE42", "sse4.2"), ("SSE41", "sse4.1"), ("SSE4_1", "sse4.1"))
    return next((level for prefix, level in prefixes if value.startswith(prefix)), None)


def instruction_set(caps=TENSORFLOW_ISA_CAPS, flags=None, environ=None):
    """The `InstructionSet` of the kernels of a library whose instruction
    set the variables `caps` cap: the CPU's best (from `flags`, by default
    this CPU's), lowered to the lowest level any of `caps` set in
    `environ` (by default this process's environment) allows."""
    flags = read_cpu_flags() if flags is None else flags
    environ = os.environ if environ is None else environ
    level = cpu_level = cpu_isa(flags)
    set_caps = tuple(f"{name}={environ[name]}" for name in caps if environ.get(name))
    for name in caps:
        capped = cap_isa(environ.get(name, ""))
        if capped and level in X86_ISA_LEVELS and X86_ISA_LEVELS.index(capped) > X86_ISA_LEVELS.index(level):
            level = capped
    return InstructionSet(level, cpu_level, set_caps)
