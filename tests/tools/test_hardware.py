import pytest

from tools import hardware


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
