"""The GRU VSE model's settings (`models.vse_config`): VSE++'s values in the
`gru` model's `paper` preset, what its `quick` preset changes, the checks
of a config (the hinge's phases, the choices and ranges of its settings),
and that the module registers `gru` alone (the network itself is
tests/models/test_vse.py's)."""

import dataclasses

import pytest

from common.errors import InputError
from models import registry
from models.vse_config import VSEConfig
from tests.models.test_base_config import registered_by


def test_the_paper_preset_holds_vse_plus_plus_s_settings():
    config = registry.get("gru").experiment("paper")
    model, train = config.model, config.train
    # 300-d words, a 1024-d GRU and joint space, margin 0.2 on the hardest negative, summed over the batch (the
    # VSE++ code), cosine similarity of an affine map of the raw image features.
    assert (model.word_dim, model.embed_dim, model.margin, model.hinge, model.loss_reduction) == (
        300, 1024, 0.2, "max", "sum")
    assert (model.similarity, model.absolute, model.image_bias, model.image_input) == ("cosine", False, True, "raw")
    # NLTK's tokenizer, words seen at least 4 times, no cut, randomly initialised word embeddings.
    assert (model.tokenizer, model.vocab_min_count, model.vocab_max_size, model.max_length, model.word_vectors) == (
        "treebank", 4, None, None, None)
    # Adam at 2e-4, batches of 128, gradients clipped at a norm of 2, 30 epochs, the rate divided by 10 after 15.
    assert (train.optimizer, train.learning_rate, train.batch_size, train.grad_clip_norm) == ("adam", 2e-4, 128, 2.0)
    assert (train.epochs, train.lr_decay_epochs, train.lr_decay_factor) == (30, (15,), 0.1)


def test_the_quick_preset_sums_the_hinges_for_4_epochs_of_length_bucketed_batches():
    spec = registry.get("gru")
    paper, quick = spec.experiment("paper"), spec.experiment("quick")
    assert quick.model == dataclasses.replace(paper.model, hinge="sum")
    assert quick.train == dataclasses.replace(paper.train, epochs=4, bucket_by_length=True)
    assert quick.data == paper.data


@pytest.mark.parametrize("hinge", ["sum", "max", "sum-max"])
def test_a_hinge_is_sum_max_or_phases_of_them(hinge):
    assert VSEConfig(hinge=hinge).hinge == hinge


@pytest.mark.parametrize("hinge", ["median", "sum-maxx", "sum-", "sum+max", ""])
def test_any_other_hinge_is_refused(hinge):
    message = f"hinge must be 'sum', 'max' or phases such as 'sum-max', got {hinge!r}"
    with pytest.raises(ValueError) as error:
        VSEConfig(hinge=hinge)
    assert str(error.value) == message
    # From --set or a config.json: one line naming the section.
    with pytest.raises(InputError) as error:
        registry.get("gru").experiment("paper", [f"model.hinge={hinge}"])
    assert str(error.value) == f"model config: {message}"


@pytest.mark.parametrize("override, message", [
    ("model.embed_dim=0", "model.embed_dim must be >= 1; got 0"),
    ("model.margin=-0.1", "model.margin must be >= 0; got -0.1"),
    ("model.loss_reduction=max", "model.loss_reduction must be one of sum, mean; got 'max'"),
    ("model.max_length=0", "model.max_length must be >= 1; got 0"),
    ("model.similarity=dot", "model.similarity must be one of cosine, order; got 'dot'"),
    ("model.image_input=fc", "model.image_input must be one of raw, unit, fne; got 'fc'"),
])
def test_a_setting_out_of_its_range_or_choices_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("gru").experiment("paper", [override])
    assert str(error.value) == message


def test_the_edges_of_the_ranges_and_every_choice_are_taken():
    config = registry.get("gru").experiment("paper", [
        "model.embed_dim=1", "model.margin=0", "model.loss_reduction=mean", "model.max_length=1",
        "model.similarity=order", "model.absolute=true", "model.image_bias=false"]).model
    assert (config.embed_dim, config.margin, config.loss_reduction, config.max_length) == (1, 0.0, "mean", 1)
    assert (config.similarity, config.absolute, config.image_bias) == ("order", True, False)
    for image_input in ("raw", "unit", "fne"):
        assert registry.get("gru").experiment("paper", [f"model.image_input={image_input}"]).model.image_input == (
            image_input)


def test_the_module_registers_gru_alone():
    names = [spec.name for spec in registered_by("models.vse_config")]
    assert names == list(registry.FAMILIES["models.vse_config"]) == ["gru"]
