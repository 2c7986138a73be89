"""Benchmarks of any registered model, as JSON: training throughput, the
1K-test evaluation time, a SavedModel's caption encoding, and the data
checks of a run.

    python -m tools.bench --model gru --preset quick
    python -m tools.bench --model gru --preset paper --steps 20
    python -m tools.bench --model rcn --model rcn-gru --preset quick
    python -m tools.bench --model mcnn-ens --preset paper --eval-only --set model.members=WD,PHS,PHL,ST
    python -m tools.bench --model ensemble --eval-only --eval-images 5000 --set model.members=RUN1,RUN2,...
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
(`model.members`), with untrained weights.

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
split at the measured rate, and the preset's most epochs (of each phase) at
that rate, in hours; `--skip-5k` leaves the COCO-5K evaluation out. One
report per model, e.g.

    python -m tools.bench --cost --model gru --preset paper --record results/bench/cost/gru.json

`--data-checks` times the checks every training run makes before its first
step, on the model's data (default: the embedded Flickr8k): reading the
train, dev and test splits (file sizes, shapes, counts, NaN/inf) and
tokenizing every caption with the model's tokenizer (1 to 512 tokens).

`--record FILE` (every mode, and every family benchmark below) also writes
the printed report(s) to FILE as JSON, in an envelope giving the command,
date, machine and versions (`tools.records`); `--hardware`'s two lines are
recorded as one report, {"hardware": ..., "precision": ...}. A FILE that
cannot be written is an error before anything is timed.

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

A benchmark that runs code in a process of its own does so through
`Worker`, which supervises it: the death of the process (an exception, a
crash, a kill) ends the benchmark at once with a one-line error giving the
process's reason, rather than leaving it waiting for an answer.
"""

import argparse
import dataclasses
import json
import resource
import sys
import time

import numpy as np

from common.errors import InputError, count, count_or_zero, run_command
from data import splits
from tools import hardware, records

WORKER_POLL_SECONDS = 0.2  # how often a wait for a worker's answer checks that it is alive


def add_experiment_arguments(parser):
    """The options that choose an experiment's preset and overrides and the
    timed training steps (shared with the family benchmarks)."""
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--steps", type=count, default=30, help="timed training steps")
    parser.add_argument("--warmup", type=count_or_zero, default=3, help="untimed training steps first")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    return {"saved_model": path, "captions": len(captions), "captions_per_s": round(len(captions) / best, 1)}


COST_EVAL_IMAGES = {"eval_1k": None, "eval_5k": 5000}  # None: the split itself


def cost_row(model_name, args):
    """The cost table's row of one model (see the module docstring): each
    stage in a `Worker` process of its own."""
    report = {"model": model_name, "preset": args.preset, "overrides": args.set}
    evaluations = [size for size in COST_EVAL_IMAGES if not (args.skip_5k and size == "eval_5k")]
    for stage in ("train", *evaluations, "encode"):
        with Worker(f"the {stage} stage of {model_name}", _cost_worker, stage, model_name, args) as worker:
            report.update(worker.receive())
    return report


def _cost_worker(connection, stage, model_name, args):
    connection.send(cost_stage(stage, model_name, args))


def cost_stage(stage, model_name, args):
    """One stage of `cost_row` in this process: a dict of its fields, named
    after the stage."""
    if stage == "train":
        # A fitted model (which may need word vectors for its own vocabulary) has no training steps.
        if untrained_model(model_name, args.preset, args.set, every_word=True)[2].fits_without_gradients:
            return {}
        config, train_split, model = untrained_model(model_name, args.preset, args.set)
        report = time_training(model, config, train_split, args)
        fields = {key: report[key] for key in ("batch_size", "train_pairs_per_s", "train_step_ms")}
        # An epoch of the embedded training split at that rate, and the preset's most epochs (early stopping may end sooner).
        epoch_pairs = len(train_split.captions if config.train.sampling == "all_captions" else train_split.images)
        epoch_minutes = epoch_pairs / report["train_pairs_per_s"] / 60
        return {**fields, "train_peak_rss_mb": peak_rss_mb(), "epoch_pairs": epoch_pairs,
                "epoch_minutes": round(epoch_minutes, 1), "max_epochs": config.train.epochs,
                "max_epochs_hours": round(epoch_minutes * config.train.epochs / 60, 1)}
    if stage in COST_EVAL_IMAGES:
        options = argparse.Namespace(**{**vars(args), "eval_only": True, "eval_images": COST_EVAL_IMAGES[stage]})
        report = measure(model_name, options)
        return {f"{stage}_images": report["eval_images"], f"{stage}_captions": report["eval_captions"],
                f"{stage}_seconds": report["eval_seconds"], f"{stage}_peak_rss_mb": report["peak_rss_mb"]}
    if stage == "encode":
        return saved_model_rates(model_name, args)
    raise ValueError(f"unknown cost stage {stage!r}")


