"""The RCN's settings (`models.rcn_config`): Table I's rows (`rcn`, `rcn-0`,
`rcn-gru`) with Sec. IV.A's values in their `paper` presets, what the
`quick` and `compare` presets change, the checks of a config (the
regulariser's needs, the routing choices and ranges), and that the module
registers those three names (the network itself is
tests/models/test_rcn.py's)."""

import dataclasses

import pytest

from common.errors import InputError
from models import registry
from models.rcn_config import RCNConfig
from tests.models.test_base_config import registered_by

TABLE_I = ("rcn", "rcn-0", "rcn-gru")


def test_table_i_rows_are_registered_with_the_papers_settings():
    rows = {name: registry.get(name).experiment("paper") for name in ("rcn", "rcn-0", "rcn-gru")}
    settings = {name: (c.model.num_capsules, c.model.recursions, c.model.regularization) for name, c in rows.items()}
    assert settings == {"rcn": (4, 4, 0.05), "rcn-0": (4, 4, 0.0), "rcn-gru": (1, 0, 0.0)}
    for config in rows.values():
        model, train = config.model, config.train
        assert (model.word_dim, model.embed_dim, model.margin, model.hinge, model.loss_reduction) == (
            300, 1024, 0.2, "max", "mean")
        assert (model.vocab_max_size, model.vocab_min_count, model.max_length) == (5000, 1, 16)
        assert (train.optimizer, train.learning_rate, train.batch_size, train.grad_clip_norm) == ("adam", 2e-4, 16, None)


@pytest.mark.parametrize("name", TABLE_I)
def test_the_paper_preset_initialises_words_with_word2vec_and_draws_batches_from_all_pairs(name):
    config = registry.get(name).experiment("paper")
    # Sec. IV.A: W_w initialised with word2vec; an affine map of the image features (Fig. 3) into the cosine
    # space of VSE++'s loss [20]; mini-batches of N_b pairs drawn from the training pairs (Sec. III.C).
    assert (config.model.word_vectors, config.model.image_bias, config.model.similarity) == ("word2vec", True, "cosine")
    assert config.train.sampling == "all_captions"


@pytest.mark.parametrize("name", TABLE_I)
def test_the_quick_preset_shrinks_the_model_and_clips_the_sum_of_hinges(name):
    spec = registry.get(name)
    paper, quick, compare = (spec.experiment(preset) for preset in ("paper", "quick", "compare"))
    # 256-d GRUs and joint space, 100-d words, the sum of hinges; batches of 128 of similar length, gradients
    # clipped at a norm of 2, 3 epochs ("compare": 6).
    assert quick.model == dataclasses.replace(paper.model, hinge="sum", embed_dim=256, word_dim=100)
    assert quick.train == dataclasses.replace(paper.train, batch_size=128, epochs=3, grad_clip_norm=2.0,
                                              bucket_by_length=True)
    assert (compare.model, compare.train) == (quick.model, dataclasses.replace(quick.train, epochs=6))
    assert paper.data == quick.data == compare.data


@pytest.mark.parametrize("overrides", [["model.num_capsules=1"], ["model.recursions=0"], ["model.num_capsules=0"]])
def test_impossible_capsule_settings_are_input_errors(overrides):
    with pytest.raises(InputError, match="model config|model.num_capsules must be >= 1"):
        registry.get("rcn").experiment("paper", overrides)


@pytest.mark.parametrize("capsules, recursions", [(1, 4), (4, 0), (1, 0)])
def test_the_regulariser_needs_two_capsules_and_a_recursion(capsules, recursions):
    message = (f"regularization (eq. 14) needs num_capsules >= 2 and recursions >= 1, got {capsules} capsules and "
               f"{recursions} recursions; set model.regularization=0")
    with pytest.raises(ValueError) as error:
        RCNConfig(num_capsules=capsules, recursions=recursions)
    assert str(error.value) == message
    # Without it, any number of capsules and recursions.
    assert RCNConfig(num_capsules=capsules, recursions=recursions, regularization=0.0).num_capsules == capsules


def test_a_row_without_the_regulariser_takes_one_capsule_and_no_recursion():
    model = registry.get("rcn-0").experiment("paper", ["model.num_capsules=1", "model.recursions=0"]).model
    assert (model.num_capsules, model.recursions, model.regularization) == (1, 0, 0.0)
    # The GRU row with the regulariser turned on is refused as rcn's would be.
    with pytest.raises(InputError, match="^model config: regularization .eq. 14. needs num_capsules >= 2"):
        registry.get("rcn-gru").experiment("paper", ["model.regularization=0.05"])


def test_the_vse_checks_still_hold():
    with pytest.raises(ValueError, match="^hinge must be 'sum', 'max' or phases such as 'sum-max', got 'median'$"):
        RCNConfig(hinge="median")


@pytest.mark.parametrize("override, message", [
    ("model.num_capsules=0", "model.num_capsules must be >= 1; got 0"),
    ("model.recursions=-1", "model.recursions must be >= 0; got -1"),
    ("model.regularization=-0.05", "model.regularization must be >= 0; got -0.05"),
    ("model.routing_epsilon=0", "model.routing_epsilon must be > 0; got 0.0"),
    ("model.routing=signed", "model.routing must be one of literal, nonnegative; got 'signed'"),
    ("model.regularized_masks=both", "model.regularized_masks must be one of routed, own; got 'both'"),
])
def test_a_setting_out_of_its_range_or_choices_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("rcn").experiment("paper", [override])
    assert str(error.value) == message


def test_the_other_routing_and_masks_are_taken():
    config = registry.get("rcn").experiment("paper", ["model.routing=nonnegative", "model.regularized_masks=own",
                                                      "model.routing_epsilon=1e-9"]).model
    assert (config.routing, config.regularized_masks, config.routing_epsilon) == ("nonnegative", "own", 1e-9)


def test_the_module_registers_the_three_rows_of_table_i():
    names = [spec.name for spec in registered_by("models.rcn_config")]
    assert names == list(registry.FAMILIES["models.rcn_config"]) == list(TABLE_I)
