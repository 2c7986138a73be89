"""Builds an index of a folder of images with an Apache Beam pipeline:
the same index as `python -m search index --images`, on any Beam runner.

    python -m search.beam --saved-model runs/gru-quick/saved_model --images photos/ --out photos.index \\
        --runner DirectRunner --direct_num_workers 2 --direct_running_mode multi_processing

Needs `pip install -r requirements-beam.txt` (Apache Beam pins versions of
protobuf and Pillow of its own, so it gets an environment of its own).
Every option this command does not know is a Beam pipeline option
(`--runner`, `--direct_num_workers`, a cluster runner's options;
docs/search.md). The folder, the model and --out are checked here before
the pipeline starts, as `index` checks them; the pipeline
(`search.beam_pipeline`) encodes and writes the shards, and this process
then completes the index (the approximate index, the manifest) and puts
it in place. A Beam build does not resume: it starts INDEX.partial anew.
"""

import argparse
import logging
import shutil
import sys

from common.errors import ArgumentParser, InputError, count, run_command
from search.store import IMAGE_BATCH, SHARD_ITEMS


def parse_args(argv):
    parser = ArgumentParser(prog="python -m search.beam", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saved-model", required=True, help="a SavedModel with the encode_image_bytes signature")
    parser.add_argument("--images", required=True, metavar="DIR", help="a folder of JPEG/PNG images (recursively)")
    parser.add_argument("--out", required=True, metavar="INDEX",
                        help="the index folder: new, or an index (replaced once the new one is complete)")
    parser.add_argument("--approximate", default="auto", choices=("auto", "always", "never"),
                        help="also build an approximate index (auto: from 100,000 items; docs/search.md)")
    parser.add_argument("--shard-items", type=count, default=SHARD_ITEMS, help="encodings per shard (about)")
    parser.add_argument("--batch-size", type=count, default=IMAGE_BATCH, help="images per call of the model")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--verbose", action="store_true", help="keep TensorFlow's start-up lines")
    args, args.pipeline_args = parser.parse_known_args(argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    from search import approximate, build, store
    from search.model import SearchModel

    try:
        from search import beam_pipeline
    except ImportError as error:
        raise InputError(f"python -m search.beam needs Apache Beam ({error}): "
                         "pip install -r requirements-beam.txt") from None
    if not args.verbose:  # the runner's and the workers' INFO lines
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    store.check_out(args.out)
    model = SearchModel(args.saved_model)
    if model.rerank_k is not None:
        raise InputError(f"--saved-model {args.saved_model}: a two-stage export; the pipeline writes one stage's "
                         "encodings, so index it with python -m search index")
    source = build.Source(model, images=args.images)
    approximate.wanted(args.approximate, len(source.ids), model.metric)
    staging = store.staging_dir(args.out)
    if staging.exists():  # an unfinished index (`check_out`): a Beam build starts it anew
        shutil.rmtree(staging)
    build.start_or_resume(staging, build.manifest_for(model, source), source)
    beam_pipeline.run_pipeline(model.path, source.folder, source.ids, staging, source.encoding_shape,
                               args.shard_items, args.batch_size, args.pipeline_args)
    manifest = store.finish(staging, args.out, lambda paths, items, finished: approximate.build_for_index(
        paths, items, finished, args.approximate))
    build.report(args.out, manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
