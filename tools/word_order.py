"""Does a model's score depend on word order? Ma et al. 2015, Table 5.

    python -m tools.word_order --model-dir runs/mcnn-wd-quick --model-dir runs/mcnn-st-quick
    python -m tools.word_order --saved-model runs/mcnn-ens-quick/saved_model --json word_order.json

Two reports, one column per model:

1. Table 5's row: the scores of Flickr8k test image 1258913059_07c613f7ff.jpg
   with its caption (S0) and the paper's three random orders of its words
   (S1-S3; the paper prints lemmas, "three person sit ... paint like the
   union jack", given here in the captions' surface forms). One example.
2. The test-set-wide version: for every test caption, `--shuffles` random
   permutations of its words (a final "." kept in place) scored against its
   own image; the drop Delta = s(image, caption) - s(image, shuffled), its
   mean over captions with a bootstrap 95% confidence interval over images
   (a resample draws images and takes all their captions: one image's
   captions are not independent), the mean in units of the standard
   deviation of the true pairs' scores (the variants' score scales
   differ), and the fraction of shuffles scored lower.

A bag-of-words model scores every permutation the same (Delta = 0).

`--json FILE` also writes the results as a record (`common.records`: the
command, date, cores, CPU and load, and one report per model, its "model"
the directory or SavedModel given) that `python -m tools.report` renders.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from common import records
from common.errors import ArgumentParser, InputError, count, count_or_zero, run_command
from data import readers, splits
from data.embedded import EMBEDDED_DATA

TABLE5_IMAGE = "1258913059_07c613f7ff.jpg"
IMAGE_GROUP = 20
TABLE5_SENTENCES = (
    "Three people sit at an outdoor table in front of a building painted like the Union Jack .",
    "like union at in sit three jack the people a painted building table outdoor of front an .",
    "sit union a jack three like in of painted the people table outdoor building front at an .",
    "table sit three painted at a building of like the an people front outdoor jack union in .",
)


def shuffle_words(caption, rng):
    """A random order of the caption's words; a final "." stays last."""
    words = caption.split()
    end = words[-1:] if words and words[-1] == "." else []
    body = words[: len(words) - len(end)]
    return " ".join([body[i] for i in rng.permutation(len(body))] + end)


def word_order_drops(scorer, split, shuffles=3, seed=0):
    """Delta [n_captions, shuffles]: each caption's score with its image
    minus the scores of `shuffles` permutations of its words; and the true
    pairs' scores [n_captions]."""
    rng = np.random.default_rng(seed)
    shuffled = [shuffle_words(c, rng) for c in split.captions for _ in range(shuffles)]
    images = scorer.encode_images(split.images)
    texts = scorer.encode_texts(list(split.captions) + shuffled)
    n = len(split.captions)
    true_scores, shuffled_scores = np.empty(n), np.empty((n, shuffles))
    # Images are scored in groups against all their group's texts (the
    # scorers score all pairs), keeping each image's own texts.
    for first in range(0, len(split.images), IMAGE_GROUP):
        group = np.arange(first, min(first + IMAGE_GROUP, len(split.images)))
        captions = np.flatnonzero(np.isin(split.caption_image, group))
        rows = np.concatenate([captions, n + (captions[:, None] * shuffles + np.arange(shuffles)).ravel()])
        scores = scorer.similarity(images[group], texts[rows])
        own = scores[split.caption_image[captions] - first, :]  # [captions, rows]
        true_scores[captions] = own[np.arange(len(captions)), np.arange(len(captions))]
        shuffled = own[:, len(captions) :].reshape(len(captions), len(captions), shuffles)
        shuffled_scores[captions] = shuffled[np.arange(len(captions)), np.arange(len(captions))]
    return true_scores[:, None] - shuffled_scores, true_scores


def summarise(drops, true_scores, caption_image, bootstrap=2000, seed=0):
    """Mean drop over captions, its bootstrap 95% CI, the mean over the
    true scores' standard deviation, and the fraction of positive drops.

    The bootstrap resamples images, not captions: each resample draws as
    many images as there are, with replacement, and takes the mean drop
    over all the captions of the images drawn. Captions of one image share
    its scores' quirks, so resampling them as independent would give an
    interval too narrow.

    Args:
      drops: float [n_captions, shuffles], as `word_order_drops` gives.
      true_scores: float [n_captions].
      caption_image: int [n_captions], each caption's image.
    """
    per_caption = drops.mean(axis=1)
    images, caption_image = np.unique(np.asarray(caption_image), return_inverse=True)
    image_sums = np.bincount(caption_image, weights=per_caption, minlength=len(images))
    image_captions = np.bincount(caption_image, minlength=len(images))
    rng = np.random.default_rng(seed)
    means = np.empty(bootstrap)
    for b in range(bootstrap):
        drawn = rng.integers(0, len(images), len(images))
        means[b] = image_sums[drawn].sum() / image_captions[drawn].sum()
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "mean_drop": float(per_caption.mean()),
        "ci95": [float(low), float(high)],
        "drop_over_score_std": float(per_caption.mean() / true_scores.std()),
        "fraction_lower": float((drops > 0).mean()),
        "captions": int(drops.shape[0]),
        "images": len(images),
        "shuffles": int(drops.shape[1]),
    }


