"""The Full-Network Embedding's raw features of a backbone
(`full_network`): every stage's output spatially averaged, concatenated.
"""

import keras

from common.errors import InputError
from data import efficientnet_lite
from data.backbones import (
    BACKBONES,
    EFFICIENTNET_LITE0,
    build_backbone,
    efficientnet_lite_stages,
    scale_efficientnet_lite,
)


def full_network(name, weights="imagenet"):
    """The Full-Network Embedding's raw features of a backbone: every
    stage's output spatially averaged, concatenated.

    Args:
      name: "efficientnet-lite0" (the stem, the 16 blocks and the head, as
        the embedded `stages.json`) or a VGG key of `BACKBONES` (every
        convolution, then fc1 and fc2).
      weights: as `build_backbone`'s.

    Returns:
      (model, preprocess, layout, ims): the model maps preprocessed crops
      to [B, F], `preprocess` as `build_backbone`'s; layout is
      [{"name", "dim"}] per layer, in that order; `ims` is the slice of F
      that is the backbone's usual feature (`build_backbone`'s).
    """
    if name == EFFICIENTNET_LITE0:
        stages = efficientnet_lite_stages(weights)
        means = [keras.layers.GlobalAveragePooling2D(name=f"{stage}_mean")(output)
                 for stage, output in zip(efficientnet_lite.stage_names(), stages.output)]
        layout = [{"name": stage, "dim": int(output.shape[-1])}
                  for stage, output in zip(efficientnet_lite.stage_names(), stages.output)]
        head = layout[-1]["dim"]
        total = sum(entry["dim"] for entry in layout)
        model = keras.Model(stages.input, keras.layers.Concatenate()(means))
        return model, scale_efficientnet_lite, layout, slice(total - head, total)
    if name not in ("vgg16", "vgg19"):
        raise InputError(f"--stages needs a backbone with stages: {EFFICIENTNET_LITE0}, vgg16 or vgg19; got {name}")
    features_model, preprocess = build_backbone(name, weights)
    feature_layer = BACKBONES[name].feature_layer
    layers = [layer for layer in features_model.layers if isinstance(layer, keras.layers.Conv2D)]
    layers += [layer for layer in features_model.layers if layer.name in ("fc1", "fc2")]
    if not any(layer.name == feature_layer for layer in layers):
        raise InputError("--stages needs a VGG backbone (convolutions followed by fc1, fc2): --backbone vgg16 or vgg19")
    outputs = [
        keras.layers.GlobalAveragePooling2D(name=f"{layer.name}_mean")(layer.output)
        if len(layer.output.shape) == 4
        else layer.output
        for layer in layers
    ]
    model = keras.Model(features_model.input, keras.layers.Concatenate()(outputs))
    layout = [{"name": layer.name, "dim": int(layer.output.shape[-1])} for layer in layers]
    position = [entry["name"] for entry in layout].index(feature_layer)
    start = sum(entry["dim"] for entry in layout[:position])
    return model, preprocess, layout, slice(start, start + layout[position]["dim"])
