"""common.machine: the cores, load, CPU model and CPU flags a run records."""

import os
import platform

import pytest

from common import machine


def test_cores_are_this_process_cpu_affinity():
    assert machine.cores() == len(os.sched_getaffinity(0))


def test_load_average_is_the_one_minute_value_rounded(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.23456, 2.0, 3.0))
    assert machine.load_average() == 1.23


X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile avx512_fp16
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu sse2 avx2
"""

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid bf16
CPU implementer\t: 0x41
"""


@pytest.mark.parametrize("text, flags", [
    (X86_CPUINFO, {"fpu", "sse2", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile",
                   "avx512_fp16"}),  # the first processor's
    (ARM_CPUINFO, {"fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp",
                   "cpuid", "bf16"}),
    ("processor\t: 0\nmodel name\t: something else\n", None),
])
def test_the_cpu_flags_are_read_from_an_x86_or_aarch64_cpuinfo(tmp_path, text, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    assert machine.read_cpu_flags(path) == (None if flags is None else frozenset(flags))


def test_an_unreadable_cpuinfo_is_unknown(tmp_path):
    assert machine.read_cpu_flags(tmp_path / "missing") is None


def test_the_cpu_is_the_model_name_of_cpuinfo_else_the_platforms(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
                       "flags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n")
    assert machine.cpu_model(cpuinfo) == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\nCPU part\t: 0xd0c\n")  # aarch64: no model name
    monkeypatch.setattr(platform, "processor", lambda: "aarch64")
    assert machine.cpu_model(cpuinfo) == "aarch64"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert machine.cpu_model(tmp_path / "missing") is None


AVX512_FLAGS = "fpu sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16"
AVX2_FLAGS = "fpu sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2"  # an AMD EPYC of the AVX2 era
ARM_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve sve2"


@pytest.mark.parametrize("line, level", [
    (f"flags\t\t: {AVX512_FLAGS}", "avx512"),
    (f"flags\t\t: {AVX2_FLAGS}", "avx2"),
    ("flags\t\t: fpu sse2 ssse3 sse4_1 sse4_2 avx", "avx"),
    ("flags\t\t: fpu sse2 ssse3", "sse2"),
    (f"Features\t: {ARM_FEATURES}", "sve2"),
    ("Features\t: fp asimd", "neon"),
    ("flags\t\t: fpu vme", None),
])
def test_the_instruction_set_is_the_cpus_best(tmp_path, line, level):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\n{line}\n")
    isa = machine.instruction_set(flags=machine.read_cpu_flags(cpuinfo), environ={})
    assert (isa.level, isa.cpu_level, isa.caps) == (level, level, ())
    assert str(isa) == (level or "unknown")


@pytest.mark.parametrize("environ, level, text", [
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "avx2", "avx2 (ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)"),
    ({"DNNL_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "avx512", "avx512 (DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 on an avx512 CPU)"),
    ({"ONEDNN_MAX_CPU_ISA": "ALL"}, "avx512", "avx512 (ONEDNN_MAX_CPU_ISA=ALL on an avx512 CPU)"),
    ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, "avx512", "avx512"),  # MKL's cap is PyTorch's, not TensorFlow's
])
def test_a_cap_lowers_tensorflows_instruction_set(environ, level, text):
    isa = machine.instruction_set(flags=frozenset(AVX512_FLAGS.split()), environ=environ)
    assert (isa.level, str(isa)) == (level, text)


def test_pytorch_takes_the_lowest_of_its_caps_and_no_cap_raises_a_level():
    flags = frozenset(AVX512_FLAGS.split())
    environ = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert str(machine.instruction_set(machine.PYTORCH_ISA_CAPS, flags, environ)) == (
        "sse4.2 (MKL_ENABLE_INSTRUCTIONS=SSE4_2, ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)")
    avx2 = machine.instruction_set(flags=frozenset(AVX2_FLAGS.split()), environ={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"})
    assert avx2.level == "avx2"