def table5_image(split):
    """The row of Table 5's image in `split`, its id compared as
    `data.readers.image_key` says (with or without `.jpg`, as collections
    name it); an `InputError` naming the split if it is not there."""
    image = readers.find_image(split.image_ids, TABLE5_IMAGE)
    if image is None:
        raise InputError(f"{split.source}: image {TABLE5_IMAGE} (Table 5's) is not in this split; "
                         "word_order needs the Flickr8k test split")
    return image


def table5_row(scorer, split):
    """The scores of Table 5's image with S0-S3."""
    image = table5_image(split)
    images = scorer.encode_images(split.images[image : image + 1])
    return scorer.similarity(images, scorer.encode_texts(list(TABLE5_SENTENCES)))[0].tolist()


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", action="append", default=[], help="a directory written by train.py (repeatable)")
    parser.add_argument("--saved-model", action="append", default=[], help="an exported SavedModel (repeatable)")
    parser.add_argument("--data", help="precomp or collections data folder (default: the model's, else the embedded "
                        "Flickr8k); its split must hold Table 5's image")
    parser.add_argument("--split", default="test")
    parser.add_argument("--shuffles", type=count, default=3, help="random word orders per caption")
    parser.add_argument("--bootstrap", type=count, default=2000, help="bootstrap resamples (of the images) for the CI")
    parser.add_argument("--seed", type=count_or_zero, default=0)
    parser.add_argument("--json", help="also write the results to this JSON file, with the command, date and "
                        "machine (a record `python -m tools.report` renders)")
    args = parser.parse_args(argv)
    if not args.model_dir and not args.saved_model:
        parser.error("give at least one --model-dir or --saved-model")
    return args


def main(argv=None):
    args = parse_args(argv)
    args.command = records.command_line("tools.word_order", argv, option="--json")
    return run_command(_run, args)


def _run(args):
    from engine import scoring  # Imported here: it loads TensorFlow.

    recording = records.Recording(args.json, args.command, option="--json")
    scorers = {directory: scoring.CheckpointScorer.from_model_dir(directory) for directory in args.model_dir}
    scorers.update({path: scoring.SavedModelScorer(path) for path in args.saved_model})
    # Every model's split is read and checked (Table 5's image in it)
    # before any scoring, which takes a while on a whole split.
    data = {}
    for name, scorer in scorers.items():
        data_root = args.data or scorer.data_path or EMBEDDED_DATA
        split = splits.load_split(data_root, args.split, scorer.image_features.kind)
        splits.check_image_dim(split, scorer.image_features.width,
                               splits.features_location(data_root, args.split, scorer.image_features.kind))
        table5_image(split)
        data[name] = split
    results = {}
    for name, scorer in scorers.items():
        split = data[name]
        drops, true_scores = word_order_drops(scorer, split, args.shuffles, args.seed)
        results[name] = {"table5": table5_row(scorer, split),
                         **summarise(drops, true_scores, split.caption_image, args.bootstrap, args.seed)}
    labels = [Path(name).name if Path(name).name != "saved_model" else Path(name).parent.name for name in results]
    width = max(12, *map(len, labels)) + 2

    def row(title, values):
        print(f"{title:<18}" + "".join(f"{value:>{width}}" for value in values))

    print(f"Table 5 (test image {TABLE5_IMAGE}): scores")
    row("", labels)
    for i, sentence in enumerate(TABLE5_SENTENCES):
        row(f"S{i}", [f"{r['table5'][i]:.3f}" for r in results.values()])
    print("\n".join(f"  S{i}: {sentence}" for i, sentence in enumerate(TABLE5_SENTENCES)))
    print(f"\nWhole {args.split} split: score drop when a caption's words are shuffled ({args.shuffles} orders each)")
    row("", labels)
    for title, key in (("mean drop", "mean_drop"), ("drop / score std", "drop_over_score_std"),
                       ("fraction lower", "fraction_lower")):
        row(title, [f"{r[key]:.3f}" for r in results.values()])
    row("95% CI of drop", [f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" for r in results.values()])
    recording.write([{"model": records.portable_path(name), **result} for name, result in results.items()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
