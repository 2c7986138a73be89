"""What a model retrieves, as an HTML page: the top-k captions of some test
images and the top-k images of some test captions.

    python -m tools.show_retrievals --model-dir runs/gru-quick \\
        --images data/flickr8k_images_sample --out retrievals.html
    python -m tools.show_retrievals --saved-model runs/gru-quick/saved_model --out retrievals.html

Queries are drawn at random (`--seed`) from the evaluated split (the
model's test split by default), `--queries` of each kind. Every retrieved
caption and image is marked as a match when it belongs to the query in the
data set. Retrieval scores every query against the whole split with the
model's own similarity, as evaluation does; a two-stage run or export
(`--model rerank`) ranks in two stages, as its evaluation does, and shows
the scores its SavedModel's `score` gives (docs/rerank.md).

With `--images DIR` (a folder of the split's images; each image id is
found as `data.readers.image_file` says: ids with sub-folders such as
COCO's `val2014/COCO_val2014_...jpg`, and ids without an extension, as
collections name images) the page shows the pictures, copied next to it
into `<page>_files/` so the page is self-contained. The folder may hold
only some of the split's images (e.g. the 8 embedded Flickr8k test JPEGs
of `data/flickr8k_images_sample`): each image it lacks is a grey box
naming the image, the command says how many it found, and queries prefer
pictures: image queries are drawn among the images found first (the others
only when there are fewer than `--queries`), caption queries among the
captions whose own image was found first. A folder holding none of the
split's images is an error (the wrong folder). Without `--images`, image
file names stand in for the pictures.

The command ends with one line: the page written, and how many queries of
each kind found a match in their top k (`--json`: as a JSON object).
"""

import argparse
import html
import json
import shutil
import sys
import urllib.parse
from pathlib import Path

import numpy as np

from common import reranking
from common.errors import ArgumentParser, count, count_or_zero, run_command
from common.files import check_output_file
from data.readers import find_image_files, image_file
from engine.arguments import add_model_and_split_arguments, load_model_and_split


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_and_split_arguments(parser)
    parser.add_argument("--images", metavar="DIR",
                        help="folder of the split's images, by image id (e.g. JPEGs); it may hold only some of them: "
                        "the others are grey boxes, and queries are drawn among those with a picture first")
    parser.add_argument("--queries", type=count, default=8, help="image queries and caption queries, each (>= 1)")
    parser.add_argument("--k", type=count, default=5, help="results per query (>= 1)")
    parser.add_argument("--seed", type=count_or_zero, default=0,
                        help="picks the queries (>= 0), among those with a picture first when --images is given")
    parser.add_argument("--out", required=True, help="HTML file to write")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object (the page, the queries of each kind and how many "
                        "of them found a match) instead of a sentence")
    return parser.parse_args(argv)


def choose_queries(rng, preferred, n):
    """`n` indices of the items `preferred` flags (fewer when there are
    fewer items), drawn at random without replacement among the preferred
    items first, then among the others; sorted."""
    preferred = np.asarray(preferred, bool)
    chosen = []
    for pool in (np.flatnonzero(preferred), np.flatnonzero(~preferred)):
        wanted = min(n - len(chosen), len(pool))
        if wanted:
            chosen += rng.choice(pool, wanted, replace=False).tolist()
    return sorted(chosen)


def retrieve(scorer, split, image_queries, caption_queries, k, batch_size=256):
    """Top-k retrievals of the given queries over the whole split; a
    two-stage model's (`scorer.two_stage`) ranked in two stages, as its
    evaluation ranks, with the scores its SavedModel's `score` gives
    (`common.reranking.two_stage_ranking`).

    Returns:
      (for each image query, [(caption index, score)] best first;
       for each caption query, [(image index, score)] best first).
    """
    image_encodings = scorer.encode_images(split.images, batch_size)
    text_encodings = scorer.encode_texts(split.captions, batch_size)
    images, texts = image_encodings[image_queries], text_encodings[caption_queries]
    if scorer.two_stage is not None:
        return (_two_stage_top(scorer.two_stage, images, text_encodings, k, queries_are_images=True),
                _two_stage_top(scorer.two_stage, texts, image_encodings, k, queries_are_images=False))
    i2t = scorer.similarity(images, text_encodings)  # [queries, captions]
    t2i = scorer.similarity(image_encodings, texts).T  # [queries, images]
    return _top(i2t, k), _top(t2i, k)


def _two_stage_top(two_stage, queries, candidates, k, queries_are_images):
    """`_top` of a two-stage model (an `engine.evaluation.TwoStage`): each
    query's list scored by the second stage, then the tail."""
    def oriented(query_encodings, candidate_encodings):
        return ((query_encodings, candidate_encodings) if queries_are_images else
                (candidate_encodings, query_encodings))

    first_stage, second_stage = two_stage.stage_encodings(*oriented(queries, candidates))
    first = np.asarray(two_stage.propose(*first_stage))
    order = reranking.first_stage_order(first if queries_are_images else first.T)
    listed = order[:, : min(two_stage.k, len(candidates))]
    query_rows = np.repeat(np.arange(len(queries)), listed.shape[1])
    second = np.asarray(two_stage.score_pairs(*second_stage, *oriented(query_rows, listed.ravel()))).reshape(listed.shape)
    ranking, scores = reranking.two_stage_ranking(order, second)
    return [[(int(j), float(score)) for j, score in zip(row[:k], row_scores[:k])]
            for row, row_scores in zip(ranking, scores)]


def _top(scores, k):
    # Stable sort on the negated scores: ties keep data order, as the
    # evaluation's ranks do.
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[(int(j), float(row[j])) for j in best] for row, best in zip(scores, order)]


