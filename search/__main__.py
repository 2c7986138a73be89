"""Search a collection of images (or captions) with an exported model.

    python -m search index --saved-model runs/gru-quick/saved_model --images photos/ --out photos.index
    python -m search query photos.index "a dog running on the beach" [--k 10] [--json] [--html page.html]
    python -m search index --saved-model runs/gru-quick/saved_model --captions captions.txt --out captions.index
    python -m search query captions.index --image photo.jpg

`index` encodes every JPEG/PNG under a folder (recursively; files that
cannot be read or decoded are listed and skipped), or every line of a
caption file, into an index folder: encoding shards written as they are
made (a killed run, started again, resumes), the items' paths, and the
model's fingerprint. `query` encodes the query with the same model and
prints the best --k items and their scores (or --json, or an --html page
of thumbnails). Exact search by default; an index of many items also gets
an approximate one (--approximate; docs/search.md). The Apache Beam
pipeline `python -m search.beam` builds the same index on a cluster.
"""

import argparse
import json
import sys

from common.errors import ArgumentParser, InputError, count, run_command
from common.files import check_file, check_output_file
from engine.arguments import check_saved_model
from search import collection, store


def parse_args(argv):
    parser = ArgumentParser(prog="python -m search", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="encode a folder of images or a caption file into an index")
    index.add_argument("--saved-model", required=True, help="a SavedModel exported by train.py")
    source = index.add_mutually_exclusive_group(required=True)
    source.add_argument("--images", metavar="DIR", help="a folder of JPEG/PNG images (searched recursively); "
                        "needs an export with the encode_image_bytes signature")
    source.add_argument("--captions", metavar="FILE", help="a text file of captions, one a line (for image queries)")
    index.add_argument("--out", required=True, metavar="INDEX",
                       help="the index folder: new, or an index (replaced once the new one is complete)")
    index.add_argument("--approximate", default="auto", choices=("auto", "always", "never"),
                       help="also build an approximate index (auto: from 100,000 items; docs/search.md)")
    query = commands.add_parser("query", help="the best items of an index for a text (or an image)")
    query.add_argument("index", metavar="INDEX", help="a folder written by `index`")
    query.add_argument("text", nargs="?", help="the query text (an index of images)")
    query.add_argument("--image", metavar="FILE", help="the query image, a JPEG/PNG (an index of captions)")
    query.add_argument("--k", type=count, default=10, help="results to show (default 10)")
    query.add_argument("--json", action="store_true", help="print the results as JSON")
    query.add_argument("--html", metavar="FILE", help="also write an HTML page of the results' thumbnails")
    query.add_argument("--saved-model", help="the index's model, if it has moved (its fingerprint must match)")
    query.add_argument("--exact", action="store_true", help="exact search even where there is an approximate index")
    query.add_argument("--ef-search", type=count, help="candidates the approximate index's graph search keeps "
                       "(default: the index's, 256; more: higher recall, slower)")
    for command in (index, query):
        command.add_argument("--quiet", action="store_true", help="no progress bars")
        command.add_argument("--verbose", action="store_true", help="keep TensorFlow's start-up lines")
    return parser.parse_args(argv)


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    return _index(args) if args.command == "index" else _query(args)


def _index(args):
    # What can be checked before TensorFlow loads, first.
    store.check_out(args.out)
    check_saved_model(args.saved_model)
    if args.images:
        collection.check_folder(args.images)
    else:
        check_file(args.captions)
    from search import build
    from search.model import SearchModel

    manifest = build.build_index(SearchModel(args.saved_model), args.out, args.images, args.captions,
                                 args.approximate)
    build.report(args.out, manifest)
    return 0


def _query(args):
    store.read_manifest(args.index)  # before TensorFlow loads: a mistyped index is refused at once
    if (args.text is None) == (args.image is None):
        raise InputError("give a query text (an index of images) or --image FILE (an index of captions)")
    if args.html:
        check_output_file(args.html, "--html")
    if args.image:
        check_file(args.image)
    if args.text is not None:
        _check_query_length(args.text)
    from search.index import Index

    index = Index.open(args.index, args.saved_model)
    wanted = "images" if args.text is not None else "captions"
    if index.kind != wanted:
        raise InputError(f"{args.index}: an index of {index.kind}; "
                         f"{'query it with --image FILE' if index.kind == 'captions' else 'query it with a text'}")
    query = args.text if args.text is not None else args.image
    hits = index.search(query, args.k, exact=args.exact, ef_search=args.ef_search)
    if args.json:
        print(json.dumps({"index": args.index, "query": query,
                          "results": [{"rank": rank, "id": hit.id, "score": hit.score, "item": hit.item}
                                      for rank, hit in enumerate(hits, start=1)]}, indent=1))
    else:
        for rank, hit in enumerate(hits, start=1):
            print(f"{rank:>3}  {hit.score:8.4f}  {hit.item}")
    if args.html:
        from search.page import write_page

        write_page(args.html, args.index, query, hits, index.kind)
    return 0


def _check_query_length(text):
    """Refuses, before the index and its model load, a query text that no
    model of the zoo takes: more than `MAX_INPUT_TOKENS` tokens under each
    of the zoo's tokenizers (the index does not record which its model
    uses; a text within the limit under one of them is left to the model)."""
    import tensorflow as tf

    from data.tokenizer import TOKENIZERS
    from layers.text_vectorizer import MAX_INPUT_TOKENS

    tokens = min(int(tokenize(tf.constant([text])).row_lengths()[0]) for tokenize in TOKENIZERS.values())
    if tokens > MAX_INPUT_TOKENS:
        raise InputError(f"the query text has {tokens:,} tokens; the zoo's models take at most {MAX_INPUT_TOKENS}")


if __name__ == "__main__":
    sys.exit(main())
