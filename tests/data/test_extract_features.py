import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.backend import config as keras_config

from common.errors import InputError
from data import backbones, extract_features, feature_extractor, image_decoding, provenance, readers
from tests.helpers import EMBEDDED_DATA, EMBEDDED_IMAGES

IMAGES = sorted(EMBEDDED_IMAGES.glob("*.jpg"))[:3]
NAMES = [image.name for image in IMAGES]


@pytest.fixture
def release(tmp_path):
    """Three real test JPEGs and a tiny Flickr8k-style text release (train: 2 images, test: 1)."""
    images, text = tmp_path / "images", tmp_path / "text"
    images.mkdir()
    text.mkdir()
    for image in IMAGES:
        shutil.copy(image, images)
    tokens = [f"{name}#{k}\tcaption {k} of {name} ." for name in NAMES for k in range(5)]
    (text / "Flickr8k.token.txt").write_text("\n".join(tokens) + "\n")
    (text / "Flickr_8k.trainImages.txt").write_text("\n".join(NAMES[:2]) + "\n")
    (text / "Flickr_8k.testImages.txt").write_text(NAMES[2] + "\n")
    return images, text


def run_cli(images, text, out, *extra):
    return extract_features.main(["--images", str(images), "--flickr-text", str(text), "--out", str(out), *extra])


def test_resnet152_features_in_precomp_layout(release, tmp_path):
    images, text = release
    out = tmp_path / "precomp"
    assert run_cli(images, text, out, "--splits", "train,test", "--weights", "none", "--crops", "1",
                   "--batch-size", "2") == 0
    train, test = readers.load_precomp(out, "train"), readers.load_precomp(out, "test")
    assert train.images.shape == (2, 2048) and test.images.shape == (1, 2048)
    assert np.all(np.isfinite(train.images)) and np.any(train.images != 0)
    assert train.image_ids == NAMES[:2] and test.image_ids == NAMES[2:]
    assert train.captions[5:] == [f"caption {k} of {NAMES[1]} ." for k in range(5)]
    assert not (out / "dev_ims.npy").exists()
    assert provenance.read(out) == {
        "backbone": "resnet152", "weights": "none", "crops": 1, "ims": "avg_pool (2048)",
        "input": {"decoding": "RGB; JPEG by libjpeg's accurate integer DCT (as PIL)",
                  "resizing": "bilinear, antialiased, aspect ratio not kept", "views": "the image resized to 224x224",
                  "scaling": "keras.applications.resnet.preprocess_input (BGR, ImageNet means subtracted)"},
    }


def test_vgg16_fc7_with_ten_crops(release, tmp_path):
    images, text = release
    out = tmp_path / "precomp"
    assert run_cli(images, text, out, "--splits", "test", "--backbone", "vgg16", "--weights", "none") == 0
    test = readers.load_precomp(out, "test")
    assert test.images.shape == (1, 4096) and np.all(np.isfinite(test.images))


def test_vgg16_full_network_features(release, tmp_path):
    images, text = release
    common = ["--splits", "test", "--backbone", "vgg16", "--weights", "none", "--crops", "1"]
    keras.utils.set_random_seed(0)
    assert run_cli(images, text, tmp_path / "fne", *common, "--stages") == 0
    keras.utils.set_random_seed(0)  # the same random weights for the plain run
    assert run_cli(images, text, tmp_path / "fc", *common) == 0
    layout = json.loads((tmp_path / "fne" / "stages.json").read_text())["layers"]
    # VGG16: 13 convolutions and the 2 fully connected layers, 12,416 values.
    assert [entry["name"] for entry in layout[-3:]] == ["block5_conv3", "fc1", "fc2"]
    assert len(layout) == 15 and sum(entry["dim"] for entry in layout) == 12416
    stages = readers.load_precomp(tmp_path / "fne", "test", "stages").images
    assert stages.shape == (1, 12416) and np.all(np.isfinite(stages))
    fc7 = readers.load_precomp(tmp_path / "fc", "test").images
    np.testing.assert_allclose(readers.load_precomp(tmp_path / "fne", "test").images, fc7, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stages[:, -4096:], fc7, rtol=1e-4, atol=1e-5)


def test_stages_need_a_backbone_with_stages(release, tmp_path, capsys):
    images, text = release
    assert run_cli(images, text, tmp_path / "o", "--splits", "test", "--weights", "none", "--stages") == 2
    assert "--stages needs a backbone with stages: --backbone efficientnet-lite0, vgg16 or vgg19" in capsys.readouterr().err


