import pytest

from tools import hardware

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
    assert hardware.read_cpu_flags(path) == (None if flags is None else frozenset(flags))


def test_an_unreadable_cpuinfo_is_unknown(tmp_path):
    assert hardware.read_cpu_flags(tmp_path / "missing") is None


@pytest.mark.parametrize("flags, precision", [
    ({"avx2", "avx512f", "avx512_vnni"}, "none"),  # AVX-512 without bf16 or fp16 arithmetic
    ({"avx512f", "avx512_bf16"}, "bf16"),
    ({"amx_bf16", "amx_tile"}, "bf16"),
    ({"avx512_fp16"}, "fp16"),
    ({"amx_fp16"}, "fp16"),
    ({"avx512_bf16", "avx512_fp16"}, "bf16"),  # both: bf16 needs no loss scaling
    ({"fp", "asimd"}, "none"),
    ({"asimd", "bf16"}, "bf16"),
    ({"fphp", "asimdhp"}, "fp16"),
    ({"asimdhp", "bf16"}, "bf16"),
    (set(), "none"),
    (None, "none"),  # unknown
])
def test_the_cpu_advice_follows_its_native_arithmetic(flags, precision):
    advice = hardware.cpu_advice(None if flags is None else frozenset(flags))
    assert advice.mixed_precision == precision
    if precision == "none":
        assert "measure" not in advice.reason
    else:  # native instructions do not promise a faster step: the advice says how to measure it
        assert "may be faster" in advice.reason and f"--set runtime.mixed_precision={precision}" in advice.reason
    assert ("loss scaling" in advice.reason) == bool(flags and flags & set(hardware.FP16_FLAGS))


@pytest.mark.parametrize("capability, precision", [
    ((9, 0), "bf16"), ((8, 6), "bf16"), ((8, 0), "bf16"), ((7, 5), "fp16"), ((7, 0), "fp16"), ((6, 1), "none"),
    (None, "none"),
])
def test_the_gpu_advice_follows_its_compute_capability(capability, precision):
    assert hardware.gpu_advice(capability).mixed_precision == precision


def test_the_description_takes_the_gpus_advice_and_the_least_capable_gpus():
    cpu = frozenset({"avx512f", "avx512_bf16"})
    assert hardware.describe(cpu, []) == [
        "hardware: CPU native bf16 yes (avx512_bf16), native fp16 no; no GPU",
        f"precision: runtime.mixed_precision=bf16 {hardware.cpu_advice(cpu).reason}",
    ]
    lines = hardware.describe(cpu, [("A100", (8, 0)), ("T4", (7, 5))])
    assert lines[0] == ("hardware: CPU native bf16 yes (avx512_bf16), native fp16 no; "
                        "GPU A100 (compute capability 8.0); GPU T4 (compute capability 7.5)")
    assert lines[1].startswith("precision: runtime.mixed_precision=fp16 (compute capability 7.5")
    assert hardware.describe(None, [("A100", (8, 0)), ("?", None)])[1].startswith(
        "precision: runtime.mixed_precision=none")
    assert hardware.describe(None, [])[0] == "hardware: CPU native bf16 unknown, native fp16 unknown; no GPU"
