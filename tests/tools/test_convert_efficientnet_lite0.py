"""Tests of `tools.convert_efficientnet_lite0` without PyTorch: a PyTorch
state dict of EfficientNet-Lite0 written here by hand from the shipped
Keras weights (PyTorch's layer names and [out, in, kh, kw] kernels, as
the module's docstring states them) converts back to exactly those
weights; a tensor left over or missing is an error; and the command
refuses to run without Keras' torch backend."""

import numpy as np
import pytest

from data import backbones, efficientnet_lite
from tools import convert_efficientnet_lite0 as convert


@pytest.fixture(scope="module")
def shipped():
    """{layer name: weights} of the shipped ImageNet weights."""
    model = efficientnet_lite.efficientnet_lite0(backbones.EFFICIENTNET_LITE0_WEIGHTS)
    return {layer.name: [np.asarray(w) for w in layer.get_weights()] for layer in model.layers if layer.weights}


def torch_names(keras_layer):
    """The PyTorch port's module of a Keras layer (efficientnet_lite_pytorch, lukemelas' names)."""
    fixed = {"stem_conv": "_conv_stem", "stem_bn": "_bn0", "head_conv": "_conv_head", "head_bn": "_bn1"}
    if keras_layer in fixed:
        return fixed[keras_layer]
    block, part = keras_layer.split("_", 1)
    module = {"expand_conv": "_expand_conv", "expand_bn": "_bn0", "depthwise_conv": "_depthwise_conv",
              "depthwise_bn": "_bn1", "project_conv": "_project_conv", "project_bn": "_bn2"}[part]
    return f"_blocks.{block.removeprefix('block')}.{module}"


def state_dict(shipped):
    """The PyTorch state dict of the shipped weights, with the classifier and
    the batch counters a checkpoint also holds."""
    state = {}
    for layer, weights in shipped.items():
        module = torch_names(layer)
        if layer.endswith("_bn"):
            for name, value in zip(("weight", "bias", "running_mean", "running_var"), weights):
                state[f"{module}.{name}"] = value
            state[f"{module}.num_batches_tracked"] = np.array(100)
        elif layer.endswith("depthwise_conv"):
            state[f"{module}.weight"] = weights[0].transpose(2, 3, 0, 1)  # [kh, kw, c, 1] -> [c, 1, kh, kw]
        else:
            state[f"{module}.weight"] = weights[0].transpose(3, 2, 0, 1)  # [kh, kw, in, out] -> [out, in, kh, kw]
    state["_fc.weight"] = np.zeros((1000, 1280), np.float32)
    state["_fc.bias"] = np.zeros(1000, np.float32)
    return state


def test_the_state_dict_of_the_shipped_weights_converts_back_to_them(shipped):
    # The stem and the head (a convolution and a batch norm each), 16 blocks of an expansion, a depthwise and a
    # projection convolution with a batch norm each, the first block without an expansion.
    assert len(shipped) == 2 + 2 + 15 * 6 + 4
    model = convert.convert(state_dict(shipped))
    for layer in model.layers:
        for ours, theirs in zip(layer.get_weights(), shipped.get(layer.name, [])):
            np.testing.assert_array_equal(ours, theirs, err_msg=layer.name)
    assert sum(len(layer.weights) for layer in model.layers) == sum(len(w) for w in shipped.values())


def test_a_tensor_without_a_keras_layer_is_an_error(shipped):
    state = state_dict(shipped)
    state["_blocks.16._project_conv.weight"] = np.zeros((1, 1, 1, 1), np.float32)
    with pytest.raises(ValueError, match=r"tensors of the checkpoint without a Keras layer: "
                                         r"\['_blocks.16._project_conv.weight'\]"):
        convert.keras_weights(state)


def test_a_missing_tensor_is_an_error(shipped):
    state = state_dict(shipped)
    del state["_blocks.3._bn1.running_var"]
    with pytest.raises(KeyError, match="_blocks.3._bn1.running_var"):
        convert.keras_weights(state)


def test_the_command_needs_the_torch_backend(capsys, tmp_path):
    assert convert.main(["--out", str(tmp_path / "w.weights.h5")]) == 2
    assert capsys.readouterr().err == "error: run with KERAS_BACKEND=torch (PyTorch reads the checkpoint)\n"
    assert not (tmp_path / "w.weights.h5").exists()
