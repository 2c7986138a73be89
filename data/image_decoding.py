"""Images as the backbones take them: an encoded image decoded and resized
(`decode_image`, `load_image`), and cut into the views whose features are
averaged (`views`: the image, the image and its mirror, or the papers' 10
crops, `ten_crops`).
"""

import tensorflow as tf

CROP = 224  # the side of a view, the backbones' input
RESIZE = 256  # the side of the image the 10 crops are cut from


def decode_image(contents, size):
    """Decodes one encoded image (JPEG, PNG, GIF or BMP bytes) as float32
    RGB [size, size, 3] in [0, 255] (graph-safe; a corrupt or non-image
    input fails with TensorFlow's InvalidArgumentError)."""
    # JPEGs by libjpeg's accurate integer DCT, as PIL decodes them (and as
    # the embedded features were made): TensorFlow's default fast DCT moves
    # EfficientNet-Lite0's features by 8%.
    image = tf.cond(
        tf.io.is_jpeg(contents),
        lambda: tf.io.decode_jpeg(contents, channels=3, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(contents, channels=3, expand_animations=False),
    )
    # Antialiasing keeps downscaled photos from aliasing, as PIL's resize does.
    return tf.image.resize(image, (size, size), antialias=True)


def load_image(path, size):
    """Reads an image file as float32 RGB [size, size, 3] in [0, 255] (graph-safe)."""
    return decode_image(tf.io.read_file(path), size)


def views(images, crops):
    """The views of each image whose features are averaged.

    Args:
      images: [B, H, W, C], resized to 224x224 (1 or 2 views) or 256x256
        (10 views).
      crops: 1 (the image), 2 (the image and its horizontal mirror) or 10
        (`ten_crops`).

    Returns:
      [B, crops, 224, 224, C].
    """
    if crops == 10:
        return ten_crops(images, CROP)
    if crops == 2:
        return tf.stack([images, tf.reverse(images, axis=[2])], axis=1)
    return images[:, None]


def ten_crops(images, size):
    """The papers' 10 views of each image.

    Args:
      images: [B, H, W, C].
      size: the side of the square crops.

    Returns:
      [B, 10, size, size, C]: the top-left, top-right, bottom-left,
      bottom-right and centre crops, then the same five mirrored left-right.
    """
    height, width = images.shape[1], images.shape[2]
    bottom, right = height - size, width - size
    offsets = [(0, 0), (0, right), (bottom, 0), (bottom, right), (bottom // 2, right // 2)]
    crops = [images[:, y : y + size, x : x + size] for y, x in offsets]
    crops += [tf.reverse(crop, axis=[2]) for crop in crops]
    return tf.stack(crops, axis=1)
