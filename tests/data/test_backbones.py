"""Tests of `data.backbones`: the backbone names and their weights files,
the checks made before any network is built, EfficientNet-Lite0's input
scaling, and how a TF Hub module's input size and features are read from
its signature and outputs. (The networks themselves run in
tests/data/test_extract_features.py and test_efficientnet_lite.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from data import backbones

CHOICES = "choose efficientnet-lite0, resnet152, vgg16, vgg19 or tfhub:HANDLE"


def test_weights_urls_are_the_ones_keras_downloads():
    from keras.src.applications import resnet, vgg16, vgg19

    assert backbones.BACKBONES["resnet152"].weights_url == (
        resnet.BASE_WEIGHTS_PATH + "resnet152_weights_tf_dim_ordering_tf_kernels.h5"
    )
    assert backbones.BACKBONES["vgg16"].weights_url == vgg16.WEIGHTS_PATH
    assert backbones.BACKBONES["vgg19"].weights_url == vgg19.WEIGHTS_PATH


@pytest.mark.parametrize("name", ["resnet152", "vgg16", "vgg19", "efficientnet-lite0", "tfhub:x",
                                  "tfhub:https://tfhub.dev/google/imagenet/mobilenet_v2_100_224/feature_vector/5"])
def test_a_known_backbone_name_is_taken(name):
    backbones.check_backbone_name(name)


@pytest.mark.parametrize("name", ["resnet50", "tfhub:", "", "VGG16", "efficientnet-lite1"])
def test_an_unknown_backbone_name_is_refused_with_the_choices(name):
    with pytest.raises(InputError, match=f"^--backbone {name!r}: {CHOICES}$"):
        backbones.check_backbone_name(name)


def test_weights_are_checked_before_a_network_is_built(tmp_path, monkeypatch):
    # Building would fail the test: every refusal comes first.
    monkeypatch.setattr(backbones.efficientnet_lite, "efficientnet_lite0", lambda *args: pytest.fail("built"))
    monkeypatch.setattr(backbones.keras.applications.vgg16, "VGG16", lambda **kwargs: pytest.fail("built"))
    missing = tmp_path / "missing.weights.h5"
    with pytest.raises(InputError, match=f"^--weights {missing}: file not found$"):
        backbones.build_backbone("vgg16", str(missing))
    with pytest.raises(InputError, match=f"^--weights {missing}: file not found$"):
        backbones.efficientnet_lite_stages(str(missing))
    with pytest.raises(InputError, match="^--weights applies to the keras.applications backbones"):
        backbones.build_backbone("tfhub:x", "none")


def test_efficientnet_lite0_scaling_is_x_minus_127_over_128():
    pixels = np.array([0.0, 127.0, 255.0], np.float32)
    np.testing.assert_array_equal(backbones.scale_efficientnet_lite(pixels), [-127 / 128, 0.0, 1.0])


@pytest.mark.parametrize("handle", ["no/such", "./a/b/c", "module"])
def test_a_missing_local_tfhub_module_is_refused_before_loading(handle, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=f"^--backbone tfhub:{handle}: no such module directory$"):
        backbones.hub_backbone(handle)


def _specs(*shapes):
    return [tf.TensorSpec(shape, tf.float32) for shape in shapes]


@pytest.mark.parametrize("specs, size", [
    (_specs([None, 32, 48, 3]), (32, 48)),
    (_specs([None, 32, 48, 3], [None, 32, 48, 3]), (32, 48)),  # a function's several concrete signatures
    (_specs([None, None, None, 3]), None),
    (_specs([None, 32, None, 3]), None),
    (_specs([None, 32, 32, 3], [None, 64, 64, 3]), None),
    (_specs([None, 32, 32, 3], [None, None, None, 3]), None),
    ([], None),
])
def test_a_tfhub_modules_input_size_is_fixed_only_when_its_signature_fixes_one(specs, size):
    assert backbones._fixed_input_size(specs) == size


def test_a_tfhub_modules_features_are_its_output_or_the_default_entry():
    features, other = tf.ones([2, 4]), tf.zeros([2, 3])
    assert backbones._feature_output(features) is features
    assert backbones._feature_output({"other": other, "default": features}) is features
    assert backbones._feature_output({"pooled": features, "other": other}) is features
