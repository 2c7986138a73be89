"""`models.restore.load_experiment`: a run's config.json back into the
`ExperimentConfig` it was written from. (Restoring a trained model's
weights, and damaged checkpoints: tests/test_train.py.)"""

import dataclasses
import json

import pytest

from common.errors import InputError
from common.files import write_json_atomically
from models import registry
from models.restore import load_experiment


@pytest.mark.parametrize("name", registry.names())
def test_every_models_experiment_round_trips_through_config_json(name, tmp_path):
    spec = registry.get(name)
    for preset in ("paper", *spec.presets):
        config = spec.experiment(preset, ["train.seed=7", "runtime.mixed_precision=bf16", "runtime.strategy=default"])
        config = dataclasses.replace(config, image_dim=1280)
        write_json_atomically(tmp_path / "config.json", config.to_json())
        restored = load_experiment(tmp_path)
        assert restored == config, (name, preset)
        assert type(restored.model) is spec.config_class
        assert (restored.image_dim, restored.train.seed, restored.runtime.mixed_precision,
                restored.runtime.strategy) == (1280, 7, "bf16", "default")


def test_a_hand_written_config_json_fills_the_rest_from_the_class_defaults(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_name": "gru", "preset": "quick", "image_dim": 12,
        "model": {"embed_dim": 64}, "train": {"epochs": 3}, "runtime": {"jit_compile": True},
    }))
    config = load_experiment(tmp_path)
    spec = registry.get("gru")
    assert (config.model_name, config.preset, config.image_dim) == ("gru", "quick", 12)
    assert config.model == dataclasses.replace(spec.config_class(), embed_dim=64)
    assert config.train == dataclasses.replace(type(spec.train)(), epochs=3)
    assert config.data == type(spec.data)()
    assert (config.runtime.strategy, config.runtime.mixed_precision, config.runtime.jit_compile) == (
        "auto", "none", True)


def test_a_directory_without_a_readable_config_json_is_named(tmp_path):
    with pytest.raises(InputError) as error:
        load_experiment(tmp_path)
    assert str(error.value) == f"{tmp_path / 'config.json'}: no config.json; is this a model directory written by train.py?"
    (tmp_path / "config.json").write_text('{"preset": "quick"}')
    with pytest.raises(InputError, match=f"^{tmp_path / 'config.json'}: unreadable model config"):
        load_experiment(tmp_path)
    (tmp_path / "config.json").write_text('{"model_name": "nope", "preset": "paper"}')
    with pytest.raises(InputError, match="unknown model"):
        load_experiment(tmp_path)


@pytest.mark.parametrize("name", ["nosuch", 7, ["gru"]])
def test_an_unknown_model_name_in_config_json_names_the_file_and_key_not_an_argument(tmp_path, name):
    """The user gave no --model: the error names config.json and its model_name key."""
    (tmp_path / "config.json").write_text(json.dumps({"model_name": name, "preset": "paper"}))
    with pytest.raises(InputError) as error:
        load_experiment(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'config.json'}: model_name {name!r}: unknown model; known models: {', '.join(registry.names())}"
    )
    assert "--model" not in str(error.value)


def test_an_unknown_model_argument_is_still_named_as_the_argument():
    with pytest.raises(InputError, match=r"^--model 'nosuch': unknown model; known models: "):
        registry.get("nosuch")
