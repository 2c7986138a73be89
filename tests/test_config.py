import pytest

from config import load_experiment, write_json_atomically
from data.errors import InputError
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


@pytest.mark.parametrize("override, message", [
    ("train.epoch=3", "unknown key"),
    ("nonsense", "unknown key"),
    ("train.epochs=abc", "train.epochs must be of type int"),
    ("train.optimizer=adagrad", "train.optimizer must be one of"),
    ("model.hinge=median", "hinge must be .sum., .max. or phases"),
    ("train.selection_metric=i2t_medr", "train.selection_metric must be one of"),
    ("train.optimizer_epsilon=0", "train.optimizer_epsilon must be positive"),
])
def test_bad_overrides_are_one_line_input_errors(override, message):
    with pytest.raises(InputError, match=message) as error:
        registry.get("gru").experiment("paper", [override])
    assert "\n" not in str(error.value)


def test_unknown_model_and_preset():
    with pytest.raises(InputError, match="unknown model"):
        registry.get("nope")
    with pytest.raises(InputError, match="has presets"):
        registry.get("gru").experiment("huge")


def test_json_round_trip(tmp_path):
    config = registry.get("gru").experiment("quick", ["train.seed=7"])
    write_json_atomically(tmp_path / "config.json", config.to_json())
    assert load_experiment(tmp_path, registry) == config
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="config.json"):
        load_experiment(tmp_path, registry)


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("gru"))


@pytest.mark.parametrize("override, message", [
    ("model.scales=[]", "scales must be distinct values"),
    ("model.scales=[\"bow\",\"bow\"]", "scales must be distinct values"),
    ("model.scales=[\"tfidf\"]", "scales must be distinct values"),
    ("model.word_vectors=null", "the word2vec scale needs word_vectors"),
    ("model.loss=l1", "loss must be one of"),
    ("model.similarity=euclid", "similarity must be one of"),
])
def test_w2vv_config_errors(override, message):
    with pytest.raises(InputError, match=message):
        registry.get("w2vv").experiment("quick", [override])
    # Without the word2vec scale no vectors are needed.
    assert registry.get("w2vv-bow").experiment("quick", ["model.word_vectors=null"]).model.scales == ("bow",)
