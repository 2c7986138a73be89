import json
import typing

import pytest

from common.config import ExperimentConfig, RuntimeConfig, check_override, experiment_from_json, valid_values
from common.errors import InputError
from common.files import write_json_atomically
from models import registry
from models.restore import load_experiment


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


def test_a_hand_edited_config_json_is_checked_naming_the_file(tmp_path):
    config = registry.get("rcn").experiment("quick")
    raw = json.loads(config.to_json())
    for section, field, value, message in [
        ("train", "learning_rate", -0.1, "train.learning_rate must be > 0"),
        ("model", "num_capsules", 0, "model.num_capsules must be >= 1"),
        ("model", "capsules", 3, "model.capsules: unknown setting"),
        ("train", "epochs", "many", "train.epochs must be of type int"),
    ]:
        edited = json.loads(json.dumps(raw))
        edited[section][field] = value
        (tmp_path / "config.json").write_text(json.dumps(edited))
        with pytest.raises(InputError, match=f"^{tmp_path / 'config.json'}: {message}"):
            load_experiment(tmp_path)


def test_unknown_model_and_preset():
    with pytest.raises(InputError, match="unknown model"):
        registry.get("nope")
    with pytest.raises(InputError, match="has presets"):
        registry.get("gru").experiment("huge")


def test_json_round_trip(tmp_path):
    config = registry.get("gru").experiment("quick", ["train.seed=7"])
    write_json_atomically(tmp_path / "config.json", config.to_json())
    assert load_experiment(tmp_path) == config
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="config.json"):
        load_experiment(tmp_path)


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
    assert json.loads(config.to_json())["runtime"] == {"strategy": "mirrored", "mixed_precision": "bf16",
                                                       "jit_compile": True}


def _gru_defaults(model_name, preset):
    spec = registry.get(model_name)
    return ExperimentConfig(model_name=model_name, preset=preset, model=spec.config_class(),
                            train=type(spec.train)(), data=type(spec.data)())


def test_a_config_json_from_before_the_runtime_section_still_loads():
    """Runs written before the runtime section kept mixed_precision and
    jit_compile in `train`: they load into `runtime`."""
    legacy = json.loads(registry.get("gru").experiment("quick", ["train.epochs=3"]).to_json())
    del legacy["runtime"]
    legacy["train"].update(mixed_precision="bf16", jit_compile=True)
    config = experiment_from_json(json.dumps(legacy), _gru_defaults, "run/config.json")
    assert config.runtime == RuntimeConfig(strategy="auto", mixed_precision="bf16", jit_compile=True)
    assert config.train.epochs == 3 and not hasattr(config.train, "mixed_precision")
    # Without either key: the runtime defaults.
    del legacy["train"]["mixed_precision"], legacy["train"]["jit_compile"]
    assert experiment_from_json(json.dumps(legacy), _gru_defaults, "run/config.json").runtime == RuntimeConfig()
    # A bad legacy value is named as the runtime setting it now is.
    legacy["train"]["mixed_precision"] = "fp8"
    with pytest.raises(InputError, match="^run/config.json: runtime.mixed_precision must be one of"):
        experiment_from_json(json.dumps(legacy), _gru_defaults, "run/config.json")


def test_a_config_json_with_a_runtime_section_keeps_train_free_of_runtime_settings():
    current = json.loads(registry.get("gru").experiment("quick").to_json())
    current["train"]["mixed_precision"] = "bf16"
    with pytest.raises(InputError, match="^run/config.json: train.mixed_precision: unknown setting"):
        experiment_from_json(json.dumps(current), _gru_defaults, "run/config.json")
