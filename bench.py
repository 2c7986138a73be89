"""Benchmarks: training throughput and 1K-test evaluation time, as JSON.

    python -m bench --model gru --preset quick
    python -m bench --model gru --preset paper --steps 20
    python -m bench --model rcn --model rcn-gru --preset quick
    python -m bench --order-similarity 5000 --dim 1024
    python -m bench --model mcnn-ens --preset paper --eval-only

`--eval-only` times the 1K-test evaluation of an untrained model built with
every training word in its vocabulary (the cost of scoring does not depend on
the weights): for a model assembled from trained ones (m-CNN_ENS) without
their directories, or to time a size that has not been trained.

`--fv-em` times the Fisher vectors' mixture EM (Klein et al. 2015): the
zoo's EM in its Gaussian mode against scikit-learn's `GaussianMixture` from
the same initial means, and an HGLMM iteration against a GMM iteration of
the same code, on the GloVe-50 vocabulary (7,965 vectors), the training
captions' tokens (and with `--fv-em-large` a random 300,000 x 300
sample, 2 iterations). `--encode SAVED_MODEL`
times a SavedModel's `encode_text` on the test captions (captions/s).

`--data-checks` times the checks every training run makes before its first
step, on the model's data (default: the embedded Flickr8k): reading the
train, dev and test splits (file sizes, shapes, counts, NaN/inf) and
tokenizing every caption with the model's tokenizer (1 to 512 tokens).

`--order-similarity N` instead ranks N random images against 5N captions
under the order-violation similarity (the 5K x 25K COCO evaluation for
N = 5000) and reports the time and the process's peak memory.

Training reports give pairs/s, the step time, and the GFLOP/s achieved on
the model's matrix products (`RetrievalModel.forward_flops`, times 3 for
the forward and backward passes) beside this machine's float32 matmul rate.
`--vsepp CLONE` instead alternates `--rounds` rounds of the zoo's step with
VSE++'s own PyTorch `VSE.train_emb` (model.py of a clone of
github.com/fartashf/vsepp; needs `pip install torch`) on the same batches,
VSE++ in a process of its own:

    python -m bench --model gru --preset paper --vsepp ../vsepp --rounds 3

With several models, each report also gives its training step time
relative to the first model's (`step_time_vs_first`), e.g. the cost of the
RCN's capsules over a GRU of the same size.

Training throughput is measured on real training batches of the embedded
Flickr8k data through the trainer's own train step (after warm-up steps that
absorb tracing); evaluation time covers encoding the split's images and
captions and ranking them under the full protocol.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from data.errors import count, count_or_zero, run_command


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="registered model (repeatable; default gru)")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--steps", type=count, default=30, help="timed training steps")
    parser.add_argument("--warmup", type=count_or_zero, default=3, help="untimed training steps first")
    parser.add_argument("--eval-split", default="test")
    parser.add_argument("--skip-eval", action="store_true", help="time training only")
    parser.add_argument("--eval-only", action="store_true", help="time the evaluation of an untrained model only")
    parser.add_argument("--order-similarity", type=count, metavar="N",
                        help="time an N x 5N evaluation with the order-violation similarity instead")
    parser.add_argument("--dim", type=count, default=1024, help="embedding size for --order-similarity")
    parser.add_argument("--fv-em", action="store_true", help="time the Fisher vectors' mixture EM instead")
    parser.add_argument("--fv-em-large", action="store_true",
                        help="with --fv-em, also a random 300,000 x 300 sample (slow: more than 10 minutes here)")
    parser.add_argument("--data-checks", action="store_true", help="time the up-front data checks of a run instead")
    parser.add_argument("--vsepp", metavar="VSEPP_CLONE",
                        help="alternate training rounds with VSE++'s own PyTorch step (a clone of fartashf/vsepp)")
    parser.add_argument("--rounds", type=count, default=3, help="alternating rounds for --vsepp")
    parser.add_argument("--encode", metavar="SAVED_MODEL", help="time a SavedModel's encode_text on the test captions instead")
    args = parser.parse_args(argv)
    if args.eval_only and args.skip_eval:
        parser.error("--eval-only and --skip-eval exclude each other")
    args.model = args.model or ["gru"]
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    if args.fv_em:
        for report in fv_em_timings(large=args.fv_em_large):
            print(json.dumps(report), flush=True)  # one line per data set, as each finishes
        return 0
    if args.encode:
        print(json.dumps(encoding_throughput(args.encode), indent=2))
        return 0
    if args.data_checks:
        print(json.dumps([data_check_timings(name, args) for name in args.model], indent=2))
        return 0
    if args.order_similarity:
        print(json.dumps(order_similarity_evaluation(args.order_similarity, args.dim), indent=2))
        return 0
    if args.vsepp:
        print(json.dumps(compare_with_vsepp(args.model[0], args), indent=2))
        return 0
    reports = [measure(name, args) for name in args.model]
    for report in reports[1:] if not args.eval_only else ():
        report["step_time_vs_first"] = round(report["train_step_ms"] / reports[0]["train_step_ms"], 2)
    print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return 0


def data_check_timings(name, args):
    """Seconds to read and check a model's three splits, and to check their
    captions against its tokenizer."""
    from data import pipeline, readers
    from layers.text_vectorizer import MAX_INPUT_TOKENS
    from models import registry

    config = registry.get(name).experiment(args.preset, args.set)
    data = config.data
    began = time.perf_counter()
    splits = [readers.load_split(data.path, split, data.image_features)
              for split in (data.train_split, data.dev_split, data.test_split)]
    read = time.perf_counter()
    for split in splits:
        pipeline.check_captions(split, config.model.tokenizer, MAX_INPUT_TOKENS)
    checked = time.perf_counter()
    return {"model": name, "tokenizer": config.model.tokenizer, "captions": sum(len(s.captions) for s in splits),
            "read_and_check_splits_s": round(read - began, 3), "caption_checks_s": round(checked - read, 3)}


def fv_em_timings(components=30, iterations=10, large=False):
    """Yields, per data set, the EM time and final log-likelihood per sample: ours (Gaussian mode,
    `iterations` steps) and scikit-learn's (`iterations` steps from the same
    means, variances and weights), and our HGLMM iteration time, per data set."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    from config import EMBEDDED_DATA
    from data import readers, word_vectors
    from data.tokenizer import tokenize_strings
    from models.fisher_vectors import mixtures
    from models.w2vv import GLOVE_50D

    vectors = word_vectors.load_word_vectors(GLOVE_50D)
    unit = vectors.vectors / np.linalg.norm(vectors.vectors, axis=1, keepdims=True)
    captions = readers.load_split(EMBEDDED_DATA, "train").captions
    tokens = [vectors.key_to_index[t] for c in tokenize_strings(captions, "treebank") for t in c if t in vectors.key_to_index]
    rng = np.random.default_rng(0)
    data = {  # name: (data, iterations); the largest set gets fewer (times are also per iteration)
        "glove_vocabulary": (unit, iterations),
        "training_caption_tokens": (unit[tokens], iterations),
    }
    if large:
        data["random_300k_x_300"] = (rng.normal(size=(300_000, 300)) / np.sqrt(300), 2)
    for name, (x, iterations) in data.items():
        x = np.asarray(x, np.float64)
        report = {"data": name, "rows": len(x), "dim": x.shape[1], "components": components, "iterations": iterations}
        start = mixtures.initial_mixture(x, components, "gaussian", np.random.default_rng(0))
        for policy in ("gaussian", "hybrid"):
            mixture = mixtures.initial_mixture(x, components, policy, np.random.default_rng(0))
            began = time.perf_counter()
            for _ in range(iterations):
                mixture, _ = mixtures.em_step(x, mixture, policy)
            report[f"ours_{policy}_seconds"] = round(time.perf_counter() - began, 2)
            report[f"ours_{policy}_log_likelihood_per_sample"] = round(mixture.log_likelihood(x) / len(x), 4)
        reference = GaussianMixture(components, covariance_type="diag", max_iter=iterations, tol=0,
                                    reg_covar=1e-5, weights_init=start.weights, means_init=start.loc,
                                    precisions_init=1 / start.scale**2)
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            reference.fit(x)
        report["sklearn_gaussian_seconds"] = round(time.perf_counter() - began, 2)
        report["sklearn_gaussian_log_likelihood_per_sample"] = round(float(reference.score(x)), 4)
        report["hglmm_vs_gmm_iteration_time"] = round(report["ours_hybrid_seconds"] / report["ours_gaussian_seconds"], 2)
        report["ours_hybrid_seconds_per_iteration"] = round(report["ours_hybrid_seconds"] / iterations, 2)
        yield report


