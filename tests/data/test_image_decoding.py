"""Tests of `data.image_decoding`: decoding (JPEG as PIL decodes it, other
formats by TensorFlow), resizing, and the views whose features are
averaged (the image, its mirror, the papers' 10 crops)."""

import io

import numpy as np
import pytest
import tensorflow as tf

from data import image_decoding
from tests.helpers import EMBEDDED_IMAGES


def test_ten_crops_are_the_corners_centre_and_their_mirrors():
    image = np.arange(5 * 6, dtype=np.float32).reshape(1, 5, 6, 1)
    crops = image_decoding.ten_crops(tf.constant(image), 3).numpy()
    assert crops.shape == (1, 10, 3, 3, 1)
    # 5 rows x 6 columns, 3x3 crops: the centre crop starts at row 1, column 1.
    for index, (y, x) in enumerate([(0, 0), (0, 3), (2, 0), (2, 3), (1, 1)]):
        crop = image[0, y : y + 3, x : x + 3]
        np.testing.assert_array_equal(crops[0, index], crop)
        np.testing.assert_array_equal(crops[0, index + 5], crop[:, ::-1])
    # The papers' sizes: 224x224 crops of a 256x256 image, centre offset 16.
    big = tf.reshape(tf.range(256 * 256, dtype=tf.float32), (1, 256, 256, 1))
    np.testing.assert_array_equal(image_decoding.ten_crops(big, 224)[0, 4], big[0, 16:240, 16:240])


def test_two_views_are_the_image_and_its_mirror():
    image = np.arange(2 * 3 * 4 * 1, dtype=np.float32).reshape(2, 3, 4, 1)
    views = image_decoding.views(tf.constant(image), 2).numpy()
    assert views.shape == (2, 2, 3, 4, 1)
    np.testing.assert_array_equal(views[:, 0], image)
    np.testing.assert_array_equal(views[:, 1], image[:, :, ::-1])


def test_one_view_is_the_image_and_ten_are_the_ten_crops():
    images = np.random.default_rng(0).uniform(0, 255, (2, 256, 256, 3)).astype(np.float32)
    np.testing.assert_array_equal(image_decoding.views(tf.constant(images[:, :224, :224]), 1).numpy(),
                                  images[:, None, :224, :224])
    ten = image_decoding.views(tf.constant(images), 10).numpy()
    assert ten.shape == (2, 10, 224, 224, 3)
    np.testing.assert_array_equal(ten[:, 1], images[:, :224, 32:])  # top right
    np.testing.assert_array_equal(ten[:, 7], images[:, 32:, :224, :][:, :, ::-1])  # bottom left, mirrored


def test_jpegs_are_decoded_as_pil_decodes_them():
    from PIL import Image

    for path in sorted(EMBEDDED_IMAGES.glob("*.jpg")):
        ours = image_decoding.decode_image(tf.io.read_file(str(path)), 224).numpy()
        np.testing.assert_allclose(ours, np.asarray(Image.open(path).convert("RGB"), np.float32), atol=1e-3)


def _png(pixels, mode):
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels.squeeze(), mode).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
def test_a_png_is_decoded_as_rgb_and_resized_as_pil_resizes(tmp_path, mode):
    from PIL import Image

    channels = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
    rng = np.random.default_rng(1)
    square = rng.integers(0, 256, size=(8, 8, channels), dtype=np.uint8)
    path = tmp_path / "image.png"
    path.write_bytes(_png(square, mode))
    decoded = image_decoding.load_image(str(path), 8).numpy()
    assert decoded.dtype == np.float32 and decoded.shape == (8, 8, 3)
    rgb = np.asarray(Image.fromarray(square.squeeze(), mode).convert("RGB"), np.float32)
    np.testing.assert_allclose(decoded, rgb, atol=1e-3)
    # 16 x 12 to 6 x 6, the aspect ratio not kept: PIL's antialiased bilinear resize (rounded to integers; a
    # plain bilinear resize, sampling without antialiasing, is up to 75 away).
    oblong = rng.integers(0, 256, size=(16, 12, channels), dtype=np.uint8)
    resized = image_decoding.decode_image(tf.constant(_png(oblong, mode)), 6).numpy()
    expected = Image.fromarray(oblong.squeeze(), mode).convert("RGB").resize((6, 6), Image.BILINEAR)
    np.testing.assert_allclose(resized, np.asarray(expected, np.float32), atol=1)


def test_bytes_that_are_no_image_fail_in_tensorflow():
    with pytest.raises(tf.errors.InvalidArgumentError):
        image_decoding.decode_image(tf.constant(b"not an image"), 224)
