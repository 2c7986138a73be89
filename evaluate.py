"""Evaluates a trained model or an exported SavedModel on a data split.

    python evaluate.py --model-dir DIR [--split test] [--protocol full]
    python evaluate.py --saved-model DIR/saved_model [--data DIR]
    python evaluate.py --model-dir DIR --set model.similarity=dot   # an evaluation-time ablation

Both paths run the same protocol (`engine.evaluation`): encode every image
and every caption once, then score every pair once, block by block, and
rank in both directions.

`--json FILE` also writes the metrics as a record (`common.records`: the
command, date, cores, CPU and load, and the metrics as its one report)
that `python -m tools.report` renders.

Protocols:
  full     the whole split (Flickr8k/30k's 1K test; COCO's 5K test).
  5fold1k  COCO's 1K protocol: the split cut into folds of 1000 images,
           metrics averaged over the folds.
"""

import argparse
import sys

from common import records
from common.errors import ArgumentParser, InputError, count, run_command
from data import provenance
from engine import evaluation, projector
from engine.arguments import add_model_and_split_arguments, data_root, load_model_and_split


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_and_split_arguments(parser)
    parser.add_argument("--protocol", default="full", choices=evaluation.PROTOCOLS)
    parser.add_argument("--batch-size", type=count, default=256)
    parser.add_argument("--json", help="also write the metrics to this JSON file, with the command, date and machine "
                        "(a record `python -m tools.report` renders)")
    parser.add_argument("--projector", metavar="DIR",
                        help="also write the split's image and caption encodings for TensorBoard's projector "
                        "(tensorboard --logdir DIR); a new or empty directory, or one written by --projector")
    parser.add_argument("--images", metavar="DIR",
                        help="with --projector: a folder of the split's images, for a sprite (an image id names its file, "
                        "which may be in a sub-folder; an id without an extension matches .jpg, .jpeg, .png, ...); "
                        "images it lacks get grey tiles")
    parser.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE",
                        help="with --model-dir: change a model setting that needs no retraining, "
                        "e.g. model.similarity=dot (repeatable)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    args.command = records.command_line("evaluate.py", argv, option="--json")
    return run_command(_run, args)


def _run(args):
    if args.images and not args.projector:
        raise InputError("--images is for the --projector sprite; add --projector DIR")
    recording = records.Recording(args.json, args.command, option="--json")
    if args.projector:
        projector.check_directory(args.projector)
    scorer, split = load_model_and_split(args, args.set)
    projector_dir = args.projector
    if projector_dir and not scorer.joint_space:
        print("--projector skipped: the model scores image-caption pairs with a joint network, so its image "
              "and caption encodings are not one space", file=sys.stderr)
        projector_dir = None
    image_files = None
    if projector_dir and args.images:
        image_files = projector.find_sprite_images(args.images, split, args.split or scorer.test_split)
    encodings = evaluation.encode_split(scorer, split, args.batch_size)
    result = evaluation.evaluate(scorer, split, args.protocol, args.batch_size, encodings)
    print(f"{args.split or scorer.test_split} split, protocol {args.protocol}:")
    print(evaluation.format_table(result))
    recording.write([result])
    # Said once the evaluation is done: an error before it stays the command's one line.
    notice = provenance.missing_notice(scorer.image_features.provenance, scorer.recorded_in, data_root(args, scorer))
    if notice:
        print(notice, file=sys.stderr)
    if projector_dir:
        projector.write_projector(projector_dir, *encodings, split, image_files)
        print(f"projector: tensorboard --logdir {projector_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
