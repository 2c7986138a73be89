"""Tests of `data.full_network`: EfficientNet-Lite0's Full-Network
Embedding features are its 18 stages' spatial means in the order of the
embedded stages.json, the slice it names `ims` is the backbone's usual
feature, and a backbone without stages is refused before anything is
built. (VGG16's layout is checked through the command,
tests/data/test_extract_features.py.)"""

import json

import keras
import numpy as np
import pytest

from common.errors import InputError
from data import backbones
from data.full_network import full_network
from tests.helpers import EMBEDDED_DATA


@pytest.fixture(scope="module")
def lite0():
    keras.utils.set_random_seed(0)
    return full_network("efficientnet-lite0", "none")


def test_the_stages_are_the_embedded_stages_json(lite0):
    _, _, layout, ims = lite0
    embedded = json.loads((EMBEDDED_DATA / "stages.json").read_text())["layers"]
    assert layout == embedded
    # The head (1,280 wide) is last, 3,120 values in all.
    assert (ims.start, ims.stop) == (3120 - 1280, 3120)


def test_the_features_are_the_stage_means_and_ims_is_the_backbones_feature(lite0):
    model, preprocess, layout, ims = lite0
    # The stage maps the model averages, by the names of stages.json.
    stages = keras.Model(model.input, [model.get_layer(f"{entry['name']}_mean").input for entry in layout])
    backbone, backbone_preprocess = backbones.build_backbone("efficientnet-lite0", "none")
    backbone.set_weights(model.get_weights())  # the same (random) weights
    images = np.random.default_rng(0).uniform(0, 255, (1, 224, 224, 3)).astype(np.float32)
    features = np.asarray(model(preprocess(images)))
    maps = [np.asarray(output) for output in stages(backbones.scale_efficientnet_lite(images))]
    assert [m.shape[-1] for m in maps] == [entry["dim"] for entry in layout]
    np.testing.assert_allclose(features, np.concatenate([m.mean(axis=(1, 2)) for m in maps], axis=1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(features[:, ims], np.asarray(backbone(backbone_preprocess(images))), rtol=1e-6, atol=1e-6)
    assert features.shape[1] == sum(entry["dim"] for entry in layout)


@pytest.mark.parametrize("name", ["resnet152", "tfhub:some/module"])
def test_a_backbone_without_stages_is_refused_before_anything_is_built(monkeypatch, name):
    monkeypatch.setattr("data.full_network.build_backbone", lambda *args: pytest.fail("built"))
    with pytest.raises(InputError, match=f"^--stages needs a backbone with stages: efficientnet-lite0, vgg16 or "
                                         f"vgg19; got {name}$"):
        full_network(name, "none")
