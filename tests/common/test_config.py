import dataclasses
import json
import typing

import pytest

from common.config import RuntimeConfig, check_override, valid_values
from common.errors import InputError
from models import registry


def test_presets_and_overrides_are_typed():
    config = registry.get("gru").experiment("quick", ["train.epochs=2", "model.embed_dim=64", "train.lr_decay_epochs=[1]"])
    assert config.model.hinge == "sum"  # from the quick preset
    assert config.train.epochs == 2 and config.model.embed_dim == 64
    assert config.train.lr_decay_epochs == (1,)
    assert isinstance(config.train.learning_rate, float)


def test_paper_preset_holds_the_papers_values():
    config = registry.get("gru").experiment("paper")
    assert (config.model.word_dim, config.model.embed_dim, config.model.margin, config.model.hinge) == (300, 1024, 0.2, "max")
    assert (config.train.optimizer, config.train.learning_rate, config.train.batch_size) == ("adam", 2e-4, 128)
    assert (config.train.grad_clip_norm, config.train.epochs, config.train.lr_decay_epochs) == (2.0, 30, (15,))


@pytest.mark.parametrize("override", ["epochs=2", "train.epochs", "train=2", "train.=2", "trian.epochs=2", ".x=1"])
def test_an_override_not_of_the_form_section_key_value_is_refused_without_the_model(override):
    # Checked before any model (nor TensorFlow) is loaded; whether the key exists is for apply_overrides.
    with pytest.raises(InputError) as error:
        check_override(override)
    assert str(error.value) == (f"--set {override!r}: unknown key; expected SECTION.KEY=VALUE with SECTION one of "
                                "model, train, data, runtime")


def test_an_override_splits_at_its_first_dot_and_equals_sign():
    assert check_override("model.word_vectors=a=b.txt") == ("model", "word_vectors", "a=b.txt")
    assert check_override("model.nosuchkey=1") == ("model", "nosuchkey", "1")


@pytest.mark.parametrize("override, message", [
    ("train.epoch=3", "unknown key"),
    ("nonsense", "unknown key"),
    ("train.epochs=abc", "train.epochs must be of type int"),
    ("train.optimizer=adagrad", "train.optimizer must be one of"),
    ("model.hinge=median", "hinge must be .sum., .max. or phases"),
    ("train.selection_metric=i2t_medr", "train.selection_metric must be one of"),
    ("train.optimizer_epsilon=0", "train.optimizer_epsilon must be > 0"),
    ("train.optimizer=sgd", None),
    ("train.learning_rate=-1", "train.learning_rate must be > 0; got -1.0"),
    ("train.epochs=0", "train.epochs must be >= 1; got 0"),
    ("train.batch_size=1", "train.batch_size must be >= 2"),
    ("train.lr_decay_factor=1.5", "train.lr_decay_factor must be <= 1"),
    ("train.lr_decay_epochs=[3,-1]", "train.lr_decay_epochs must be >= 0; got -1"),
    ("model.max_length=0", "model.max_length must be >= 1"),
    ("runtime.mixed_precision=fp8", "runtime.mixed_precision must be one of none, bf16, fp16; got 'fp8'"),
    ("runtime.strategy=tpu", "runtime.strategy must be one of auto, default, mirrored, multiworker; got 'tpu'"),
    ("runtime.jit_compile=maybe", "runtime.jit_compile must be of type bool"),
    ("train.mixed_precision=bf16", "unknown key"),  # a runtime setting now
])
def test_bad_overrides_are_one_line_input_errors(override, message):
    if message is None:  # the paper's SGD after Adam's epsilon: fine
        registry.get("gru").experiment("paper", [override])
        return
    with pytest.raises(InputError, match=message) as error:
        registry.get("gru").experiment("paper", [override])
    assert "\n" not in str(error.value)


def _numeric(hint):
    """Whether a field's type hint is a number, an optional one or a tuple of them."""
    args = typing.get_args(hint)
    return hint in (int, float) or any(_numeric(arg) for arg in args if arg is not type(None) and arg is not Ellipsis)


@pytest.mark.parametrize("name", registry.names())
def test_every_setting_of_every_model_is_range_checked(name):
    """Every preset of every registered model passes the checks; every
    numeric setting declares its valid range, and a value outside it stops
    the config, naming the setting."""
    spec = registry.get(name)
    for preset in ("paper", *spec.presets):
        config = spec.experiment(preset)
        for section in ("model", "train", "data", "runtime"):
            cls = type(getattr(config, section))
            for field, hint in typing.get_type_hints(cls).items():
                if not _numeric(hint):
                    continue
                valid = valid_values(cls, field)
                assert {"minimum", "above"} & set(valid), f"{cls.__name__}.{field} declares no lower bound"
                low = valid.get("minimum", valid.get("above"))
                bad = low - 1 if "minimum" in valid else low
                value = [bad] if typing.get_origin(hint) is tuple or tuple in map(typing.get_origin, typing.get_args(hint)) else bad
                with pytest.raises(InputError, match=rf"^{section}\.{field} must be"):
                    spec.experiment(preset, [f"{section}.{field}={json.dumps(value)}"])


def test_unknown_model_and_preset():
    with pytest.raises(InputError, match="unknown model"):
        registry.get("nope")
    with pytest.raises(InputError, match="has presets"):
        registry.get("gru").experiment("huge")


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("gru"))


@pytest.mark.parametrize("override, message", [
    ("model.scales=[]", "scales must be distinct values"),
    ("model.scales=[\"bow\",\"bow\"]", "scales must be distinct values"),
    ("model.scales=[\"tfidf\"]", "model.scales must be one of bow, word2vec, gru"),
    ("model.word_vectors=null", "the word2vec scale needs word_vectors"),
    ("model.loss=l1", "loss must be one of"),
    ("model.similarity=euclid", "similarity must be one of"),
])
def test_w2vv_config_errors(override, message):
    with pytest.raises(InputError, match=message):
        registry.get("w2vv").experiment("quick", [override])
    # Without the word2vec scale no vectors are needed.
    assert registry.get("w2vv-bow").experiment("quick", ["model.word_vectors=null"]).model.scales == ("bow",)


def test_runtime_settings_are_a_section_of_their_own():
    assert registry.get("gru").experiment("quick").runtime == RuntimeConfig(
        strategy="auto", mixed_precision="none", jit_compile=False)
    config = registry.get("gru").experiment(
        "quick", ["runtime.mixed_precision=bf16", "runtime.jit_compile=true", "runtime.strategy=mirrored"])
    assert (config.runtime.strategy, config.runtime.mixed_precision, config.runtime.jit_compile) == (
        "mirrored", "bf16", True)
    assert config.train == registry.get("gru").experiment("quick").train
    assert dataclasses.asdict(config)["runtime"] == {"strategy": "mirrored", "mixed_precision": "bf16",
                                                     "jit_compile": True}