def test_efficientnet_lite0_makes_the_embedded_features_and_records_their_provenance(release, tmp_path):
    """The embedded models' features from any image folder: the rows of
    the embedded test features of the same JPEGs, stages included."""
    images, text = release
    out = tmp_path / "precomp"
    assert run_cli(images, text, out, "--splits", "train,test", "--backbone", "efficientnet-lite0", "--stages") == 0
    ids = (EMBEDDED_DATA / "test_ids.txt").read_text().split()
    rows = [ids.index(name) for name in NAMES]
    for kind in ("ims", "stages"):
        ours = np.concatenate([readers.load_precomp(out, split, kind).images for split in ("train", "test")])
        expected = np.load(EMBEDDED_DATA / f"test_{kind}.npy")[rows].astype(np.float32)
        np.testing.assert_allclose(ours, expected, rtol=4e-3, atol=4e-3)
    assert json.loads((out / "stages.json").read_text())["layers"] == json.loads(
        (EMBEDDED_DATA / "stages.json").read_text())["layers"]
    recorded = provenance.read(out)
    assert provenance.same_features(recorded, provenance.read(EMBEDDED_DATA))
    assert recorded["crops"] == 2 and recorded["input"]["scaling"] == "(x - 127) / 128"


def test_offline_imagenet_weights_give_a_one_line_message(release, tmp_path, monkeypatch, capsys):
    # An empty Keras home and a proxy that refuses every connection: the real
    # download path fails as it does offline. In this process, not a fresh one
    # (7 s of TensorFlow import): as Keras reads KERAS_HOME when imported, its
    # home is set to the variable's folder (made, as Keras makes it); as
    # urllib's opener keeps the proxies of when it was first built, it is
    # built again, from the refusing proxy.
    images, text = release
    blocked = "http://127.0.0.1:9"
    for name in ("https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, blocked)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "")
    keras_home = tmp_path / "keras"
    keras_home.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    monkeypatch.setattr(keras_config, "_KERAS_DIR", str(keras_home))
    monkeypatch.setattr(urllib.request, "_opener", None)
    assert run_cli(images, text, tmp_path / "out", "--splits", "test") == 2
    assert (keras_home / "models").is_dir()  # where Keras tried to download the file to
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert error == [
        "error: cannot download the ImageNet weights of resnet152: download "
        f"{backbones.BACKBONES['resnet152'].weights_url} into {tmp_path / 'keras' / 'models'}/, "
        "or pass --weights PATH"
    ]


def test_weights_file_errors(release, tmp_path, capsys):
    images, text = release
    assert run_cli(images, text, tmp_path / "o", "--splits", "test", "--weights", str(tmp_path / "missing.h5")) == 2
    assert capsys.readouterr().err.strip().endswith("missing.h5: file not found")
    (tmp_path / "junk.weights.h5").write_bytes(b"not hdf5")
    junk = ["--splits", "test", "--backbone", "vgg16", "--weights", str(tmp_path / "junk.weights.h5")]
    assert run_cli(images, text, tmp_path / "o", *junk) == 2
    err = capsys.readouterr().err.strip()
    assert "junk.weights.h5: not a weights file of vgg16" in err and len(err.splitlines()) == 1


def test_corrupt_or_missing_images_exit_2_with_one_line(release, tmp_path, capsys):
    images, text = release
    truncated = images / NAMES[1]
    truncated.write_bytes(truncated.read_bytes()[:3000])
    # The images are decoded once the network is built: the smallest one (not ResNet-152's 5 s).
    small = ["--backbone", "efficientnet-lite0", "--weights", "none", "--crops", "1"]
    assert run_cli(images, text, tmp_path / "o", "--splits", "train", *small) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {truncated}: not a readable image") and len(err.splitlines()) == 1
    truncated.unlink()
    assert run_cli(images, text, tmp_path / "o", "--splits", "test,train", "--weights", "none") == 2
    assert capsys.readouterr().err.strip() == f"error: {truncated}: image of split train not found"
    assert not (tmp_path / "o").exists()


class _MeanColourModule(tf.Module):
    """A TF Hub-style image feature-vector module: [B, H, W, 3] in [0, 1] ->
    the mean colour of each image times a fixed [3, 4] matrix."""

    def __init__(self):
        super().__init__()
        self.projection = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4) / 10)

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
    def __call__(self, images):
        return tf.reduce_mean(images, axis=[1, 2]) @ self.projection


