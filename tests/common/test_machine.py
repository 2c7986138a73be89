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
