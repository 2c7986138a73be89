import shutil

import numpy as np
import pytest
import tensorflow as tf

from data import extract_features, readers
from tests.helpers import SHARED_DATA

IMAGES = sorted((SHARED_DATA / "flickr8k_images_test").glob("*.jpg"))[:3]


@pytest.fixture
def release(tmp_path):
    """Three real test JPEGs and a tiny Flickr8k-style text release."""
    images, text = tmp_path / "images", tmp_path / "text"
    images.mkdir(), text.mkdir()
    for image in IMAGES:
        shutil.copy(image, images)
    names = [image.name for image in IMAGES]
    tokens = [f"{name}#{k}\tcaption {k} of {name} ." for name in names for k in range(5)]
    (text / "Flickr8k.token.txt").write_text("\n".join(tokens) + "\n")
    (text / "Flickr_8k.trainImages.txt").write_text("\n".join(names[:2]) + "\n")
    (text / "Flickr_8k.testImages.txt").write_text(names[2] + "\n")
    return images, text


def test_ten_crops_are_the_corners_centre_and_their_mirrors():
    image = tf.reshape(tf.range(256 * 256 * 3, dtype=tf.float32), (256, 256, 3))
    crops = extract_features.crops(image, 10)
    assert crops.shape == (10, 224, 224, 3)
    for index, (y, x) in enumerate([(0, 0), (0, 32), (32, 0), (32, 32), (16, 16)]):
        np.testing.assert_array_equal(crops[index], image[y:y + 224, x:x + 224])
        np.testing.assert_array_equal(crops[index + 5], image[y:y + 224, x:x + 224][:, ::-1])
    assert extract_features.crops(image, 1).shape == (1, 224, 224, 3)


def test_resnet152_features_written_in_precomp_layout(release, tmp_path):
    images, text = release
    out = tmp_path / "precomp"
    assert extract_features.main(["--images", str(images), "--flickr-text", str(text), "--out", str(out),
                                  "--splits", "train,test", "--weights", "none", "--crops", "1"]) == 0
    train = readers.load_precomp(out, "train")
    assert train.images.shape == (2, 2048) and np.all(np.isfinite(train.images))
    assert train.image_ids == [IMAGES[0].name, IMAGES[1].name] and len(train.captions) == 10
    assert readers.load_precomp(out, "test").images.shape == (1, 2048)


def test_ten_crop_average_of_vgg16_fc7(release, tmp_path):
    images, text = release
    model, preprocess = extract_features.build_extractor("vgg16", "none")
    paths = [images / IMAGES[2].name]
    features = extract_features.extract(model, preprocess, paths, 10, batch_size=1)
    assert features.shape == (1, 4096)
    crops = extract_features.crops(extract_features.read_image(paths[0]), 10)
    expected = np.asarray(model.predict_on_batch(preprocess(crops.numpy()))).mean(axis=0)
    np.testing.assert_allclose(features[0], expected, rtol=1e-4, atol=1e-5)


def test_offline_imagenet_weights_give_a_one_line_message(release, tmp_path, capsys, monkeypatch):
    def no_network(*args, **kwargs):
        raise Exception("URL fetch failure on https://example/weights.h5: None -- no network")

    monkeypatch.setattr("keras.src.applications.resnet.file_utils.get_file", no_network)
    images, text = release
    code = extract_features.main(["--images", str(images), "--flickr-text", str(text), "--out", str(tmp_path / "o"),
                                  "--splits", "test"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "resnet152_weights_tf_dim_ordering_tf_kernels_notop.h5" in err and "--weights PATH" in err


def test_corrupt_or_missing_images_are_one_line_errors(release, tmp_path, capsys):
    images, text = release
    (images / IMAGES[2].name).write_bytes(b"not a jpeg")
    argv = ["--images", str(images), "--flickr-text", str(text), "--out", str(tmp_path / "o"),
            "--splits", "test", "--weights", "none", "--crops", "1"]
    assert extract_features.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert IMAGES[2].name in err and "unreadable image" in err and len(err.splitlines()) == 1
    (images / IMAGES[2].name).unlink()
    assert extract_features.main(argv) == 2
    assert "is missing" in capsys.readouterr().err
