"""The command-line arguments that choose a trained model and a split of
data, shared by `evaluate.py` and the tools that score with a model."""

from pathlib import Path

from common.errors import InputError
from data import provenance, splits
from data.embedded import EMBEDDED_DATA
from data.image_features import KINDS, option_kind
from engine import model_dirs
from models.experiments import load_run


def add_model_and_split_arguments(parser):
    """The arguments that choose a trained model and a split of data (see
    `load_model_and_split`)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="a directory written by train.py (uses its best checkpoint)")
    source.add_argument("--saved-model", help="a SavedModel exported by train.py")
    parser.add_argument("--data", help="precomp data folder (default: the model's training data, else the embedded Flickr8k)")
    parser.add_argument("--image-features", metavar="KIND",
                        help="the kind of image features the model reads, as train.py's: "
                        f"{' or '.join(f'{kind} ({{split}}_{stem}.npy)' for kind, stem in KINDS.items())}, "
                        f"{'+'.join(KINDS)} for an ensemble of both (default: the model's)")
    parser.add_argument("--split", help="the split to use (default: the model's test split, else 'test')")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (there are none when stderr is not a terminal)")
    parser.add_argument("--verbose", action="store_true", help="keep TensorFlow's start-up lines (hidden by default)")


def load_model_and_split(args, overrides=()):
    """(scorer, split) of the arguments of `add_model_and_split_arguments`;
    `overrides` are `--set` model settings (a model directory only).
    Features made otherwise than the model's training features (their
    provenance.json, `data.provenance`) are refused."""
    # What can be checked before TensorFlow loads, first.
    chosen = option_kind(args.image_features) if args.image_features else None
    if args.model_dir:
        model_dirs.check_run(args.model_dir, "--model-dir")
    elif overrides:
        raise InputError("--set needs --model-dir: a SavedModel's settings are fixed")
    else:
        check_saved_model(args.saved_model)
    if args.data and not Path(args.data).is_dir():
        raise InputError(f"--data {args.data}: no such folder")
    if args.model_dir:
        load_run(args.model_dir, overrides)  # the run's config.json and the --set values, checked
    from engine import scoring  # Imported here: it loads TensorFlow.

    if args.model_dir:
        scorer = scoring.CheckpointScorer.from_model_dir(args.model_dir, overrides)
    else:
        scorer = scoring.SavedModelScorer(args.saved_model)
    root = data_root(args, scorer)
    provenance.check_same(scorer.image_features.provenance, scorer.recorded_in, root)
    image_features = chosen or scorer.image_features.kind
    split_name = args.split or scorer.test_split
    split = splits.load_split(root, split_name, image_features)
    splits.check_image_dim(split, scorer.image_features.width,
                           splits.features_location(root, split_name, image_features))
    return scorer, split


def check_saved_model(path):
    """Fails, before TensorFlow loads, unless the folder `path` holds a
    SavedModel's graph; the rest is for `engine.scoring.SavedModelScorer`."""
    if not any((Path(path) / name).is_file() for name in ("saved_model.pb", "saved_model.pbtxt")):
        raise InputError(f"{path}: not a readable SavedModel (no saved_model.pb in that folder)")


def data_root(args, scorer):
    """The data folder the arguments choose: --data, else the model's training data, else the embedded Flickr8k."""
    return args.data or scorer.data_path or EMBEDDED_DATA
