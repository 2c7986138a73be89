"""`engine.runtime`: the dtype policy of mixed precision."""

import keras
import pytest

from common.errors import InputError
from engine import runtime


@pytest.mark.parametrize("isa", ["AVX2", "avx2", "AVX2_VNNI", "SSE41"])
def test_bf16_is_refused_where_onednn_is_capped_below_its_kernels(monkeypatch, isa):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
    previous = keras.config.dtype_policy()
    with pytest.raises(InputError, match=f"^runtime.mixed_precision=bf16: ONEDNN_MAX_CPU_ISA={isa} caps"):
        with runtime.dtype_policy("bf16"):
            pass
    assert keras.config.dtype_policy() == previous


@pytest.mark.parametrize("mixed_precision, isa, policy", [
    ("bf16", "AVX512_CORE", "mixed_bfloat16"),  # oneDNN emulates bfloat16 there
    ("bf16", None, "mixed_bfloat16"),
    ("none", "AVX2", "float32"),
    ("fp16", "AVX2", "mixed_float16"),
])
def test_the_policy_holds_inside_and_the_previous_one_returns(monkeypatch, mixed_precision, isa, policy):
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if isa is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
    previous = keras.config.dtype_policy()
    with runtime.dtype_policy(mixed_precision):
        assert keras.config.dtype_policy().name == policy
    assert keras.config.dtype_policy() == previous
