"""The Fisher vectors' fit and encoding (Klein et al. 2015), timed, as JSON lines.

    python -m tools.bench_fisher_vectors
    python -m tools.bench_fisher_vectors --large
    python -m tools.bench_fisher_vectors --benchmark hglmm-fit
    python -m tools.bench_fisher_vectors --benchmark word-table
    python -m tools.bench_fisher_vectors --benchmark encoding
    python -m tools.bench_fisher_vectors --benchmark hglmm-fit --record results/bench/fv_hglmm_fit.json

`--benchmark` (one JSON line per report, printed as each finishes):
- `em` (the default): the zoo's EM (`models/fisher_vectors/mixtures.py`)
  in its Gaussian mode against scikit-learn's `GaussianMixture` from the
  same initial means, and an HGLMM iteration against a GMM iteration of the
  same code, on the GloVe-50 vocabulary (7,965 vectors), the training
  captions' tokens (and with `--large` a random 300,000 x 300 sample, 2
  iterations); its "mixture" names the mixtures timed ("gaussian+hybrid").
- `hglmm-fit`: the paper's HGLMM fit, `fit_mixture` with K = 30 and 10
  iterations, on 300,000 synthetic vectors of GoogleNews' shape (300-d,
  unit; heavy-tailed coordinates, as ICA makes them, around 30 centres):
  its time (the sort of the data, the iterations), the threads it used,
  the final log-likelihood and the process's peak memory.
- `word-table`: the paper's word table on one machine: a word2vec binary
  file of 3,000,000 synthetic 300-d vectors (GoogleNews' size, written to
  a temporary folder; named by the words of the GloVe-50 file, so that
  captions have vectors, then "w7965", "w7966", ...), opened as train.py
  opens it (`load_word_vectors`), the `fv-hglmm` model's
  vocabulary and build, its `fit_word_table` (ICA fitted on
  `--ica-sample` of them, the whole table projected) and a one-iteration
  HGLMM, then 1,000 Flickr8k dev captions encoded; the time of each stage
  and the process's peak memory (ru_maxrss) after it, beside the vectors'
  own size.
- `encoding`: `FisherVector` at the paper's sizes (K = 30, D = 300, an
  HGLMM with 30% Laplacian entries), batches of 128 captions of 30 words:
  captions per second, for several `component_block` values.
`--workers` sets the threads of `hglmm-fit`'s EM (default: the cores this
process may use); its report gives CPU and wall seconds, whose ratio is the
cores used (`encoding` gives that ratio for TensorFlow).
`--record FILE` also writes the reports to FILE at the end, with the
command, date, machine and versions (`common.records`).
"""

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from common import records
from common.errors import ArgumentParser, count, run_command

BENCHMARKS = ("em", "hglmm-fit", "word-table", "encoding")
POLICIES = ("gaussian", "hybrid")  # the EM modes timed: a GMM's and the HGLMM's
COMPONENT_BLOCKS = (1, 2, 4, 8, 30)  # FisherVector's, timed by `encoding`


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", choices=BENCHMARKS, default="em", help="what to time (default em)")
    parser.add_argument("--large", action="store_true",
                        help="em: also a random 300,000 x 300 sample (slow: more than 10 minutes here)")
    parser.add_argument("--workers", type=count,
                        help="hglmm-fit: the EM's threads (default: the cores this process may use)")
    parser.add_argument("--ica-sample", type=count, default=20_000,
                        help="word-table: the vectors ICA is fitted on (default 20,000; the paper's 300,000 "
                             "takes FastICA hours)")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_fisher_vectors", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    benchmark = {
        "em": lambda: fv_em_timings(large=args.large),
        "hglmm-fit": lambda: [hglmm_fit(workers=args.workers)],
        "word-table": lambda: [word_table(ica_sample=args.ica_sample)],
        "encoding": encoding_rates,
    }[args.benchmark]
    reports = []
    for report in benchmark():
        print(json.dumps(report), flush=True)  # one line per report, as each finishes
        reports.append(report)
    recording.write(reports)
    return 0


