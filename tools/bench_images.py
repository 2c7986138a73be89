"""The speed of an export's image signature, as JSON: images/s of
`encode_image_bytes` (decoding, the recorded preprocessing, the backbone
and the model's image side) at each batch size, and the export's size.

    python -m tools.bench_images --saved-model runs/gru-quick/saved_model
    python -m tools.bench_images --saved-model runs/gru-quick/saved_model --record results/bench/images.json

The images are the JPEGs of `--images` (default: the 8 embedded Flickr8k
test images, `data/flickr8k_images_sample/`), repeated to fill a batch.
Each batch size is called once unmeasured (the first call loads and
optimises the graph), then `--repeats` times; the report gives the median
call. `--record FILE` also writes the reports to FILE, with the command,
date, machine and versions (`common.records`).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import records
from common.errors import ArgumentParser, InputError, count, run_command
from data.readers import JPEG_PNG_EXTENSIONS

SAMPLE_IMAGES = Path(__file__).resolve().parent.parent / "data" / "flickr8k_images_sample"


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saved-model", required=True, help="an export with encode_image_bytes (train.py)")
    parser.add_argument("--images", default=str(SAMPLE_IMAGES), help="a folder of JPEG or PNG files (default: %(default)s)")
    parser.add_argument("--batch-sizes", default="1,64", help="comma-separated batch sizes (default: %(default)s)")
    parser.add_argument("--repeats", type=count, default=5, help="measured calls per batch size (default: %(default)s)")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_images", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    try:
        batch_sizes = [count(size) for size in args.batch_sizes.split(",")]
    except argparse.ArgumentTypeError as error:
        raise InputError(f"--batch-sizes {args.batch_sizes}: {error}") from None
    folder = Path(args.images)
    if not folder.is_dir():
        raise InputError(f"--images {folder}: folder not found")
    images = [path.read_bytes() for path in sorted(folder.iterdir()) if path.suffix.lower() in JPEG_PNG_EXTENSIONS]
    if not images:
        raise InputError(f"--images {folder}: no JPEG or PNG files")
    saved_model = Path(args.saved_model)
    if not (saved_model / "saved_model.pb").is_file():
        raise InputError(f"--saved-model {saved_model}: not a SavedModel (no saved_model.pb)")
    reports = image_signature_speed(saved_model, images, batch_sizes, args.repeats)
    for report in reports:
        print(json.dumps(report, indent=2))
    recording.write(reports)
    return 0


def image_signature_speed(saved_model, images, batch_sizes, repeats):
    """One report per batch size: the median time of `repeats` calls of
    the export's `encode_image_bytes` on that many of `images` (encoded
    files, cycled), its images/s, and the export's size on disk."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model))
    if "encode_image_bytes" not in loaded.signatures:
        raise InputError(f"--saved-model {saved_model}: has no encode_image_bytes signature (its run records no "
                         "feature provenance: export it again with train.py --export-only --provenance FEATURES_DIR)")
    provenance = json.loads(loaded.image_provenance.numpy())
    size = sum(path.stat().st_size for path in saved_model.rglob("*") if path.is_file())
    reports = []
    for batch_size in batch_sizes:
        batch = tf.constant([images[i % len(images)] for i in range(batch_size)])
        loaded.encode_image_bytes(batch)  # loads and optimises the graph for this shape
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            loaded.encode_image_bytes(batch).numpy()
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        reports.append({
            "saved_model": records.portable_path(saved_model),
            "backbone": provenance["backbone"],
            "views": provenance["crops"],
            "batch": batch_size,
            "seconds_per_batch": round(seconds, 4),
            "images_per_second": round(batch_size / seconds, 1),
            "export_mb": round(size / 1e6, 1),
        })
    return reports


if __name__ == "__main__":
    sys.exit(main())
