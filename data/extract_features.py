"""Extracts CNN image features into the VSE++ precomp layout.

    python -m data.extract_features --images DIR --flickr-text DIR --out DIR
    python -m data.extract_features --images DIR --karpathy dataset_coco.json --out DIR
        [--splits train,dev,test] [--backbone resnet152|vgg16|vgg19|efficientnet-lite0|tfhub:HANDLE]
        [--crops 10|2|1]
        [--weights imagenet|none|PATH] [--batch-size 16] [--stages]

The captions and the split of each image come from the Flickr8k text release
(`--flickr-text`) or from Karpathy's JSON (`--karpathy`; Flickr8k, Flickr30k
or COCO, whose file names include `train2014/` or `val2014/`); image files are
looked up relative to `--images`. Each split is written to `--out` as
`{split}_ims.npy` (one float32 row per image), `{split}_caps.txt` and
`{split}_ids.txt`, which `train.py --data` reads, and `provenance.json`,
how the features were made (`data.provenance`): training records it, the
evaluation checks it and the export rebuilds the backbone from it.

Features, as in the papers: ResNet-152's global average pool (2048-d) or
VGG's fc7, the `fc2` layer (4096-d), with each backbone's own ImageNet
preprocessing. With 10 crops (the default, the papers' protocol) each image
is resized to 256x256 and the features of the 224x224 crops at its four
corners and centre, and of their horizontal mirrors, are averaged; with 1
crop the whole image is resized to 224x224; with 2, the 224x224 image and
its horizontal mirror. The aspect ratio is not kept. JPEGs are decoded with
libjpeg's accurate integer DCT, as PIL decodes them.

`--backbone efficientnet-lite0` is the CNN of the embedded Flickr8k
features (`data/efficientnet_lite0/`: its ImageNet weights, converted from
PyTorch): by default the image and its mirror, scaled as (x - 127) / 128,
the global average of its 1280-d head, so the features are the ones the
embedded models read; with `--stages`, the spatial means of its 18 stages
as the embedded `{split}_stages.npy`.

`--backbone tfhub:HANDLE` runs a TensorFlow Hub image feature-vector
module instead: a tfhub.dev / Kaggle Models handle (downloaded by
`tensorflow_hub` into $TFHUB_CACHE_DIR) or the path of a module directory
(a TF2 SavedModel, or a TF1 Hub module with an "image_feature_vector" or
"default" signature). As the Hub convention for such modules, it reads RGB
scaled to [0, 1] and returns [B, F] features; the crops are the same 224x224
views as above. The module is probed once on a blank image before any image
is read: a module whose signature fixes its input size (e.g. 299x299 for
Inception) gets each 224x224 crop resized to that size (bilinear,
antialiased); a module that does not return [B, F] vectors (feature maps
[B, H, W, C], say) is refused in one line naming its output shape.

With `--stages` (VGG backbones; EfficientNet-Lite0 above) the raw material of a Full-Network Embedding
(Garcia-Gasulla et al. 2018; Vilalta et al. 2018, Sec. 3.1) is written too:
`{split}_stages.npy`, the spatial average of every convolutional layer's
output and the fully connected fc1 and fc2 outputs, concatenated (VGG16:
13 convolutions + 2 FC layers = 12,416 values), averaged over the crops,
and `stages.json`, the layers and their sizes in that order. `train.py
--image-features fne` standardises and discretises them in the model.

Keras downloads the ImageNet weights on first use into ~/.keras/models/
($KERAS_HOME/models/ if set); offline, put the file named in the error
message there, or pass its path as --weights PATH.
"""

import argparse
import json
import logging
import sys
from pathlib import Path

from common import files
from common.errors import ArgumentParser, InputError, run_command
from data import provenance, readers
from data.image_features import EVERY_LAYER