def saved_model_rates(model_name, args, batch=256, repeats=3):
    """The SavedModel of the untrained model: its size, and the best of
    `repeats` passes of its `encode_text` over the test captions and its
    `encode_image` over the test images, in batches of `batch`."""
    import tempfile
    from pathlib import Path

    import tensorflow as tf

    from engine.export import export_saved_model

    config, train_split, model = untrained_model(model_name, args.preset, args.set, every_word=True)
    split = splits.load_split(config.data.path, args.eval_split, config.data.image_features)
    with tempfile.TemporaryDirectory() as directory:
        path = export_saved_model(model, train_split.images.shape[1], Path(directory) / "saved_model",
                                  config.data.image_features)
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


def peak_rss_mb(status="/proc/self/status"):
    """This process's peak resident memory so far, in MB: Linux's VmHWM,
    which starts anew in a spawned process (`ru_maxrss` carries the
    parent's peak over fork and exec), else `ru_maxrss`."""
    try:
        with open(status, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def untrained_model(name, preset, overrides=(), every_word=False):
    """The experiment of `name` under `preset` and `overrides`, its
    training split, and its model built as the trainer builds it (under
    its precision policy) with a vocabulary of the training captions: the
    model's own vocabulary, or with `every_word` every training word.
    Returns (config, train_split, model)."""
    import keras

    from data.vocabulary import Vocabulary
    from engine import runtime
    from models import registry

    spec = registry.get(name)
    config = spec.experiment(preset, overrides)
    if spec.prepare:
        config = spec.prepare(config)
    train_split = splits.load_split(config.data.path, config.data.train_split, config.data.image_features)
    # Without word vectors: they only change initial values (and the size of
    # a frozen lookup table), not the cost of a step.
    if every_word:
        vocabulary = Vocabulary.build(train_split.captions, tokenizer=config.model.tokenizer)
    else:
        vocabulary = spec.vocabulary(config.model, train_split.captions, None)
    keras.utils.set_random_seed(config.train.seed)
    with runtime.dtype_policy(config.runtime.mixed_precision):
        model = spec.build_model(config.model, vocabulary, train_split.images.shape[1])
    return config, train_split, model


def measure(model_name, args):
    """Times one model's training steps (and evaluation); returns a report."""
    import tensorflow as tf

    from engine import evaluation, scoring

    config, train_split, model = untrained_model(model_name, args.preset, args.set, every_word=args.eval_only)
    image_dim = train_split.images.shape[1]
    report = {
        "model": model_name,
        "preset": args.preset,
        "overrides": args.set,
        "devices": [d.name for d in tf.config.list_logical_devices()],
    }
    if not args.eval_only:
        report.update(time_training(model, config, train_split, args))
    if args.skip_eval:
        return report

    split = splits.load_split(config.data.path, args.eval_split, config.data.image_features)
    if args.eval_images:
        split = repeated_split(split, args.eval_images)
    scorer = scoring.CheckpointScorer(model, image_dim)
    scorer.encode_texts(split.captions[:8])  # trace once, outside the timing
    load_before = records.load_average()
    start = time.perf_counter()
    evaluation.evaluate_encodings(
        scorer.similarity, scorer.encode_images(split.images), scorer.encode_texts(split.captions), split.caption_image,
        sentence_similarity=scorer.joint_space,
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


def time_training(model, config, train_split, args):
    """Training throughput on real batches through the trainer's own step,
    and the GFLOP/s that makes of the model's matrix products (training =
    3 x `forward_flops`), against this machine's float32 matmul rate."""
    batches = training_batches(model, config, train_split, args.warmup + args.steps)
    step = zoo_step(model, config, batches[: args.warmup])
    seconds = time_steps(step, batches[args.warmup :])
    report = {"batch_size": config.train.batch_size, **throughput(config, args.steps, seconds)}
    flops = training_flops(model, batches[args.warmup :])
    if flops is not None:
        report["train_gflop_per_step"] = significant(flops / 1e9)
        report["train_gflops_per_s"] = significant(flops / 1e9 / (seconds / args.steps))
        report["machine_matmul_gflops_per_s"] = machine_matmul_gflops()
    return report


def significant(x, digits=4):
    return float(f"{x:.{digits}g}")


def training_batches(model, config, train_split, count):
    """The first `count` training batches of the run's epoch order (as
    tensors: what the trainer's dataset yields)."""
    from data import pipeline

    data = pipeline.tokenize_split(train_split, model.vectorizer)
    order = pipeline.epoch_order(
        data, config.train.sampling, config.train.batch_size, config.train.seed, 0, config.train.bucket_by_length
    )
    dataset = iter(pipeline.training_dataset(data, np.resize(order, (count, order.shape[1]))))
    return [next(dataset) for _ in range(count)]


def zoo_step(model, config, warmup_batches):
    """One training step of the trainer (its optimizer, clipping, precision
    and XLA settings), waiting for the loss; already run (and traced) on
    `warmup_batches`."""
    import tensorflow as tf

    from engine import train_step

    optimizer = train_step.make_optimizer(config.train, config.runtime.mixed_precision)
    optimizer.build(model.trainable_variables)
    step = train_step.make_train_step(
        model, optimizer, tf.distribute.get_strategy(), config.train.grad_clip_norm, config.runtime.jit_compile
    )

    def run(batch):
        return float(step(batch)["loss"])

    for batch in warmup_batches:
        run(batch)
    return run


def time_steps(step, batches):
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return time.perf_counter() - start


def throughput(config, steps, seconds):
    return {
        "train_pairs_per_s": round(steps * config.train.batch_size / seconds, 1),
        "train_step_ms": round(1000 * seconds / steps, 1),
    }


def training_flops(model, batches):
    """Mean FLOPs of a training step over `batches`, or None."""
    counts = [model.forward_flops(b["token_ids"].numpy(), b["image_features"].numpy()) for b in batches]
    return None if None in counts else 3 * sum(counts) / len(counts)


def machine_matmul_gflops(repeats=20):
    """The best float32 rate of a [128, 1024] x [1024, 3072] product here
    (a GRU's recurrent product at batch 128), in GFLOP/s."""
    import tensorflow as tf

    a, b = tf.random.normal([128, 1024]), tf.random.normal([1024, 3072])
    product = tf.function(lambda: tf.reduce_sum(a @ b))
    product()
    best = min(time_steps(lambda _: float(product()), [None]) for _ in range(repeats))
    return round(2 * 128 * 1024 * 3072 / best / 1e9, 1)


class Worker:
    """`target(connection, *args)` in a process of its own (spawned), talked
    to over a pipe (`send`, `receive`), and supervised: every wait for its
    answer ends as soon as the process ends.

    The parent closes its copy of the child's end of the pipe once the
    process has started, so the child's death is an end of file on the
    parent's end (and `receive` also checks that the process is alive
    between polls). An exception in `target` is sent back as one line (its
    type, its reason and the file and line it was raised at) and raised
    here as an `InputError` naming the worker; a process that dies without
    a word (a crash, a signal, `os._exit`) is an `InputError` giving its
    exit status. Either way the process has ended when the error is raised.

    Used as a context manager, leaving the block closes the pipe (a worker
    waiting in `connection.recv()` gets an EOFError and ends) and waits for
    the process, killing it after `close_seconds`.

    Args:
      name: the worker as messages name it, e.g. "VSE++ of ../vsepp".
      target: a module-level function (the spawned process imports it).
      args: picklable arguments after the connection.
    """

    def __init__(self, name, target, *args, close_seconds=10):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.name = name
        self.close_seconds = close_seconds
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child_end, target, args), daemon=True)
        try:
            self.process.start()
        finally:
            child_end.close()  # the child holds the only copy now: its death is an end of file here

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def send(self, message):
        try:
            self.connection.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._failure() from None

    def receive(self, timeout=None):
        """The worker's next message; an `InputError` if the worker failed,
        died, or (with `timeout` seconds) did not answer in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.connection.poll(WORKER_POLL_SECONDS):
                try:
                    message = self.connection.recv()
                except (EOFError, ConnectionResetError):
                    raise self._failure() from None
                if isinstance(message, WorkerFailure):
                    self.process.join(self.close_seconds)
                    raise InputError(f"{self.name} failed: {message.reason}")
                return message
            if not self.process.is_alive() and not self.connection.poll(0):
                raise self._failure()
            if deadline is not None and time.monotonic() > deadline:
                raise InputError(f"{self.name}: no answer within {timeout:g} s")

    def _failure(self):
        """The error of a worker that ended without an answer: its own
        reason if it sent one before dying, else its exit status."""
        try:
            while self.connection.poll(0):
                message = self.connection.recv()
                if isinstance(message, WorkerFailure):
                    self.process.join(self.close_seconds)
                    return InputError(f"{self.name} failed: {message.reason}")
        except (EOFError, OSError):
            pass
        self.process.join(self.close_seconds)
        code = self.process.exitcode
        if code is None:
            how = "closed its pipe"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return InputError(f"{self.name}: the worker process {how} without an answer")

    def close(self):
        """Closes the pipe and waits for the process (killing it after
        `close_seconds`)."""
        self.connection.close()
        self.process.join(self.close_seconds)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class WorkerFailure:
    """What a `Worker`'s process sends back when its target raises."""

    def __init__(self, reason):
        self.reason = reason


def _worker_main(connection, target, args):
    """A `Worker`'s process: runs the target; an exception goes back to the
    parent as a `WorkerFailure` (one line) and ends the process with status
    1, without a traceback on stderr."""
    import traceback

    try:
        target(connection, *args)
    except BaseException as error:  # noqa: BLE001 - relayed to the parent, which reports it
        frames = traceback.extract_tb(error.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__
        try:
            connection.send(WorkerFailure(where + reason))
        except OSError:
            pass  # the parent has gone
        sys.exit(1)
    finally:
        connection.close()


if __name__ == "__main__":
    sys.exit(main())
