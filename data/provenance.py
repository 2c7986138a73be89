"""How a folder's image features were made: `provenance.json` beside the arrays.

`python -m data.extract_features` writes it (`describe`); the embedded
`data/f8k_precomp/` has the one of its EfficientNet-Lite0 features. Its
keys:

- `backbone`: "efficientnet-lite0", a key of `data.backbones.BACKBONES`
  (resnet152, vgg16, vgg19) or "tfhub:" and a module's handle or path;
- `weights`: "imagenet", "none" (random) or the weights file given;
- `crops`: the views averaged: 1 (the image), 2 (the image and its
  horizontal mirror) or 10 (the corners, centre and their mirrors);
- `input`: the decoding, resizing, colour and scaling of the views;
- `ims`: the layer of `{split}_ims.npy`; `stages`: what `{split}_stages.npy`
  holds (only where it was written);
- `made` (optional): a note on where and how they were made.

Training copies the training folder's provenance into the run's
config.json (`ExperimentConfig.image_provenance`); evaluation refuses a
folder whose provenance differs from the run's (`check_same`), and the
export rebuilds the backbone from it to take encoded images.
"""

import json
from pathlib import Path

from common.errors import InputError
from common.files import read_text, write_json_atomically
from data.image_features import EVERY_LAYER, ONE_LAYER

FILE = "provenance.json"

# The parts of each backbone's recipe that are not choices of the command.
_SCALING = {
    "efficientnet-lite0": "(x - 127) / 128",
    "resnet152": "keras.applications.resnet.preprocess_input (BGR, ImageNet means subtracted)",
    "vgg16": "keras.applications.vgg16.preprocess_input (BGR, ImageNet means subtracted)",
    "vgg19": "keras.applications.vgg19.preprocess_input (BGR, ImageNet means subtracted)",
}
_IMS_LAYER = {
    "efficientnet-lite0": "global average of the head (1280)",
    "resnet152": "avg_pool (2048)",
    "vgg16": "fc2 (4096)",
    "vgg19": "fc2 (4096)",
}
_VIEWS = {
    1: "the image resized to 224x224",
    2: "the image resized to 224x224 and its horizontal mirror, averaged",
    10: "the image resized to 256x256, its four corner and centre 224x224 crops and their mirrors, averaged",
}


def describe(backbone, weights, crops, stages):
    """The provenance of features made by `data.feature_extractor` with these
    settings (`stages`: whether per-stage features were written too)."""
    hub = backbone.startswith("tfhub:")
    provenance = {
        "backbone": backbone,
        "weights": weights,
        "crops": crops,
        "input": {
            "decoding": "RGB; JPEG by libjpeg's accurate integer DCT (as PIL)",
            "resizing": "bilinear, antialiased, aspect ratio not kept",
            "views": _VIEWS[crops],
            "scaling": "x / 255 (the TF Hub convention)" if hub else _SCALING[backbone],
        },
        ONE_LAYER: "the module's feature vector" if hub else _IMS_LAYER[backbone],
    }
    if stages:
        provenance[EVERY_LAYER] = "spatial mean of every layer listed in stages.json, concatenated in that order"
    return provenance


def read(folder):
    """The provenance recorded in `folder`, or None where it has none."""
    path = Path(folder) / FILE
    if not path.exists():
        return None
    try:
        provenance = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(provenance, dict) or not {"backbone", "weights", "crops"} <= set(provenance):
        raise InputError(f"{path}: not a feature provenance (needs backbone, weights and crops)")
    return provenance


def write(folder, provenance):
    write_json_atomically(Path(folder) / FILE, json.dumps(provenance, indent=1) + "\n")


# Keys that do not change the features: a folder with `stages` holds the
# same `ims` as one without; `made` is a note.
_NOT_COMPARED = (EVERY_LAYER, "made")


def same_features(a, b):
    """Whether two provenances describe the same features."""
    return ({k: v for k, v in a.items() if k not in _NOT_COMPARED}
            == {k: v for k, v in b.items() if k not in _NOT_COMPARED})


def check_same(recorded, recorded_in, folder):
    """Refuses a folder whose features were made otherwise than the ones
    a run recorded.

    Args:
      recorded: the run's provenance (None: a run from before provenance
        was recorded, which is not checked).
      recorded_in: the file it was read from, for messages.
      folder: the features folder about to be read; one without a
        provenance passes (see `missing_notice`).

    Raises:
      InputError: the folder's provenance differs from the run's.
    """
    found = read(folder) if recorded is not None else None
    if found is not None and not same_features(found, recorded):
        differences = ", ".join(f"{key} {found.get(key)!r} vs {recorded.get(key)!r}"
                                for key in sorted((set(found) | set(recorded)) - set(_NOT_COMPARED))
                                if found.get(key) != recorded.get(key))
        raise InputError(f"{Path(folder) / FILE}: these features were made differently from the ones the model "
                         f"was trained on, recorded in {recorded_in} ({differences})")


def missing_notice(recorded, recorded_in, folder):
    """The notice for a folder whose features `check_same` could not check
    (it records no provenance while the run does), else None."""
    if recorded is None or (Path(folder) / FILE).exists():
        return None
    return (f"notice: {Path(folder) / FILE} does not exist: the features cannot be checked against the "
            f"provenance recorded in {recorded_in} ({recorded['backbone']}, {recorded['weights']} weights)")
