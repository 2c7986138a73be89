"""`models.registry.ModelSpec.experiment`: the kinds of image features a
model reads (`train.py --image-features`)."""

import pytest

from common.errors import InputError
from models import registry

FNE_PIPELINES = ("sh", "mh", "soe", "moe", "ph", "poe")


@pytest.mark.parametrize("name", FNE_PIPELINES)
def test_fne_features_make_the_pipeline_read_every_layers_features(name):
    config = registry.get(name).experiment("paper", image_features="fne")
    assert (config.model.image_input, config.data.image_features) == ("fne", "stages")
    # The default, one CNN layer's features.
    config = registry.get(name).experiment("paper")
    assert (config.model.image_input, config.data.image_features) == ("unit", "ims")


def test_fne_features_combine_with_a_preset_and_overrides():
    config = registry.get("ph").experiment("quick", ["model.embed_dim=16", "data.test_split=dev"], "fne")
    assert (config.model.image_input, config.data.image_features) == ("fne", "stages")
    assert (config.model.embed_dim, config.data.test_split, config.preset) == (16, "dev", "quick")


@pytest.mark.parametrize("name", registry.names())
def test_every_model_reads_fc_features(name):
    assert registry.get(name).experiment("paper", image_features="fc").data.image_features == "ims"


def test_a_model_without_fne_features_names_itself_and_what_it_reads():
    with pytest.raises(InputError) as error:
        registry.get("gru").experiment("paper", image_features="fne")
    assert str(error.value) == "--image-features 'fne': model 'gru' reads fc"
    with pytest.raises(InputError) as error:
        registry.get("ph").experiment("paper", image_features="stages")
    assert str(error.value) == "--image-features 'stages': model 'ph' reads fc, fne"