def _save_module(path, as_signature):
    module = _MeanColourModule()
    if as_signature:
        # Only a "default" signature returning a dict, as TF1 Hub modules.
        function = tf.function(lambda images: {"default": module(images)},
                               input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
        holder = tf.Module()  # not callable itself; tracks the variable
        holder.inner = module
        tf.saved_model.save(holder, str(path), signatures={"default": function.get_concrete_function()})
    else:
        tf.saved_model.save(module, str(path))
    return module.projection.numpy()


@pytest.mark.parametrize("as_signature", [False, True])
def test_tfhub_module_as_the_backbone(release, tmp_path, as_signature):
    """A module written here and loaded by tensorflow_hub: the features are
    its outputs on the ten crops scaled to [0, 1], averaged."""
    images, text = release
    projection = _save_module(tmp_path / "module", as_signature)
    out = tmp_path / "out"
    assert run_cli(images, text, out, "--splits", "train,test", "--backbone", f"tfhub:{tmp_path / 'module'}") == 0
    split = readers.load_precomp(out, "train", "ims")
    assert split.images.shape == (2, 4) and split.image_ids == NAMES[:2]
    for row, path in enumerate(IMAGES[:2]):
        image = image_decoding.load_image(str(path), 256).numpy() / 255
        views = [image[y : y + 224, x : x + 224] for y, x in [(0, 0), (0, 32), (32, 0), (32, 32), (16, 16)]]
        expected = np.mean([view.mean(axis=(0, 1)) for view in views], axis=0) @ projection
        np.testing.assert_allclose(split.images[row], expected, rtol=1e-4)
    # Rebuilt from the folder's provenance (a module directory), on encoded images.
    extractor = feature_extractor.from_provenance(provenance.read(out), "ims")
    contents = tf.constant([path.read_bytes() for path in IMAGES[:2]])
    np.testing.assert_allclose(extractor.encode_bytes(contents).numpy(), split.images, rtol=1e-4)


@pytest.mark.parametrize("backbone, extra, message", [
    ("tfhub:/nonexistent/module", [], "no such module directory"),
    ("tfhub:{tmp}", [], "not a TF Hub module"),
    ("tfhub:{tmp}", ["--weights", "none"], "--weights applies to the keras.applications backbones"),
    ("tfhub:{tmp}", ["--stages"], "--stages needs a backbone with stages"),
    ("resnet51", [], "--backbone 'resnet51': choose efficientnet-lite0, resnet152, vgg16, vgg19 or tfhub:HANDLE"),
])
def test_tfhub_errors_are_one_line(release, tmp_path, capsys, backbone, extra, message):
    images, text = release
    (tmp_path / "empty").mkdir()
    argv = ["--splits", "test", "--backbone", backbone.format(tmp=tmp_path / "empty"), *extra]
    assert run_cli(images, text, tmp_path / "o", *argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert not (tmp_path / "o").exists()


def test_offline_tfhub_handle_gives_a_one_line_message(release, tmp_path, monkeypatch, capsys):
    images, text = release
    blocked = "http://127.0.0.1:9"
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, blocked)
    monkeypatch.setenv("TFHUB_CACHE_DIR", str(tmp_path / "hub"))
    handle = "https://tfhub.dev/google/imagenet/mobilenet_v2_100_224/feature_vector/5"
    assert run_cli(images, text, tmp_path / "o", "--splits", "test", "--backbone", f"tfhub:{handle}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: --backbone tfhub:{handle}: cannot download the module (")
    assert err[-1].endswith("pass its directory as --backbone tfhub:PATH")


class _FixedSizeModule(tf.Module):
    """A module that takes 32x32 images only (as Inception takes 299x299):
    its features are the pixels of every 8th row and column, [B, 48]."""

    @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 3], tf.float32)])
    def __call__(self, images):
        return tf.reshape(images[:, ::8, ::8, :], [-1, 4 * 4 * 3])


class _FeatureMapModule(tf.Module):
    """A module returning feature maps [B, H / 8, W / 8, 5], not vectors."""

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
    def __call__(self, images):
        return tf.nn.avg_pool2d(images, 8, 8, "VALID") @ tf.ones([3, 5])


class _GreyModule(tf.Module):
    """A module of one-channel images: it cannot run on RGB."""

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 1], tf.float32)])
    def __call__(self, images):
        return tf.reduce_mean(images, axis=[1, 2])


@pytest.mark.parametrize("crops", [1, 10])
def test_tfhub_module_of_a_fixed_input_size_gets_the_crops_resized_to_it(release, tmp_path, crops):
    images, text = release
    tf.saved_model.save(_FixedSizeModule(), str(tmp_path / "fixed"))
    out = tmp_path / "out"
    argv = ["--splits", "test", "--crops", str(crops), "--backbone", f"tfhub:{tmp_path / 'fixed'}"]
    assert run_cli(images, text, out, *argv) == 0
    features = readers.load_precomp(out, "test", "ims").images
    # The 224x224 views scaled to [0, 1], each resized to 32x32 (bilinear,
    # antialiased), every 8th pixel kept, averaged over the views.
    if crops == 1:
        views = [image_decoding.load_image(str(IMAGES[2]), 224).numpy() / 255]
    else:
        image = image_decoding.load_image(str(IMAGES[2]), 256).numpy() / 255
        views = [image[y : y + 224, x : x + 224] for y, x in [(0, 0), (0, 32), (32, 0), (32, 32), (16, 16)]]
        views += [view[:, ::-1] for view in views]
    small = [tf.image.resize(view, (32, 32), antialias=True).numpy() for view in views]
    expected = np.mean([view[::8, ::8].reshape(-1) for view in small], axis=0)
    assert features.shape == (1, 48)
    np.testing.assert_allclose(features[0], expected, rtol=1e-4, atol=1e-6)