def encoding_throughput(path, repeats=3):
    """Captions/s of a SavedModel's encode_text on the 5,000 test captions
    (batches of 256, the best of `repeats` passes)."""
    import tensorflow as tf

    from config import EMBEDDED_DATA
    from data import readers

    model = tf.saved_model.load(path)
    captions = readers.load_split(EMBEDDED_DATA, "test").captions
    model.encode_text(tf.constant(captions[:256]))  # trace once
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        for a in range(0, len(captions), 256):
            model.encode_text(tf.constant(captions[a : a + 256]))
        best = min(best, time.perf_counter() - began)
    return {"saved_model": path, "captions": len(captions), "captions_per_s": round(len(captions) / best, 1)}


def order_similarity_evaluation(n_images, dim):
    """Ranks n_images x 5 n_images random non-negative unit embeddings by
    order-violation similarity, block by block as `evaluate.py` does."""
    import resource

    import tensorflow as tf

    import evaluate
    from layers.order_violation_similarity import OrderViolationSimilarity

    rng = np.random.default_rng(0)

    def unit(n):
        x = np.abs(rng.normal(size=(n, dim))).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    images, texts = unit(n_images), unit(5 * n_images)
    similarity = tf.function(OrderViolationSimilarity())
    start = time.perf_counter()
    metrics = evaluate.evaluate_encodings(
        lambda i, t: similarity(i, t).numpy(), images, texts, np.repeat(np.arange(n_images), 5)
    )
    return {
        "images": n_images,
        "captions": 5 * n_images,
        "dim": dim,
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rsum_of_random_embeddings": round(metrics["rsum"], 2),
    }


