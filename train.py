"""Trains a model of the zoo, evaluates it and exports it as a SavedModel.

    python train.py --model gru --preset quick            # into runs/gru-quick
    python train.py --model gru --set train.epochs=2 --set model.embed_dim=512 --model-dir runs/gru-small
    python train.py --model-dir runs/gru-quick --resume
    python train.py --model-dir runs/gru-quick --export-only [--serving-version 1] [--provenance FEATURES_DIR]

Models and their presets: `python train.py --list`.
"""

import argparse
import shlex
import sys
from pathlib import Path

from common import records
from common.config import STRATEGIES, apply_overrides, check_override
from common.errors import ArgumentParser, InputError, count, run_command
from data.image_features import option_kind
from engine import model_dirs
from models import registry
from models.experiments import load_run


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="registered model name (see --list)")
    parser.add_argument("--preset", default="paper", help="'paper' (the paper's settings) or a smaller preset such as 'quick'")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. train.epochs=2 (repeatable)")
    parser.add_argument("--data", help="precomp data folder (default: the embedded Flickr8k features)")
    parser.add_argument("--image-features", metavar="KIND",
                        help="fc (default): one CNN layer's features ({split}_ims.npy), or another kind the model "
                        "declares (see --list), e.g. every layer's features through a Full-Network Embedding")
    parser.add_argument("--model-dir", help="where checkpoints, logs, results and the export go (default: "
                        "runs/<model>-<preset>, e.g. runs/gru-paper); a new or empty folder, or a run to --resume")
    parser.add_argument("--resume", action="store_true", help="continue the run in --model-dir from its last checkpoint")
    parser.add_argument("--export-only", action="store_true", help="only export --model-dir's best checkpoint as a SavedModel")
    parser.add_argument("--serving-version", type=count, metavar="N",
                        help="with --export-only: write the SavedModel into saved_model/N/, as TF Serving loads versions")
    parser.add_argument("--provenance", metavar="FEATURES_DIR",
                        help="with --export-only: the features folder whose provenance.json says how the run's "
                        "features were made, for a run trained before runs recorded it; the export then also "
                        "takes encoded images (encode_image_bytes, score_images)")
    parser.add_argument("--strategy", help="auto (default), default, mirrored or multiworker (tf.distribute): "
                        "runtime.strategy, recorded in config.json; --resume uses the recorded one unless given")
    parser.add_argument("--list", action="store_true", help="list the registered models and presets")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars (there are none when stderr is not a terminal); log lines remain")
    parser.add_argument("--verbose", action="store_true",
                        help="keep TensorFlow's start-up lines and gensim's INFO lines (hidden by default)")
    return parser.parse_args(argv)


