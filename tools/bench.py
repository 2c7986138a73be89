"""Benchmarks of any registered model, as JSON: training throughput, the
1K-test evaluation time, a SavedModel's caption encoding, and the data
checks of a run.

    python -m tools.bench --model gru --preset quick
    python -m tools.bench --model gru --preset paper --steps 20
    python -m tools.bench --model rcn --model rcn-gru --preset quick
    python -m tools.bench --model mcnn-ens --preset paper --eval-only --set model.members=WD,PHS,PHL,ST
    python -m tools.bench --model ensemble --eval-only --eval-images 5000 --set model.members=RUN1,RUN2,...
    python -m tools.bench --model rerank --eval-only --eval-images 5000 --set model.members=FIRST,SECOND --set model.k=20
    python -m tools.bench --hardware

`--hardware` prints whether this machine's CPU (and GPU, by its compute
capability) has native bfloat16 and float16 arithmetic, and which
`runtime.mixed_precision` to use here (`tools.hardware`), then exits. The
timing of a model begins with the same two lines on stderr (stdout stays
JSON). To compare precisions, time the default and then the same command
with `--set runtime.mixed_precision=bf16` (or `=fp16`).

`--eval-only` times the 1K-test evaluation of an untrained model built with
every training word in its vocabulary (the cost of scoring does not depend on
the weights), to time a size that has not been trained. An ensemble
(`ensemble`, `mcnn-ens`) is built from its members' run directories
(`model.members`), with untrained weights; so is a two-stage model
(`rerank`), which then needs its list length (`--set model.k=K`: no dev
choice is made) and is timed in two stages, the first stage's matrix and
the second stage on the k listed pairs of each query (`rerank_k` in the
report).

`--eval-images N` times the evaluation on N images and their captions: the
split's images repeated (and cut) to N, each with its captions, e.g. 5000
for the cost of COCO's 5K test (5,000 images x 25,000 captions) from
Flickr8k's 1K. Evaluation reports give the process's peak resident memory
(`peak_rss_mb`, everything the process held, the model and data included).

`--encode SAVED_MODEL` times a SavedModel's `encode_text` on the test
captions (captions/s).

`--cost` measures a model's whole cost table row, each stage in a process
of its own (so that each peak memory is the stage's own): training
throughput and peak memory (for a model trained by gradients; a fitted
model's fit has its family benchmark), the evaluation of an untrained model
(every training word in its vocabulary) on the 1K test and at COCO-5K size
(the 1K test repeated to 5,000 images x 25,000 captions), and the
SavedModel of that model: its size on disk and its `encode_text`
(captions/s) and `encode_image` (images/s) rates, in batches of 256.
Training reports also give an epoch's minutes on the embedded training
split at the measured rate, and the preset's most epochs (every phase's
together, `engine.training.epochs_at_most`) at that rate, in hours; then
one validation as the trainer makes it (the dev split, cut to the preset's
`train.validate_max_images`, ranked for the selection metric), the
validations an epoch makes (one at its end, and one every
`train.validate_every` steps), and the whole run at most: the most epochs
of training and their validations (`run_hours`; early stopping may end a
run sooner). `--skip-5k` leaves the COCO-5K evaluation out. One report per
model, e.g.

    python -m tools.bench --cost --model gru --preset paper --record results/bench/cost/gru.json

`--data-checks` times the checks every training run makes before its first
step, on the model's data (default: the embedded Flickr8k): reading the
train, dev and test splits (file sizes, shapes, counts, NaN/inf) and
tokenizing every caption with the model's tokenizer (1 to 512 tokens).

`--record FILE` (every mode, and every family benchmark below) also writes
the printed report(s) to FILE as JSON, in an envelope giving the command,
date, machine and versions (`common.records`); `--hardware`'s two lines are
recorded as one report, {"hardware": ..., "precision": ...}. A FILE that
cannot be written is an error before anything is timed.

Every timing report names the instruction set TensorFlow's kernels ran
on (`isa`: "avx512", or e.g. "avx2 (ONEDNN_MAX_CPU_ISA=AVX2 on an avx512
CPU)" when a variable caps oneDNN's; `common.machine.instruction_set`), so
a figure measured on the AVX2 code paths says so.

Training reports give pairs/s, the step time, and the GFLOP/s achieved on
the model's matrix products (`RetrievalModel.forward_flops`, times 3 for
the forward and backward passes) beside this machine's float32 matmul rate.

With several models, each report also gives its training step time
relative to the first model's (`step_time_vs_first`), e.g. the cost of the
RCN's capsules over a GRU of the same size.

Training throughput is measured on real training batches of the embedded
Flickr8k data through the trainer's own train step (after warm-up steps that
absorb tracing); evaluation time covers encoding the split's images and
captions and ranking them under the full protocol.

The benchmarks of one family have modules of their own:
`tools.bench_fisher_vectors` (the Fisher vectors' mixture EM),
`tools.bench_vsepp` (the `gru` family's step against VSE++'s own PyTorch
step) and `tools.bench_order_similarity` (an evaluation under the
order-violation similarity).

The timing primitives these share (the untrained model, its training
batches and step, throughput, FLOPs, peak memory) are `tools.timing`; a
stage that runs in a process of its own does so through `tools.worker`'s
`Worker`, which ends the benchmark at once with a one-line error if the
process dies.
"""

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from common import machine, records
from common.errors import ArgumentParser, InputError, count, run_command
from data import splits
from tools import hardware
from tools.timing import add_experiment_arguments, peak_rss_mb, time_training, untrained_model
from tools.worker import Worker


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="registered model (repeatable; default gru)")
    add_experiment_arguments(parser)
    parser.add_argument("--eval-split", default="test")
    parser.add_argument("--eval-images", type=count, metavar="N",
                        help="evaluate on the split's images repeated to N (and their captions), e.g. 5000 for COCO's 5K")
    parser.add_argument("--skip-eval", action="store_true", help="time training only")
    parser.add_argument("--eval-only", action="store_true", help="time the evaluation of an untrained model only")
    parser.add_argument("--cost", action="store_true",
                        help="the cost table's row: training, 1K and COCO-5K evaluation, SavedModel encoding rates")
    parser.add_argument("--skip-5k", action="store_true",
                        help="--cost: without the COCO-5K evaluation (e.g. a pair network's, 25 times its 1K one)")
    parser.add_argument("--data-checks", action="store_true", help="time the up-front data checks of a run instead")
    parser.add_argument("--encode", metavar="SAVED_MODEL", help="time a SavedModel's encode_text on the test captions instead")
    parser.add_argument("--hardware", action="store_true",
                        help="print this machine's native bf16/fp16 arithmetic and the mixed precision to use, and exit")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    if args.eval_only and args.skip_eval:
        parser.error("--eval-only and --skip-eval exclude each other")
    if args.cost and (args.eval_only or args.skip_eval or args.eval_images):
        parser.error("--cost measures training and both evaluation sizes; it takes no --eval-only, --skip-eval "
                     "or --eval-images")
    if args.skip_5k and not args.cost:
        parser.error("--skip-5k is an option of --cost")
    args.model = args.model or ["gru"]
    args.command = records.command_line("tools.bench", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    if args.hardware:
        lines = hardware.machine_lines()
        print("\n".join(lines))
        recording.write([dict(line.split(": ", 1) for line in lines)])  # {"hardware": ..., "precision": ...}
        return 0
    if args.encode:
        report = encoding_throughput(args.encode)
        print(json.dumps(report, indent=2))
        recording.write([report])
        return 0
    if args.data_checks:
        reports = [data_check_timings(name, args) for name in args.model]
        print(json.dumps(reports, indent=2))
        recording.write(reports)
        return 0
    from models import registry

    for name in args.model:  # bad input is a one-line error, before the hardware lines and any timing
        registry.get(name).experiment(args.preset, args.set)
    print("\n".join(hardware.machine_lines()), file=sys.stderr)
    if args.cost:
        reports = [cost_row(name, args) for name in args.model]
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        recording.write(reports)
        return 0
    reports = [measure(name, args) for name in args.model]
    for report in reports[1:] if not args.eval_only else ():
        report["step_time_vs_first"] = round(report["train_step_ms"] / reports[0]["train_step_ms"], 2)
    print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    recording.write(reports)
    return 0


def data_check_timings(name, args):
    """Seconds to read and check a model's three splits, and to check their
    captions against its tokenizer."""
    from data import pipeline
    from layers.text_vectorizer import MAX_INPUT_TOKENS
    from models import registry

    config = registry.get(name).experiment(args.preset, args.set)
    data = config.data
    began = time.perf_counter()
    loaded = [splits.load_split(data.path, split, data.image_features)
              for split in (data.train_split, data.dev_split, data.test_split)]
    read = time.perf_counter()
    for split in loaded:
        pipeline.check_captions(split, config.model.tokenizer, MAX_INPUT_TOKENS)
    checked = time.perf_counter()
    return {"model": name, "tokenizer": config.model.tokenizer, "captions": sum(len(s.captions) for s in loaded),
            "read_and_check_splits_s": round(read - began, 3), "caption_checks_s": round(checked - read, 3)}


def encoding_throughput(path, repeats=3):
    """Captions/s of a SavedModel's encode_text on the 5,000 test captions
    (batches of 256, the best of `repeats` passes)."""
    import tensorflow as tf

    from data.embedded import EMBEDDED_DATA

    model = tf.saved_model.load(path)
    captions = splits.load_split(EMBEDDED_DATA, "test").captions
    model.encode_text(tf.constant(captions[:256]))  # trace once
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        for a in range(0, len(captions), 256):
            model.encode_text(tf.constant(captions[a : a + 256]))
        best = min(best, time.perf_counter() - began)
    return {"saved_model": records.portable_path(path), "isa": str(machine.instruction_set()), "captions": len(captions),
            "captions_per_s": round(len(captions) / best, 1)}


COST_EVAL_IMAGES = {"eval_1k": None, "eval_5k": 5000}  # None: the split itself


def cost_row(model_name, args):
    """The cost table's row of one model (see the module docstring): each
    stage in a `Worker` process of its own."""
    report = {"model": model_name, "preset": args.preset, "overrides": records.portable_arguments(args.set),
              "isa": str(machine.instruction_set())}
    evaluations = [size for size in COST_EVAL_IMAGES if not (args.skip_5k and size == "eval_5k")]
    for stage in ("train", "validate", *evaluations, "encode"):
        with Worker(f"the {stage} stage of {model_name}", _cost_worker, stage, model_name, args) as worker:
            report.update(worker.receive())
    if "epoch_minutes" in report:  # trained by gradients
        report["run_hours"] = whole_run_hours(report)
    return report


def whole_run_hours(report):
    """The most epochs of a cost row, each its training and its
    validations, in hours (one decimal)."""
    epoch_seconds = report["epoch_minutes"] * 60 + report["validations_per_epoch"] * report["validate_seconds"]
    return round(report["max_epochs"] * epoch_seconds / 3600, 1)


def _cost_worker(connection, stage, model_name, args):
    connection.send(cost_stage(stage, model_name, args))


def cost_stage(stage, model_name, args):
    """One stage of `cost_row` in this process: a dict of its fields, named
    after the stage."""
    if stage == "train":
        from models.base import FittedModel  # TensorFlow loads once the arguments are known to be usable

        # A fitted model (which may need word vectors for its own vocabulary) has no training steps.
        if isinstance(untrained_model(model_name, args.preset, args.set, every_word=True)[2], FittedModel):
            return {}
        from engine.training import epochs_at_most

        config, train_split, model = untrained_model(model_name, args.preset, args.set)
        report = time_training(model, config, train_split, args)
        fields = {key: report[key] for key in ("batch_size", "train_pairs_per_s", "train_step_ms")}
        # An epoch of the embedded training split at that rate, and the preset's most epochs (early stopping may end sooner).
        epoch_pairs = len(train_split.captions if config.train.sampling == "all_captions" else train_split.images)
        epoch_minutes = epoch_pairs / report["train_pairs_per_s"] / 60
        max_epochs = epochs_at_most(model, config.train)
        steps_per_epoch = epoch_pairs // config.train.batch_size  # full batches only, as pipeline.epoch_order
        return {**fields, "train_peak_rss_mb": peak_rss_mb(), "epoch_pairs": epoch_pairs,
                "epoch_minutes": round(epoch_minutes, 1), "max_epochs": max_epochs,
                "max_epochs_hours": round(epoch_minutes * max_epochs / 60, 1),
                "validations_per_epoch": 1 + (steps_per_epoch // config.train.validate_every
                                              if config.train.validate_every else 0)}
    if stage == "validate":
        return validation_cost(model_name, args)
    if stage in COST_EVAL_IMAGES:
        options = argparse.Namespace(**{**vars(args), "eval_only": True, "eval_images": COST_EVAL_IMAGES[stage]})
        report = measure(model_name, options)
        return {f"{stage}_images": report["eval_images"], f"{stage}_captions": report["eval_captions"],
                f"{stage}_seconds": report["eval_seconds"], f"{stage}_peak_rss_mb": report["peak_rss_mb"]}
    if stage == "encode":
        return saved_model_rates(model_name, args)
    raise ValueError(f"unknown cost stage {stage!r}")


def validation_cost(model_name, args):
    """One validation of the untrained model as the trainer makes it: the
    dev split cut to `train.validate_max_images`, encoded and ranked for
    the selection metric (no sentence-similarity rank)."""
    from engine import evaluation, scoring

    config, train_split, model = untrained_model(model_name, args.preset, args.set, every_word=True)
    dev = splits.load_split(config.data.path, config.data.dev_split, config.data.image_features)
    if config.train.validate_max_images:
        dev = dev.first_images(config.train.validate_max_images)
    scorer = scoring.CheckpointScorer(model)
    scorer.encode_texts(dev.captions[:8])  # trace once, outside the timing
    began = time.perf_counter()
    evaluation.evaluate(scorer, dev, sentence_similarity=False)
    return {"validate_images": len(dev.images), "validate_seconds": round(time.perf_counter() - began, 2),
            "validate_peak_rss_mb": peak_rss_mb()}


def saved_model_rates(model_name, args, batch=256, repeats=3):
    """The SavedModel of the untrained model: its size, and the best of
    `repeats` passes of its `encode_text` over the test captions and its
    `encode_image` over the test images, in batches of `batch`."""
    import tempfile
    from pathlib import Path

    import tensorflow as tf

    from engine.export import export_saved_model

    config, _, model = untrained_model(model_name, args.preset, args.set, every_word=True)
    split = splits.load_split(config.data.path, args.eval_split, config.data.image_features)
    with tempfile.TemporaryDirectory() as directory:
        path = export_saved_model(model, Path(directory) / "saved_model")
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        loaded = tf.saved_model.load(str(path))
        rates = {}
        for name, function, inputs in (("captions", loaded.encode_text, split.captions),
                                       ("images", loaded.encode_image, split.images)):
            function(tf.constant(inputs[:batch]))  # trace once
            best = float("inf")
            for _ in range(repeats):
                began = time.perf_counter()
                for a in range(0, len(inputs), batch):
                    function(tf.constant(inputs[a : a + batch]))
                best = min(best, time.perf_counter() - began)
            rates[f"encode_{name}_per_s"] = round(len(inputs) / best, 1)
    return {"saved_model_mb": round(size / 2**20, 1), **rates, "encode_peak_rss_mb": peak_rss_mb()}


def measure(model_name, args):
    """Times one model's training steps (and evaluation); returns a report."""
    import tensorflow as tf

    from engine import evaluation, scoring

    config, train_split, model = untrained_model(model_name, args.preset, args.set, every_word=args.eval_only)
    report = {
        "model": model_name,
        "preset": args.preset,
        "overrides": records.portable_arguments(args.set),
        "devices": [d.name for d in tf.config.list_logical_devices()],
        "isa": str(machine.instruction_set()),
    }
    if not args.eval_only:
        report.update(time_training(model, config, train_split, args))
    if args.skip_eval:
        return report

    split = splits.load_split(config.data.path, args.eval_split, config.data.image_features)
    if args.eval_images:
        split = repeated_split(split, args.eval_images)
    scorer = scoring.CheckpointScorer(model)
    scorer.encode_texts(split.captions[:8])  # trace once, outside the timing
    two_stage = scorer.two_stage
    if two_stage is not None and two_stage.k < 1:
        raise InputError(f"--model {model_name}: an untrained two-stage model has no list length chosen on dev; "
                         "give it one, e.g. --set model.k=20")
    load_before = machine.load_average()
    start = time.perf_counter()
    evaluation.evaluate_encodings(
        scorer.similarity, scorer.encode_images(split.images), scorer.encode_texts(split.captions), split.caption_image,
        sentence_similarity=scorer.joint_space, two_stage=two_stage,
    )
    eval_seconds = time.perf_counter() - start

    return {
        **report,
        "cpu_load_before": load_before,
        "eval_split": args.eval_split,
        "eval_images": len(split.images),
        "eval_captions": len(split.captions),
        "eval_seconds": round(eval_seconds, 2),
        "peak_rss_mb": peak_rss_mb(),
        **({"rerank_k": two_stage.k} if two_stage is not None else {}),
    }


def repeated_split(split, n_images):
    """`split` with its images repeated (and cut) to `n_images`, each with
    its own captions, in order: an evaluation of that size."""
    rows = np.arange(n_images) % len(split.images)
    by_image = [np.flatnonzero(split.caption_image == image) for image in range(len(split.images))]
    captions = np.concatenate([by_image[row] for row in rows])
    return dataclasses.replace(
        split,
        images=split.images[rows],
        captions=[split.captions[c] for c in captions],
        caption_image=np.repeat(np.arange(n_images), [len(by_image[row]) for row in rows]),
        image_ids=[split.image_ids[row] for row in rows],
    )


if __name__ == "__main__":
    sys.exit(main())