def fv_em_timings(components=30, iterations=10, large=False):
    """Yields, per data set, the EM time and final log-likelihood per sample: ours (Gaussian mode,
    `iterations` steps) and scikit-learn's (`iterations` steps from the same
    means, variances and weights), and our HGLMM iteration time, per data set."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    from data import splits, word_vectors
    from data.embedded import EMBEDDED_DATA, EMBEDDED_GLOVE_50D
    from data.tokenizer import tokenize_strings
    from models.fisher_vectors import mixtures

    vectors = word_vectors.load_word_vectors(EMBEDDED_GLOVE_50D)
    matrix = vectors.take(np.arange(len(vectors)))
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    captions = splits.load_split(EMBEDDED_DATA, "train").captions
    tokens = [vectors.key_to_index[t] for c in tokenize_strings(captions, "treebank") for t in c if t in vectors.key_to_index]
    rng = np.random.default_rng(0)
    data = {  # name: (data, iterations); the largest set gets fewer (times are also per iteration)
        "glove_vocabulary": (unit, iterations),
        "training_caption_tokens": (unit[tokens], iterations),
    }
    if large:
        data["random_300k_x_300"] = (rng.normal(size=(300_000, 300)) / np.sqrt(300), 2)
    for name, (x, steps) in data.items():
        x = np.asarray(x, np.float64)
        report = {"mixture": "+".join(POLICIES), "data": name, "rows": len(x), "dim": x.shape[1],
                  "components": components, "iterations": steps}
        start = mixtures.initial_mixture(x, components, "gaussian", np.random.default_rng(0))
        em = mixtures.EM(x)
        for policy in POLICIES:
            mixture = mixtures.initial_mixture(x, components, policy, np.random.default_rng(0))
            began = time.perf_counter()
            for _ in range(steps):
                mixture = em.maximisation(em.expectation(mixture)[0], policy)
            report[f"ours_{policy}_seconds"] = round(time.perf_counter() - began, 2)
            report[f"ours_{policy}_log_likelihood_per_sample"] = round(em.expectation(mixture)[1] / len(x), 4)
        reference = GaussianMixture(components, covariance_type="diag", max_iter=steps, tol=0,
                                    reg_covar=1e-5, weights_init=start.weights, means_init=start.loc,
                                    precisions_init=1 / start.scale**2)
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            reference.fit(x)
        report["sklearn_gaussian_seconds"] = round(time.perf_counter() - began, 2)
        report["sklearn_gaussian_log_likelihood_per_sample"] = round(float(reference.score(x)), 4)
        report["hglmm_vs_gmm_iteration_time"] = round(report["ours_hybrid_seconds"] / report["ours_gaussian_seconds"], 2)
        report["ours_hybrid_seconds_per_iteration"] = round(report["ours_hybrid_seconds"] / steps, 2)
        yield report


def synthetic_word_vectors(rows, dim=300, seed=0, centres=30, chunk=20_000):
    """float32 [rows, dim] unit vectors: independent Laplace coordinates
    (heavy-tailed, as ICA makes word vectors' dimensions) around `centres`
    random centres, made `chunk` rows at a time (memory: the result)."""
    rng = np.random.default_rng(seed)
    middle = rng.normal(scale=2.0, size=(centres, dim))
    x = np.empty((rows, dim), np.float32)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        block = middle[rng.integers(0, centres, size=n)] + rng.laplace(size=(n, dim))
        x[start : start + n] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return x


def hglmm_fit(rows=300_000, dim=300, components=30, iterations=10, workers=None):
    """The paper's HGLMM fit (`fit_mixture`, the model's settings) on
    synthetic vectors of GoogleNews' shape: its seconds (all of it; each
    iteration, from one iteration's report to the next), CPU seconds, final
    log-likelihood per sample, Laplacian fraction and peak memory."""
    from common import machine
    from models.fisher_vectors import mixtures

    x = synthetic_word_vectors(rows, dim)
    reported = []
    began, cpu = time.perf_counter(), time.process_time()
    mixture = mixtures.fit_mixture(x, components, "hybrid", iterations, workers=workers,
                                   callback=lambda i, m, ll: reported.append((time.perf_counter(), ll)))
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    ends = [began] + [end for end, _ in reported]
    return {"benchmark": "hglmm-fit", "rows": rows, "dim": dim, "components": components, "iterations": iterations,
            "workers": workers or machine.cores(), "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
            # the first includes sorting the data and the first E-step
            "iteration_seconds": [round(b - a, 1) for a, b in zip(ends, ends[1:])],
            "log_likelihood_per_sample": round(reported[-1][1] / rows, 4),
            "laplacian_fraction": round(float(mixture.laplacian.mean()), 4), "peak_rss_mb": _peak_rss_mb()}


def word_table(words=3_000_000, dim=300, ica_sample=20_000, captions=1000):
    """The `fv-hglmm` model's word table from a word2vec binary file of
    `words` synthetic vectors, as `train.py` makes it (see the module
    docstring): the seconds of each stage and the peak memory after it."""
    import tempfile

    import tensorflow as tf

    from data import splits, word_vectors
    from data.embedded import EMBEDDED_DATA, EMBEDDED_GLOVE_50D
    from data.image_features import ImageFeatures
    from models import registry
    from models.fisher_vectors.config import FVConfig

    seconds, memory = {}, {}
    stage_began = time.perf_counter()

    def stage(name):
        nonlocal stage_began
        seconds[name], memory[name] = round(time.perf_counter() - stage_began, 1), _peak_rss_mb()
        stage_began = time.perf_counter()

    known = word_vectors.load_word_vectors(EMBEDDED_GLOVE_50D).index_to_key
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vectors.bin"
        write_word2vec_binary(path, (known + [f"w{i}" for i in range(len(known), words)])[:words], dim)
        file_mb = path.stat().st_size / 2**20
        stage("write_file")
        vectors = word_vectors.load_word_vectors(path)
        stage("open_file")
        spec = registry.get("fv-hglmm")
        config = FVConfig(encoding="hglmm", word_dim=dim, ica_sample=ica_sample, em_iterations=1)
        vocabulary = spec.vocabulary(config, [], vectors)
        stage("vocabulary")
        dev = splits.load_split(EMBEDDED_DATA, "dev")
        model = spec.build_model(config, vocabulary, ImageFeatures("fc", dev.images.shape[1]))
        stage("model")
        model.set_word_vectors(vectors, seed=0)
        del vectors  # as train.py: the model keeps what it needs
        sample = model.fit_word_table(seed=0)
        stage("ica_and_table")
    model.fit_mixtures(sample, seed=0, writer=tf.summary.create_noop_writer())
    stage("hglmm_one_iteration")
    sentences = model.sentence_vectors(dev.captions[:captions])
    stage("encoding")
    return {"benchmark": "word-table", "words": words, "dim": dim, "vocabulary": len(vocabulary),
            "ica_sample": len(sample), "components": config.num_components, "captions": len(sentences),
            "seconds": seconds,  # the encoding's include tracing it (`encoding` times it alone)
            "vectors_mb": round(words * dim * 4 / 2**20, 1), "file_mb": round(file_mb, 1),
            "peak_rss_mb_after": memory, "peak_rss_mb": _peak_rss_mb()}


def write_word2vec_binary(path, words, dim, chunk=20_000):
    """A word2vec binary file of `words` and `synthetic_word_vectors`,
    written `chunk` vectors at a time (memory: one chunk)."""
    with open(path, "wb") as file:
        file.write(f"{len(words)} {dim}\n".encode())
        for start in range(0, len(words), chunk):
            block = synthetic_word_vectors(min(chunk, len(words) - start), dim, seed=start)
            file.write(b"".join(word.encode() + b" " + vector.tobytes()
                                for word, vector in zip(words[start : start + chunk], block.astype("<f4"))))


def encoding_rates(components=30, dim=300, batch=128, length=30, batches=10, blocks=COMPONENT_BLOCKS):
    """Yields, per `component_block`, FisherVector's captions per second
    (`batches` batches of `batch` captions of `length` words, after one to
    trace) and its CPU / wall seconds."""
    import tensorflow as tf

    from layers.fisher_vector import FisherVector
    from models.fisher_vectors.mixtures import Mixture

    rng = np.random.default_rng(0)
    mixture = Mixture(rng.dirichlet(np.ones(components)), rng.normal(scale=0.05, size=(components, dim)),
                      rng.uniform(0.03, 0.08, size=(components, dim)), rng.random((components, dim)) < 0.3)
    words = synthetic_word_vectors(batch * length, dim).reshape(batch, length, dim)
    mask = np.ones((batch, length), bool)
    for block in blocks:
        layer = FisherVector(components, dim, component_block=block)
        layer.set_mixture(mixture)
        encode = tf.function(lambda x, m, layer=layer: layer(x, m))
        encode(words, mask).numpy()
        began, cpu = time.perf_counter(), time.process_time()
        for _ in range(batches):
            encode(words, mask).numpy()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        yield {"benchmark": "encoding", "components": components, "dim": dim, "batch": batch, "words": length,
               "component_block": block, "captions_per_second": round(batch * batches / seconds, 1),
               "cpu_per_wall_second": round(cpu / seconds, 2)}


def _peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # KiB on Linux


if __name__ == "__main__":
    sys.exit(main())