def test_tfhub_backbone_probes_the_modules_signature_once_up_front(tmp_path):
    tf.saved_model.save(_FixedSizeModule(), str(tmp_path / "fixed"))
    _save_module(tmp_path / "any-size", as_signature=True)
    fixed = backbones.hub_backbone(str(tmp_path / "fixed"))
    assert (fixed.input_size, fixed.dim) == ((32, 32), 48)
    crops = tf.random.uniform([2, 224, 224, 3], seed=1)
    np.testing.assert_allclose(fixed(crops), tf.image.resize(crops, (32, 32), antialias=True)[:, ::8, ::8].numpy()
                               .reshape(2, 48), rtol=1e-6)
    any_size = backbones.hub_backbone(str(tmp_path / "any-size"))
    assert (any_size.input_size, any_size.dim) == (None, 4)


@pytest.mark.parametrize("module, message", [
    (_FeatureMapModule, "the module returns shape [batch, 28, 28, 5], not [batch, features]"),
    (_GreyModule, "the module does not run on [batch, 224, 224, 3] float32 images ("),
])
def test_tfhub_module_that_gives_no_feature_vectors_is_refused_before_reading_images(
        release, tmp_path, capsys, module, message):
    images, text = release
    # A corrupt image: it would be named first if the images were read before the module is probed.
    (images / NAMES[2]).write_bytes(b"not a jpeg")
    path = tmp_path / "module"
    tf.saved_model.save(module(), str(path))
    assert run_cli(images, text, tmp_path / "o", "--splits", "test", "--backbone", f"tfhub:{path}") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --backbone tfhub:{path}: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_the_command_loads_tensorflow_only_once_it_runs():
    # So that its quiet start (common.startup) comes first.
    code = "import sys, data.extract_features; print('tensorflow' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_help_names_every_backbone(capsys):
    with pytest.raises(SystemExit):
        extract_features.parse_args(["--help"])
    backbone_help = " ".join(capsys.readouterr().out.split()).split("--backbone BACKBONE ")[1]
    assert backbone_help.startswith(f"{', '.join(sorted(backbones.BACKBONES))}, efficientnet-lite0 (the CNN of "
                                    "the embedded features), or tfhub:HANDLE_OR_PATH")


@pytest.mark.slow  # over 10 s on 2 cores
def test_from_provenance_rebuilds_what_the_command_made_and_takes_encoded_images(release, tmp_path):
    images, text = release
    out = tmp_path / "precomp"
    keras.utils.set_random_seed(0)
    assert run_cli(images, text, out, "--splits", "test", "--backbone", "resnet152", "--weights", "none",
                   "--crops", "1") == 0
    keras.utils.set_random_seed(0)  # the same random weights
    extractor = feature_extractor.from_provenance(provenance.read(out), "ims")
    contents = tf.constant([(images / NAMES[2]).read_bytes()])
    np.testing.assert_allclose(extractor.encode_bytes(contents).numpy(), readers.load_precomp(out, "test").images,
                               rtol=1e-4, atol=1e-5)
    # What it cannot rebuild: per-stage features it did not make, a remote
    # TF Hub module (the network at every export), other feature kinds.
    assert feature_extractor.from_provenance(provenance.read(out), "stages") is None
    remote = provenance.describe("tfhub:https://tfhub.dev/google/x/feature_vector/2", "imagenet", 10, stages=False)
    assert feature_extractor.from_provenance(remote, "ims") is None
    assert feature_extractor.from_provenance(provenance.read(out), "audio") is None


@pytest.mark.parametrize("contents", [b"junk", None])
def test_a_wrong_efficientnet_lite0_weights_file_is_one_line(release, tmp_path, capsys, recwarn, contents):
    images, text = release
    weights = tmp_path / "other.weights.h5"
    if contents is None:  # a Keras weights file of another network
        keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save_weights(weights)
    else:
        weights.write_bytes(contents)
    argv = ["--splits", "test", "--backbone", "efficientnet-lite0", "--weights", str(weights)]
    recwarn.clear()
    assert run_cli(images, text, tmp_path / "o", *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --weights {weights}: not a weights file of efficientnet-lite0 (") and err.count("\n") == 1
    # Nor does Keras' warning for each layer the file leaves unfilled (98 of
    # them, "Affected layers will retain their freshly-initialized weights")
    # come before that line.
    assert [str(w.message) for w in recwarn if issubclass(w.category, UserWarning)] == []