log = logging.getLogger("extract_features")


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", required=True, help="folder of the image files")
    parser.add_argument("--out", required=True, help="output folder (precomp layout)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--flickr-text", help="folder of the Flickr8k text release (Flickr8k.token.txt + split files)")
    source.add_argument("--karpathy", help="Karpathy's dataset_{flickr8k,flickr30k,coco}.json")
    parser.add_argument("--splits", default="train,dev,test", help="comma-separated splits to extract")
    parser.add_argument("--backbone", default="resnet152",
                        help="resnet152, vgg16, vgg19, efficientnet-lite0 (the CNN of the embedded features), "
                        "or tfhub:HANDLE_OR_PATH (default: %(default)s)")
    parser.add_argument("--crops", type=int, choices=(1, 2, 10),
                        help="views averaged: 10, the papers' 10 crops (the default); 2, the image and its mirror "
                        "(the default of efficientnet-lite0, as the embedded features); 1, the image")
    parser.add_argument("--weights", default="imagenet", help="imagenet, none (random, for tests) or a weights file")
    parser.add_argument("--batch-size", type=_positive_int, default=16, help="images per forward pass")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    parser.add_argument("--stages", action="store_true",
                        help="also write every layer's features ({split}_stages.npy, stages.json) for the Full-Network "
                        "Embedding (efficientnet-lite0, vgg16, vgg19)")
    return parser.parse_args(argv)


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    # Imported here: TensorFlow loads after the command's quiet start.
    from data import backbones
    from data.feature_extractor import FeatureExtractor
    from data.full_network import full_network

    backbones.check_backbone_name(args.backbone)
    images = Path(args.images)
    if not images.is_dir():
        raise InputError(f"--images {images}: folder not found")
    files.check_output_dir(args.out, "--out")
    # Every split is checked before the (slow) network is built.
    splits = {}
    for split in args.splits.split(","):
        if args.flickr_text:
            data = readers.read_flickr_text(args.flickr_text, split)
        else:
            data = readers.read_karpathy_json(args.karpathy, split)
        if not data.image_files:
            raise InputError(f"{args.flickr_text or args.karpathy}: split {split} has no images")
        missing = next((name for name in data.image_files if not (images / name).is_file()), None)
        if missing is not None:
            raise InputError(f"{images / missing}: image of split {split} not found")
        splits[split] = data
    if args.stages and args.backbone not in ("vgg16", "vgg19", backbones.EFFICIENTNET_LITE0):
        raise InputError(f"--stages needs a backbone with stages: --backbone {backbones.EFFICIENTNET_LITE0}, "
                         "vgg16 or vgg19")
    crops = args.crops or (backbones.EFFICIENTNET_LITE0_CROPS if args.backbone == backbones.EFFICIENTNET_LITE0
                           else backbones.DEFAULT_CROPS)
    layout = None
    if args.stages:
        # The usual features ({split}_ims.npy) are a slice of every stage's.
        model, preprocess, layout, feature_slice = full_network(args.backbone, args.weights)
    else:
        model, preprocess = backbones.build_backbone(args.backbone, args.weights)
    extract = FeatureExtractor(model, preprocess, crops)
    for split, data in splits.items():
        log.info("%s: %d images, %s, %d crop(s)", split, len(data.image_files), args.backbone, crops)
        paths = [images / name for name in data.image_files]
        features = extract(paths, args.batch_size)
        if layout is not None:
            readers.write_image_features(args.out, split, EVERY_LAYER, features, data.image_files)
            features = features[:, feature_slice]
        readers.write_precomp(args.out, split, features, data)
        log.info("%s: wrote %s features to %s", split, features.shape, args.out)
    if layout is not None:
        text = json.dumps({"backbone": f"{args.backbone} ({args.weights})", "layers": layout}, indent=1)
        files.atomic_write(Path(args.out) / "stages.json", lambda f: f.write(text.encode("utf-8")))
    provenance.write(args.out, provenance.describe(args.backbone, args.weights, crops, args.stages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
