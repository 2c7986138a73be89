"""`engine.runtime`: the dtype policy of mixed precision, and a model
built under it computing in float32."""

import dataclasses

import keras
import numpy as np
import pytest

from common.errors import InputError
from data.image_features import ImageFeatures
from engine import runtime
from models import registry
from tests.helpers import randomize_weights
from tests.models.test_registered_models import SINGLE_MODELS, TINY, VOCABULARY, batch


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


# Models that do not build under a mixed policy at all (a float32 mask times a bfloat16 or float16 word embedding
# as their text encoder is first called): they train in float32 only.
NOT_MIXED = {"fv-mean", "mcnn-wd", "mcnn-phs", "mcnn-phl", "mcnn-st"}

# Fewer of the parts a model repeats, whose number its cost grows with, while it still routes and mixes: two
# capsules over two passes (one recursion), a mixture of four components; a model configured with fewer keeps its
# own (rcn-gru: one capsule, no recursion).
AT_MOST = {"num_capsules": 2, "recursions": 1, "num_components": 4}


@pytest.mark.parametrize("name", [name for name in SINGLE_MODELS if name not in NOT_MIXED])
def test_a_model_built_under_mixed_precision_computes_as_its_float32_build_inside(name):
    # The same weights in a model built in float32 and in one built under a mixed policy: inside
    # `computing_in_float32` the mixed one's scores are the float32 one's (two float32 computations of the same
    # operations: a few units of float32's 6e-8 roundoff at most, on scores of magnitude ~1), outside they are the
    # low precision's (bfloat16's roundoff 3.9e-3, float16's 4.9e-4: far above 1e-5).
    precision = "bf16" if runtime.bfloat16_cap() is None else "fp16"
    spec = registry.get(name)
    fields = {field.name for field in dataclasses.fields(spec.config_class)}
    defaults = spec.experiment("paper").model
    sizes = {**TINY, **{k: v for k, v in AT_MOST.items() if getattr(defaults, k, v) > v}}
    config = spec.experiment("paper", [f"model.{k}={v}" for k, v in sizes.items() if k in fields])
    images, token_ids = batch(6)

    def built(mixed_precision):
        with runtime.dtype_policy(mixed_precision):
            model = spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))
        model({"image_features": images, "token_ids": token_ids})  # creates every weight
        return model

    def scores(model):
        return np.asarray(model.similarity(model.encode_image(images), model.encode_text(token_ids)), np.float64)

    float32_model = randomize_weights(built("none"), scale=0.3)
    mixed_model = built(precision)
    mixed_model.set_weights(float32_model.get_weights())
    want, mixed = scores(float32_model), scores(mixed_model)
    assert np.abs(mixed - want).max() > 1e-5
    with runtime.computing_in_float32(mixed_model) as model:
        np.testing.assert_allclose(scores(model), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(scores(mixed_model), mixed)  # its policies are back