def untrained_model(name, args):
    """The experiment of `name` under `args`' preset and overrides, its
    training split, and its model built as the trainer builds it (under
    its precision policy) with a vocabulary of the training captions.
    Returns (config, train_split, model)."""
    import keras

    import training
    from data import readers
    from data.vocabulary import Vocabulary
    from models import registry

    spec = registry.get(name)
    config = spec.experiment(args.preset, args.set)
    train_split = readers.load_split(config.data.path, config.data.train_split, config.data.image_features)
    # Without word vectors: they only change initial values (and the size of
    # a frozen lookup table), not the cost of a step.
    if args.eval_only:
        vocabulary = Vocabulary.build(train_split.captions, tokenizer=config.model.tokenizer)
    else:
        vocabulary = spec.vocabulary(config.model, train_split.captions, None)
    keras.utils.set_random_seed(config.train.seed)
    with training.dtype_policy(config.train.mixed_precision):
        model = spec.build_model(config.model, vocabulary, train_split.images.shape[1])
    return config, train_split, model


def measure(model_name, args):
    """Times one model's training steps (and evaluation); returns a report."""
    import tensorflow as tf

    import evaluate
    import inference
    from data import readers

    config, train_split, model = untrained_model(model_name, args)
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

    split = readers.load_split(config.data.path, args.eval_split, config.data.image_features)
    scorer = inference.CheckpointScorer(model, image_dim)
    scorer.encode_texts(split.captions[:8])  # trace once, outside the timing
    load_before = round(os.getloadavg()[0], 2)
    start = time.perf_counter()
    evaluate.evaluate_encodings(
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
    }



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

    import training

    optimizer = training.make_optimizer(config.train)
    optimizer.build(model.trainable_variables)
    tc = config.train
    step = training.make_train_step(model, optimizer, tf.distribute.get_strategy(), tc.grad_clip_norm, tc.jit_compile)

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