def main(argv=None, evaluate_test=True, export=True):
    """The command line; from Python, `evaluate_test=False` and
    `export=False` leave the training's last steps out (for a caller that
    needs the checkpoint only: no results.json, no SavedModel)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.command = shlex.join(["python", "train.py", *records.portable_arguments(argv)])
    args.finish = {"evaluate_test": evaluate_test, "export": export}
    return run_command(_run, args)


def _run(args):
    _check(args)
    if args.list:
        for name in registry.names():
            spec = registry.get(name)
            features = f"; image features fc, {', '.join(spec.image_features)}" if spec.image_features else ""
            print(f"{name}: presets {', '.join({'paper': None, **spec.presets})}{features}")
        return 0
    if args.export_only:
        return _export_only(args.model_dir, args.serving_version, args.provenance)

    config, parts, model_dir = _experiment(args)
    # TensorFlow loads only once the arguments are known to be usable.
    from engine import training
    from engine.evaluation import format_table

    results = training.Trainer(config, model_dir, resume=args.resume, command=args.command,
                               parts=parts).run(**args.finish)
    if results is not None:
        print(f"best checkpoint: {Path(model_dir) / results.checkpoint}")
        print("dev:\n" + format_table(results.dev))
        print("test:\n" + format_table(results.test))
    if args.finish["export"]:
        print(f"SavedModel: {model_dir}/{training.SAVED_MODEL_DIR}")
    return 0


def _check(args):
    """What can be checked before TensorFlow loads: the flags' combinations,
    the model's name, the --set syntax, the strategy's name and that the
    named folders exist."""
    if args.list:
        return
    if args.export_only or args.resume:
        if not args.model_dir:
            raise InputError("--export-only and --resume need --model-dir")
        if args.model or args.set or args.data or args.image_features:
            raise InputError("--resume/--export-only take the configuration from --model-dir/config.json; "
                             "drop --model, --set, --data and --image-features")
        model_dirs.check_run(args.model_dir, "--resume" if args.resume else "--export-only")
    elif not args.model:
        raise InputError("--model is required (see --list)")
    else:
        registry.check_name(args.model)
    if (args.serving_version or args.provenance) and not args.export_only:
        raise InputError("--serving-version and --provenance apply to --export-only")
    for item in args.set:
        check_override(item)
    # Checked here, not as the runtime.strategy override it becomes: the user typed --strategy.
    if args.strategy is not None and args.strategy not in STRATEGIES:
        raise InputError(f"--strategy {args.strategy!r}: choose one of {', '.join(STRATEGIES)}")
    for flag, folder in (("--data", args.data), ("--provenance", args.provenance)):
        if folder is not None and not Path(folder).is_dir():
            raise InputError(f"{flag} {folder}: no such folder")


def _experiment(args):
    """The run's experiment config, a composite model's trained runs and
    the model directory, made before TensorFlow loads: the preset and every
    `--set` value are checked as the config is made (a model family's
    settings import no TensorFlow, `models.registry`), a composite model's
    member runs as they are read, once (`ModelSpec.parts`, None for other
    models), and a new run's config is completed from them
    (`ModelSpec.prepare`) and its directory checked against it."""
    strategy = [f"runtime.strategy={args.strategy}"] if args.strategy else []
    if args.resume:
        config = apply_overrides(load_run(args.model_dir).experiment, strategy)
        spec = registry.get(config.model_name)
    else:
        overrides = [*args.set, *([f"data.path={args.data}"] if args.data else []), *strategy]
        spec = registry.get(args.model)
        config = spec.experiment(args.preset, overrides, option_kind(args.image_features) if args.image_features else "fc")
    parts = spec.parts(config.model) if spec.parts else None
    if not args.resume and spec.prepare:
        config = spec.prepare(config, parts)
    model_dir = args.model_dir or model_dirs.default(config.model_name, config.preset)
    # A worker of a cluster may find the directory its chief has begun: the trainer checks on the chief.
    if not args.resume and config.runtime.strategy != "multiworker":
        model_dirs.check_new(model_dir, config)
    return config, parts, model_dir


def _export_only(model_dir, version=None, features_dir=None):
    import dataclasses
    import logging

    from data import provenance
    from engine import training
    from engine.export import IMAGE_SIGNATURES, export_saved_model
    from models.restore import restore_model

    _, model = restore_model(model_dir)
    recorded = model.image_features.provenance
    if features_dir is not None:
        given = provenance.read(features_dir)
        if given is None:
            raise InputError(f"--provenance {features_dir}: no {provenance.FILE} there")
        if recorded is not None and not provenance.same_features(given, recorded):
            raise InputError(f"{Path(features_dir) / provenance.FILE}: differs from the provenance recorded in "
                             f"{Path(model_dir) / 'config.json'}")
        recorded = given
        model.image_features = dataclasses.replace(model.image_features, provenance=given)
    path = Path(model_dir) / training.SAVED_MODEL_DIR
    path = export_saved_model(model, path / str(version) if version else path)
    print(f"SavedModel: {path}")
    if recorded is None:
        logging.getLogger("train").warning(
            "%s records no feature provenance, so the export takes image features only; --provenance FEATURES_DIR "
            "adds %s", Path(model_dir) / "config.json", " and ".join(IMAGE_SIGNATURES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