def write_page(path, split, image_queries, caption_queries, i2t, t2i, title, images_dir=None):
    """Writes the HTML page (atomically), copying the shown images next to
    it, into `<page>_files/` (their paths under `images_dir` kept), when
    `images_dir` is given; each image is found by `data.readers.image_file`,
    and one the folder lacks is a grey box naming it."""
    path = Path(path)
    files = path.with_name(path.stem + "_files")
    shown = sorted(set(image_queries) | {j for results in t2i for j, _ in results})
    sources = {}
    if images_dir is not None:
        images_dir = Path(images_dir)
        for image in shown:
            source = image_file(images_dir, split.image_ids[image])
            if source is not None:
                sources[image] = source.relative_to(images_dir)
        for relative in sources.values():
            (files / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(images_dir / relative, files / relative)

    def picture(image, css_class):
        name = html.escape(split.image_ids[image])
        if images_dir is None:
            return f'<div class="{css_class} missing-image">{name}</div>'
        if image not in sources:
            return (f'<div class="{css_class} missing-image not-found" title="{name}">'
                    f'{name}<br>not in {html.escape(str(images_dir))}</div>')
        src = urllib.parse.quote(f"{files.name}/{sources[image].as_posix()}")
        return f'<img class="{css_class}" src="{html.escape(src)}" alt="{name}" title="{name}">'

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        (f"<p>{len(split.images)} images and {len(split.captions)} captions of {html.escape(split.captions_file)}; "
         "matches (the query's own caption or image) are marked ✓.</p>"),
        "<h2>Image → captions</h2>",
    ]
    for query, results in zip(image_queries, i2t):
        parts.append(f'<section class="image-query" data-image="{query}">{picture(query, "query")}<ol>')
        for caption, score in results:
            match = int(split.caption_image[caption] == query)
            parts.append(
                f'<li class="result{" match" if match else ""}" data-caption="{caption}" data-score="{score:.6g}" '
                f'data-match="{match}">{"✓ " if match else ""}{html.escape(split.captions[caption])} '
                f'<span class="score">{score:.3f}</span></li>'
            )
        parts.append("</ol></section>")
    parts.append("<h2>Caption → images</h2>")
    for query, results in zip(caption_queries, t2i):
        owner = int(split.caption_image[query])
        parts.append(f'<section class="caption-query" data-caption="{query}">'
                     f'<p class="query">{html.escape(split.captions[query])}</p><div class="results">')
        for image, score in results:
            match = int(image == owner)
            parts.append(
                f'<figure class="result{" match" if match else ""}" data-image="{image}" data-score="{score:.6g}" '
                f'data-match="{match}">{picture(image, "thumbnail")}'
                f'<figcaption>{"✓ " if match else ""}{score:.3f}</figcaption></figure>'
            )
        parts.append("</div></section>")
    parts.append("</body></html>\n")
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(parts), encoding="utf-8")
    partial.replace(path)


_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:80em}"
    "section{display:flex;gap:1em;align-items:flex-start;border-top:1px solid #ddd;padding:.8em 0}"
    "img.query{width:180px;height:180px;object-fit:cover}"
    "img.thumbnail{width:140px;height:140px;object-fit:cover}"
    ".missing-image{box-sizing:border-box;width:140px;height:140px;padding:.4em;background:#ddd;"
    "font-size:80%;color:#555;word-break:break-all}"
    "div.query.missing-image{width:180px;height:180px;flex:none}"
    ".caption-query{flex-direction:column}.results{display:flex;gap:.6em}"
    "figure{margin:0;text-align:center}li{margin:.2em 0}"
    ".match{color:#0a6b0a;font-weight:bold}.score{color:#888;font-size:80%}"
)


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    out = Path(args.out)
    check_output_file(out, "--out")

    scorer, split = load_model_and_split(args)
    name = Path(args.model_dir or args.saved_model).name
    title = f"{name}: what the model retrieves"
    has_picture = np.ones(len(split.images), bool)
    if args.images:
        has_picture = np.array([file is not None for file in find_image_files(args.images, split.image_ids)])
        found = int(has_picture.sum())
        others = "" if found == len(has_picture) else "; the others are shown as placeholders"
        print(f"{found} of {len(has_picture)} {args.split or scorer.test_split} images found in {args.images}{others}",
              file=sys.stderr)
    # Queries with a picture first, so that a folder of a few of the
    # split's images still shows pictures; with all found, the same draw as
    # from the whole split.
    rng = np.random.default_rng(args.seed)
    image_queries = choose_queries(rng, has_picture, args.queries)
    caption_queries = choose_queries(rng, has_picture[split.caption_image], args.queries)
    i2t, t2i = retrieve(scorer, split, image_queries, caption_queries, min(args.k, len(split.captions)))
    write_page(out, split, image_queries, caption_queries, i2t, t2i, title, args.images)
    summary = {"page": str(out), "image_queries": len(image_queries), "caption_queries": len(caption_queries),
               "image_queries_with_a_match": sum(any(split.caption_image[c] == q for c, _ in r)
                                                 for q, r in zip(image_queries, i2t)),
               "caption_queries_with_a_match": sum(any(i == split.caption_image[q] for i, _ in r)
                                                   for q, r in zip(caption_queries, t2i))}
    print(json.dumps(summary) if args.json else summary_sentence(summary, min(args.k, len(split.captions))))
    return 0


def summary_sentence(summary, k):
    """The summary as one line: the page, and how many queries of each
    kind found a match (their own caption or image) in their top k."""
    return (f"wrote {summary['page']}: {summary['image_queries_with_a_match']} of {summary['image_queries']} image "
            f"queries have one of their captions in their top {k}, {summary['caption_queries_with_a_match']} of "
            f"{summary['caption_queries']} caption queries their image")


if __name__ == "__main__":
    sys.exit(main())
