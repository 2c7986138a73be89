"""Trains a model of the zoo, evaluates it and exports it as a SavedModel.

    python train.py --model gru --preset quick --model-dir runs/gru
    python train.py --model gru --set train.epochs=2 --set model.embed_dim=512
    python train.py --model-dir runs/gru --resume
    python train.py --model-dir runs/gru --export-only

Models and their presets: `python train.py --list`.
"""

import argparse
import shlex
import sys

from data.errors import InputError, run_command


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="registered model name (see --list)")
    parser.add_argument("--preset", default="paper", help="'paper' (the paper's settings) or a smaller preset such as 'quick'")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. train.epochs=2 (repeatable)")
    parser.add_argument("--data", help="precomp data folder (default: the embedded Flickr8k features)")
    parser.add_argument("--image-features", choices=("fc", "fne"), default="fc",
                        help="fc: one CNN layer ({split}_ims.npy); fne: the Full-Network Embedding of every layer's "
                        "features ({split}_stages.npy), i.e. --set model.image_input=fne --set data.image_features=stages")
    parser.add_argument("--model-dir", help="where checkpoints, logs, results and the export go (default: runs/<model>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --model-dir from its last checkpoint")
    parser.add_argument("--export-only", action="store_true", help="only export --model-dir's best checkpoint as a SavedModel")
    parser.add_argument("--strategy", default="auto", help="auto, default, mirrored or multiworker (tf.distribute)")
    parser.add_argument("--list", action="store_true", help="list the registered models and presets")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars (there are none when stderr is not a terminal); log lines remain")
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.command = shlex.join(["python", "train.py", *argv])
    return run_command(_run, args)


def _run(args):
    # TensorFlow is imported only once the arguments are known to be usable.
    from models import registry

    if args.list:
        for name in registry.names():
            spec = registry.get(name)
            print(f"{name}: presets {', '.join({'paper': None, **spec.presets})}")
        return 0
    if args.export_only or args.resume:
        if not args.model_dir:
            raise InputError("--export-only and --resume need --model-dir")
        if args.model or args.set or args.data or args.image_features != "fc":
            raise InputError("--resume/--export-only take the configuration from --model-dir/config.json; drop --model, --set and --data")
    elif not args.model:
        raise InputError("--model is required (see --list)")
    if args.export_only:
        return _export_only(args.model_dir)

    import training
    from config import load_experiment

    if args.resume:
        config = load_experiment(args.model_dir, registry)
    else:
        spec = registry.get(args.model)
        overrides = [*args.set, *([f"data.path={args.data}"] if args.data else [])]
        if args.image_features == "fne":
            overrides = ["model.image_input=fne", "data.image_features=stages", *overrides]
        config = spec.experiment(args.preset, overrides)
    model_dir = args.model_dir or f"runs/{config.model_name}"
    strategy = training.make_strategy(args.strategy)
    results = training.Trainer(config, model_dir, strategy, resume=args.resume, command=args.command).run()

    import evaluate

    print(f"best checkpoint: {results['checkpoint']}")
    print("dev:\n" + evaluate.format_table(results["dev"]))
    print("test:\n" + evaluate.format_table(results["test"]))
    print(f"SavedModel: {model_dir}/{training.SAVED_MODEL_DIR}")
    return 0


def _export_only(model_dir):
    import inference
    import training
    from export import export_saved_model

    config, model = inference.restore_model(model_dir)
    path = export_saved_model(model, config.image_dim, f"{model_dir}/{training.SAVED_MODEL_DIR}")
    print(f"SavedModel: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
