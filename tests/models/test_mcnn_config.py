"""m-CNN's settings (`models.mcnn_config`): the sizes of Sec. 3 and 4 in the
`paper` presets, the checks of a config, and m-CNN_ENS's members (the
network itself is tests/models/test_mcnn.py's)."""

import pytest

from common.errors import InputError
from models import registry
from models.mcnn_config import VARIANTS, MCNNConfig, stage_lengths
from tests.models.test_members import fake_run


def test_three_valid_convolutions_and_poolings_by_hand():
    # 30 words, window 3: 28 -> 14, 12 -> 6, 4 -> 2 positions (the module docstring's reading).
    assert stage_lengths(30) == [14, 6, 2]
    assert stage_lengths(22) == [10, 4, 1]
    assert stage_lengths(30, window=5) == [13, 4, 0]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_paper_preset_holds_the_paper_s_sizes(variant):
    config = registry.get(f"mcnn-{variant}").experiment("paper")
    model, train = config.model, config.train
    assert model.variant == variant
    # Sec. 3: d = 256, k_rp = 3, 200/300/300 maps, one hidden layer of 400; eq. 10's margin 0.5; Sec. 4: dropout.
    assert (model.embed_dim, model.window, model.feature_maps, model.hidden_units) == (256, 3, (200, 300, 300), (400,))
    assert (model.margin, model.dropout, model.word_dim, model.max_length) == (0.5, 0.1, 50, 30)
    assert (model.negatives, model.negatives_per_pair, model.image_adapter) == ("sampled", 1, ())
    assert (train.optimizer, train.batch_size, train.grad_clip_norm) == ("sgd", 128, None)


@pytest.mark.parametrize("change, message", [
    ({"feature_maps": (200, 300)}, "feature_maps must be three sizes"),
    ({"hidden_units": ()}, "hidden_units must list at least one size"),
    ({"max_length": 21}, "max_length=21 with window 3 leaves no position"),
])
def test_a_config_that_cannot_be_built_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        MCNNConfig(**change)


def test_the_ensemble_takes_one_member_of_each_variant_in_order(tmp_path):
    runs = {variant: fake_run(tmp_path, variant, f"mcnn-{variant}") for variant in VARIANTS}
    spec = registry.get("mcnn-ens")

    def prepare(directories):
        config = spec.experiment("paper", [f"model.members={','.join(map(str, directories))}"])
        return spec.prepare(config, spec.parts(config.model))

    assert prepare(runs.values()).data.image_features == "fc"
    with pytest.raises(InputError, match="m-CNN_ENS needs the model directories of its 4 members"):
        prepare(list(runs.values())[:3])
    swapped = [runs["phs"], runs["wd"], runs["phl"], runs["st"]]
    with pytest.raises(InputError, match=f"{runs['phs']}/config.json: a 'mcnn-phs' run; the ensemble's wd member"):
        prepare(swapped)