def compare_with_vsepp(name, args):
    """Alternating rounds of the zoo's training step and VSE++'s own
    `VSE.train_emb` (PyTorch, in a process of its own, idle while the zoo
    runs) on the same batches; pairs/s of each."""
    import multiprocessing

    from data.errors import InputError
    from models import registry

    config_class = registry.get(name).config_class
    if not all(hasattr(config_class, key) for key in ("word_dim", "embed_dim", "margin", "hinge", "absolute")):
        raise InputError(f"--vsepp: VSE++ trains a VSE model; {name} is not one")
    config, train_split, model = untrained_model(name, args)
    model_config, train = config.model, config.train
    batches = training_batches(model, config, train_split, args.warmup + args.steps)
    # VSE++'s train.py options, set as the zoo's model.
    options = dict(
        data_name="f8k_precomp", img_dim=train_split.images.shape[1], embed_size=model_config.embed_dim,
        finetune=False, cnn_type="vgg19", use_abs=model_config.absolute, no_imgnorm=False,
        vocab_size=len(model.vectorizer.vocabulary), word_dim=model_config.word_dim, num_layers=1, margin=model_config.margin,
        measure="cosine", max_violation=model_config.hinge == "max", grad_clip=train.grad_clip_norm or 0,
        learning_rate=train.learning_rate,
    )
    arrays = [(b["image_features"].numpy(), b["token_ids"].numpy()) for b in batches]
    context = multiprocessing.get_context("spawn")
    connection, child_end = context.Pipe()
    worker = context.Process(target=vsepp_worker, args=(child_end, args.vsepp, options, arrays, args.warmup))
    worker.start()
    try:
        message = connection.recv()  # ready, or why not
        if isinstance(message, str):
            raise InputError(message)
        step = zoo_step(model, config, batches[: args.warmup])
        rounds = []
        for _ in range(args.rounds):
            zoo = time_steps(step, batches[args.warmup :])
            connection.send("round")
            vsepp = connection.recv()
            rates = {who: throughput(config, args.steps, seconds)["train_pairs_per_s"]
                     for who, seconds in (("zoo", zoo), ("vsepp", vsepp))}
            rounds.append({**rates, "zoo_vs_vsepp": round(rates["zoo"] / rates["vsepp"], 2)})
        connection.send("stop")
    finally:
        worker.join(timeout=60)
        if worker.is_alive():
            worker.kill()
    flops = training_flops(model, batches[args.warmup :])
    return {
        "model": name,
        "preset": args.preset,
        "overrides": args.set,
        "batch_size": train.batch_size,
        "steps_per_round": args.steps,
        "train_gflop_per_step": None if flops is None else significant(flops / 1e9),
        "rounds_pairs_per_s": rounds,
        "median_zoo_vs_vsepp": round(float(np.median([r["zoo_vs_vsepp"] for r in rounds])), 2),
    }


def vsepp_worker(connection, path, options, batches, warmup):
    """In a process of its own: VSE++'s `VSE` (model.py of a clone of
    github.com/fartashf/vsepp at `path`) built with `options` (its train.py
    options); after `warmup` steps, times `train_emb` over the other
    batches at each "round" message and sends the seconds.

    VSE++'s code targets PyTorch 0.3 with a GPU. Three shims let today's
    CPU PyTorch run it unchanged: `Tensor.cuda` returns the tensor when
    there is no GPU; `forward_loss` is its criterion without the logging
    line (`loss.data[0]` fails on a 0-dim loss now); and a stub stands in
    for torchvision when it is missing (only VSE++'s end-to-end image
    encoder uses it, not the precomputed-feature one timed here).
    """
    import argparse as arguments
    import importlib.util
    import types

    try:
        import torch
    except ImportError:
        connection.send("--vsepp needs PyTorch: pip install torch (a CPU build will do)")
        return
    model_file = Path(path) / "model.py"
    if not model_file.is_file():
        connection.send(f"{model_file}: not found (--vsepp takes a clone of github.com/fartashf/vsepp)")
        return
    if importlib.util.find_spec("torchvision") is None:
        sys.modules["torchvision"] = types.SimpleNamespace(models=None)
        sys.modules["torchvision.models"] = types.ModuleType("torchvision.models")
    if not torch.cuda.is_available():
        torch.Tensor.cuda = lambda tensor, *args, **kwargs: tensor
    module_spec = importlib.util.spec_from_file_location("vsepp_model", model_file)
    vsepp = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(vsepp)
    vse = vsepp.VSE(arguments.Namespace(**options))
    vse.train_start()
    vse.logger = types.SimpleNamespace(update=lambda *args, **kwargs: None)
    vse.forward_loss = lambda image_embeddings, caption_embeddings, **kwargs: vse.criterion(
        image_embeddings, caption_embeddings
    )

    def step(batch):
        # VSE++'s loader sorts each batch by caption length, longest first.
        images, token_ids = batch
        lengths = np.count_nonzero(token_ids, axis=1)
        order = np.argsort(-lengths, kind="stable")
        vse.train_emb(torch.from_numpy(images[order]), torch.from_numpy(token_ids[order]).long(),
                      lengths[order].tolist())

    for batch in batches[:warmup]:
        step(batch)
    connection.send(None)
    while connection.recv() == "round":
        connection.send(time_steps(step, batches[warmup:]))


if __name__ == "__main__":
    sys.exit(main())
