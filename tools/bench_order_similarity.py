"""An evaluation under the order-violation similarity (Vendrov et al.'s
order embeddings), as JSON: its time and the process's peak memory.

    python -m tools.bench_order_similarity --images 5000 --dim 1024
    python -m tools.bench_order_similarity --images 1000 --record results/bench_order_similarity.json

Ranks N random non-negative unit image embeddings against 5N caption
embeddings (the 5K x 25K COCO evaluation for N = 5000) block by block, as
the evaluation of a trained model does (`engine.evaluation`). The report's
"similarity" is "order_violation". `--record FILE` also writes it to FILE,
with the command, date, machine and versions (`common.records`).
"""

import argparse
import json
import sys
import time

import numpy as np

from common import records
from common.errors import ArgumentParser, count, run_command


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=count, required=True, metavar="N",
                        help="images to rank against 5N captions")
    parser.add_argument("--dim", type=count, default=1024, help="embedding size")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_order_similarity", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    report = order_similarity_evaluation(args.images, args.dim)
    print(json.dumps(report, indent=2))
    recording.write([report])
    return 0


def order_similarity_evaluation(n_images, dim):
    """Ranks n_images x 5 n_images random non-negative unit embeddings by
    order-violation similarity, block by block as `engine.evaluation` does."""
    import resource

    import tensorflow as tf

    from engine import evaluation
    from layers.order_violation_similarity import OrderViolationSimilarity

    rng = np.random.default_rng(0)

    def unit(n):
        x = np.abs(rng.normal(size=(n, dim))).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    images, texts = unit(n_images), unit(5 * n_images)
    similarity = tf.function(OrderViolationSimilarity())
    start = time.perf_counter()
    metrics = evaluation.evaluate_encodings(
        lambda i, t: similarity(i, t).numpy(), images, texts, np.repeat(np.arange(n_images), 5)
    )
    return {
        "similarity": "order_violation",
        "images": n_images,
        "captions": 5 * n_images,
        "dim": dim,
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rsum_of_random_embeddings": round(metrics["rsum"], 2),
    }


if __name__ == "__main__":
    sys.exit(main())
