"""The Fisher-vector models' regularised CCA at the paper's sizes, timed, as JSON.

    python -m tools.bench_cca --rows 30000 --text-dim 18000 --image-dim 4096
    python -m tools.bench_cca --rows 30000 --text-dim 36000 --image-dim 4096 --record results/bench/cca-36000.json

Fits `models.fisher_vectors.cca.RegularisedCCA` on random paired features
(a shared 64-d signal plus noise, float32, generated block by block as a
model streams its encodings: never all in memory) and solves it for each
`--eta`. Reports the accumulation's time, each solve's, the top canonical
correlation of each, and the process's peak memory (ru_maxrss) beside the
estimate that was checked first: a size whose estimate exceeds the memory
the machine has available stops with an error before anything is
allocated. `--record FILE` also writes the report to FILE, with the
command, date, machine and versions (`common.records`).
"""

import argparse
import json
import sys
import time

import numpy as np

from common import records
from common.errors import ArgumentParser, InputError, count, run_command

SIGNAL_DIM = 64  # the random views' shared signal
MEMINFO = "/proc/meminfo"


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=lambda text: count(text, 2), required=True, help="paired training rows")
    parser.add_argument("--text-dim", type=count, required=True,
                        help="sentence vector size (the paper's GMM+HGLMM: 36000; one mixture: 18000)")
    parser.add_argument("--image-dim", type=count, default=4096, help="image feature size (VGG fc7: 4096)")
    parser.add_argument("--eta", type=float, nargs="+", default=[1e-2], help="ridges to solve for (one solve each)")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    if min(args.eta) < 0:
        parser.error("--eta: ridges must be non-negative")
    args.command = records.command_line("tools.bench_cca", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    report = cca_timing(args.rows, args.text_dim, args.image_dim, args.eta)
    print(json.dumps(report, indent=2))
    recording.write([report])
    return 0


def cca_timing(rows, text_dim, image_dim, etas, available=None):
    """Fits the CCA on `rows` random paired rows and solves it for each
    eta; an `InputError` first if the estimated peak memory exceeds
    `available` bytes (by default the machine's available memory)."""
    import resource

    from models.fisher_vectors import cca

    def peak_rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    rng = np.random.default_rng(0)
    mixing_x, mixing_y = (rng.standard_normal((SIGNAL_DIM, dim), np.float32) for dim in (text_dim, image_dim))
    # This process so far, the CCA's own arrays, and a float32 block of each view being generated.
    estimate = peak_rss() + cca.peak_bytes(text_dim, image_dim) + 8 * cca.BLOCK_ROWS * (text_dim + image_dim)
    available = available_memory() if available is None else available
    if available is not None and estimate > available:
        raise InputError(f"--rows {rows} --text-dim {text_dim} --image-dim {image_dim}: the CCA needs about "
                         f"{estimate / 2**30:.1f} GiB, more than the {available / 2**30:.1f} GiB available")

    def blocks():
        for start in range(0, rows, cca.BLOCK_ROWS):
            signal = rng.standard_normal((min(cca.BLOCK_ROWS, rows - start), SIGNAL_DIM), np.float32)
            yield tuple(signal @ mixing + rng.standard_normal((len(signal), mixing.shape[1]), np.float32)
                        for mixing in (mixing_x, mixing_y))

    began = time.perf_counter()
    solver = cca.RegularisedCCA.from_blocks(blocks())
    accumulate_seconds = time.perf_counter() - began
    solve_seconds, top_correlations = [], []
    for eta in etas:
        began = time.perf_counter()
        projection = solver.solve(eta)
        solve_seconds.append(round(time.perf_counter() - began, 1))
        top_correlations.append(round(float(projection.correlations[0]), 4))
        del projection  # one solution at a time, as a sweep that keeps only its best
    return {
        "rows": rows,
        "text_dim": text_dim,
        "image_dim": image_dim,
        "etas": list(etas),
        "seconds": round(accumulate_seconds + sum(solve_seconds), 1),
        "accumulate_seconds": round(accumulate_seconds, 1),
        "solve_seconds": solve_seconds,
        "top_correlations": top_correlations,
        "estimated_peak_mb": round(estimate / 2**20),
        "peak_rss_mb": round(peak_rss() / 2**20),
    }


def available_memory(path=MEMINFO):
    """The memory available to a new allocation without swapping (bytes,
    `MemAvailable` of /proc/meminfo), or None when the system does not say."""
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key == "MemAvailable":
                    return int(value.split()[0]) * 1024  # kB
    except OSError:
        pass
    return None


if __name__ == "__main__":
    sys.exit(main())
