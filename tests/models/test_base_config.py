"""The base classes of every model config (`models.base_config`): the
settings the shared code reads and their defaults, the checks a value from
`--set` or a config.json meets there, and that every family's config
derives from them in its registering module (a `VocabularyConfig` where
the registry builds the vocabulary). Also `registered_by`, what a family's
registering module registers, which the family config tests share."""

import dataclasses
import importlib
import runpy
from unittest import mock

import pytest

from common.config import TrainConfig, apply_overrides
from models.base_config import ExperimentConfig
from common.errors import InputError
from data.splits import DataConfig
from models import registry
from models.base_config import ModelConfig, VocabularyConfig


def registered_by(module):
    """The `ModelSpec`s a family's registering `module` (a module name of
    `models.registry.FAMILIES`) registers, in order: its code run once more,
    with what it imports imported already, `registry.register` recording
    them instead of registering them."""
    path = importlib.import_module(module).__file__
    registered = []
    with mock.patch.object(registry, "register", registered.append):
        runpy.run_path(path)
    return registered


def test_the_settings_every_model_has_and_their_defaults():
    assert dataclasses.asdict(ModelConfig()) == {"tokenizer": "treebank", "word_vectors": None, "word_dim": 300}
    # No frequency threshold nor size limit unless a family sets one.
    assert dataclasses.asdict(VocabularyConfig()) == {"tokenizer": "treebank", "word_vectors": None, "word_dim": 300,
                                                      "vocab_min_count": 1, "vocab_max_size": None}


def bare_experiment(overrides):
    """An experiment of a bare `VocabularyConfig`, with `--set` overrides."""
    config = ExperimentConfig(model_name="base", preset="paper", model=VocabularyConfig(), train=TrainConfig(),
                              data=DataConfig())
    return apply_overrides(config, overrides)


@pytest.mark.parametrize("override, message", [
    ("model.tokenizer=spacy", "model.tokenizer must be one of treebank, alnum; got 'spacy'"),
    ("model.word_dim=0", "model.word_dim must be >= 1; got 0"),
    ("model.vocab_min_count=0", "model.vocab_min_count must be >= 1; got 0"),
    ("model.vocab_max_size=0", "model.vocab_max_size must be >= 1; got 0"),
])
def test_a_value_out_of_its_range_is_refused_naming_the_setting(override, message):
    with pytest.raises(InputError) as error:
        bare_experiment([override])
    assert str(error.value) == message


def test_the_smallest_values_in_range_and_no_size_limit_are_taken():
    config = bare_experiment(["model.tokenizer=alnum", "model.word_dim=1", "model.vocab_min_count=1",
                              "model.vocab_max_size=null", "model.word_vectors=vectors.txt"]).model
    assert config == VocabularyConfig(tokenizer="alnum", word_dim=1, vocab_min_count=1, vocab_max_size=None,
                                      word_vectors="vectors.txt")


@pytest.mark.parametrize("module", registry.FAMILIES)
def test_each_family_s_configs_derive_from_the_base_classes_in_its_registering_module(module):
    specs = registered_by(module)
    assert specs
    for spec in specs:
        assert issubclass(spec.config_class, ModelConfig), spec.name
        if spec.vocabulary is registry.default_vocabulary:  # reads vocab_min_count and vocab_max_size
            assert issubclass(spec.config_class, VocabularyConfig), spec.name


@pytest.mark.parametrize("name", registry.names())
def test_the_base_checks_hold_in_every_model_s_config(name):
    # A family that sets its own default of a base setting keeps the setting's check.
    with pytest.raises(InputError, match="^model.tokenizer must be one of treebank, alnum; got 'spacy'$"):
        registry.get(name).experiment("paper", ["model.tokenizer=spacy"])
    with pytest.raises(InputError, match="^model.word_dim must be >= 1; got 0$"):
        registry.get(name).experiment("paper", ["model.word_dim=0"])
