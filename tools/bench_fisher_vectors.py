"""The Fisher vectors' mixture EM (Klein et al. 2015), timed, as JSON lines.

    python -m tools.bench_fisher_vectors
    python -m tools.bench_fisher_vectors --large
    python -m tools.bench_fisher_vectors --record results/bench_fisher_vectors.json

Times the zoo's EM (`models/fisher_vectors/mixtures.py`) in its Gaussian
mode against scikit-learn's `GaussianMixture` from the same initial means,
and an HGLMM iteration against a GMM iteration of the same code, on the
GloVe-50 vocabulary (7,965 vectors), the training captions' tokens (and
with `--large` a random 300,000 x 300 sample, 2 iterations). One JSON line
per data set, printed as each finishes; its "mixture" names the mixtures
timed ("gaussian+hybrid"). `--record FILE` also writes them to FILE at the
end, with the command, date, machine and versions (`tools.records`).
"""

import argparse
import json
import sys
import time

import numpy as np

from common.errors import run_command
from tools import records

POLICIES = ("gaussian", "hybrid")  # the EM modes timed: a GMM's and the HGLMM's


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true",
                        help="also a random 300,000 x 300 sample (slow: more than 10 minutes here)")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_fisher_vectors", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    reports = []
    for report in fv_em_timings(large=args.large):
        print(json.dumps(report), flush=True)  # one line per data set, as each finishes
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
    unit = vectors.vectors / np.linalg.norm(vectors.vectors, axis=1, keepdims=True)
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
        for policy in POLICIES:
            mixture = mixtures.initial_mixture(x, components, policy, np.random.default_rng(0))
            began = time.perf_counter()
            for _ in range(steps):
                mixture, _ = mixtures.em_step(x, mixture, policy)
            report[f"ours_{policy}_seconds"] = round(time.perf_counter() - began, 2)
            report[f"ours_{policy}_log_likelihood_per_sample"] = round(mixture.log_likelihood(x) / len(x), 4)
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


if __name__ == "__main__":
    sys.exit(main())
