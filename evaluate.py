"""Evaluates a trained model or an exported SavedModel on a data split.

    python evaluate.py --model-dir DIR [--split test] [--protocol full]
    python evaluate.py --saved-model DIR/saved_model [--data DIR]
    python evaluate.py --model-dir DIR --set model.similarity=dot   # an evaluation-time ablation

Both paths run the same protocol: encode every image and every caption once,
then score every pair once, block by block, and rank in both directions.

Protocols:
  full     the whole split (Flickr8k/30k's 1K test; COCO's 5K test).
  5fold1k  COCO's 1K protocol: the split cut into folds of 1000 images,
           metrics averaged over the folds.
"""

import argparse
import json
import sys

import numpy as np

import metrics
import progress
from config import write_json_atomically
from data.errors import InputError, count, run_command

PROTOCOLS = ("full", "5fold1k")
FOLD_IMAGES = 1000
IMAGE_BLOCK = 128  # small enough for a progress bar of a pairwise model's long scoring
CAPTION_BLOCK = 2048


def rank_all(similarity, image_encodings, text_encodings, caption_image):
    """Both directions' ranks and the images' average precisions.

    The similarity matrix is computed once, one block of images at a time
    (a pairwise model's `similarity` runs a network on every pair: scoring
    it again for the other direction would double the cost); image->text
    ranks are taken from each block, text->image ranks from the assembled
    matrix, one block of captions at a time. Memory: the n_images x
    n_captions matrix (20 MB for a 1K test, 500 MB for COCO's 5K x 25K) plus
    one block.

    Args:
      similarity: `(image_encodings, text_encodings) -> [n_i, n_t]` array.
      image_encodings, text_encodings: encodings of a whole split (or fold).
      caption_image: int [n_captions].
    """
    n_images, n_captions = len(image_encodings), len(text_encodings)
    sims = None
    i2t, i2t_ap = [], []
    for a in progress.bar(range(0, n_images, IMAGE_BLOCK), desc=f"scoring {IMAGE_BLOCK}-image blocks", unit="block"):
        block = np.asarray(similarity(image_encodings[a : a + IMAGE_BLOCK], text_encodings))
        if sims is None:
            sims = np.empty((n_images, n_captions), block.dtype)
        sims[a : a + len(block)] = block
        rows = np.arange(a, a + len(block))
        i2t.append(metrics.image_annotation_ranks(block, caption_image, rows))
        i2t_ap.append(metrics.image_annotation_average_precision(block, caption_image, rows))
    t2i = [
        metrics.image_retrieval_ranks(sims[:, a : a + CAPTION_BLOCK], caption_image[a : a + CAPTION_BLOCK])
        for a in range(0, n_captions, CAPTION_BLOCK)
    ]
    return np.concatenate(i2t), np.concatenate(t2i), np.concatenate(i2t_ap)


def sentence_similarity_mean_rank(similarity, text_encodings, caption_image):
    """Mean rank of the sentence-similarity task (Klein et al. 2015): each
    caption against all others under the model's own similarity, blocks of
    query captions at a time."""
    ranks = [
        metrics.sentence_similarity_ranks(
            similarity(text_encodings[a : a + CAPTION_BLOCK], text_encodings), caption_image,
            np.arange(a, min(a + CAPTION_BLOCK, len(text_encodings))),
        )
        for a in range(0, len(text_encodings), CAPTION_BLOCK)
    ]
    return float(np.mean(np.concatenate(ranks)))


def evaluate_encodings(similarity, image_encodings, text_encodings, caption_image, protocol="full",
                       sentence_similarity=True):
    """The metric dictionary of encoded images and captions under a protocol.

    With `sentence_similarity` (for a model whose images and captions share
    one space, `RetrievalModel.joint_space`: every model but the pairwise
    m-CNN), also `t2t_meanr`, the mean rank of the sentence-similarity task
    under the model's own similarity.
    """
    caption_image = np.asarray(caption_image)
    if protocol == "full":
        result = metrics.metrics_from_ranks(*rank_all(similarity, image_encodings, text_encodings, caption_image))
        if sentence_similarity:
            result["t2t_meanr"] = sentence_similarity_mean_rank(similarity, text_encodings, caption_image)
        return result
    if protocol != "5fold1k":
        raise InputError(f"--protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    n_images = len(image_encodings)
    if n_images < 2 * FOLD_IMAGES or n_images % FOLD_IMAGES:
        raise InputError(
            f"--protocol 5fold1k needs a multiple of {FOLD_IMAGES} images (at least two folds); the split has {n_images}"
        )
    results = []
    for start in range(0, n_images, FOLD_IMAGES):
        in_fold = (caption_image >= start) & (caption_image < start + FOLD_IMAGES)
        fold_texts, fold_captions = text_encodings[in_fold], caption_image[in_fold] - start
        ranks = rank_all(similarity, image_encodings[start : start + FOLD_IMAGES], fold_texts, fold_captions)
        results.append(metrics.metrics_from_ranks(*ranks))
        if sentence_similarity:
            results[-1]["t2t_meanr"] = sentence_similarity_mean_rank(similarity, fold_texts, fold_captions)
    return metrics.average_metrics(results)


def format_table(result):
    """A two-row text table of the metrics, as the papers print them."""
    header = f"{'':6}{'R@1':>8}{'R@5':>8}{'R@10':>8}{'medr':>8}{'meanr':>8}"
    rows = [header]
    for direction, label in (("i2t", "i2t"), ("t2i", "t2i")):
        values = "".join(
            f"{result[f'{direction}_{name}']:8.1f}" for name in ("r1", "r5", "r10", "medr", "meanr")
        )
        rows.append(f"{label:6}{values}")
    rows.append(f"rsum {result['rsum']:.1f}   i2t mAP {result['i2t_map']:.3f}   i2t MIR {result['i2t_mir']:.3f}"
                + (f"   sentence similarity mean rank {result['t2t_meanr']:.1f}" if "t2t_meanr" in result else ""))
    return "\n".join(rows)


def add_model_and_split_arguments(parser):
    """The arguments that choose a trained model and a split of data (see
    `load_model_and_split`)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="a directory written by train.py (uses its best checkpoint)")
    source.add_argument("--saved-model", help="a SavedModel exported by train.py")
    parser.add_argument("--data", help="precomp data folder (default: the model's training data, else the embedded Flickr8k)")
    parser.add_argument("--image-features", help="which {split}_<name>.npy holds the image features (default: the model's)")
    parser.add_argument("--split", help="the split to use (default: the model's test split, else 'test')")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (there are none when stderr is not a terminal)")


def load_model_and_split(args, overrides=()):
    """(scorer, split) of the arguments of `add_model_and_split_arguments`;
    `overrides` are `--set` model settings (a model directory only)."""
    import inference  # Imported here: it loads TensorFlow.
    from config import EMBEDDED_DATA
    from data import readers

    if args.model_dir:
        scorer = inference.CheckpointScorer.from_model_dir(args.model_dir, overrides)
    elif overrides:
        raise InputError("--set needs --model-dir: a SavedModel's settings are fixed")
    else:
        scorer = inference.SavedModelScorer(args.saved_model)
    data_root = args.data or scorer.data_path or EMBEDDED_DATA
    image_features = args.image_features or scorer.image_features
    split_name = args.split or scorer.test_split
    split = readers.load_split(data_root, split_name, image_features)
    inference.check_image_dim(split, scorer.image_dim, f"{data_root} ({split_name}, {image_features})")
    return scorer, split


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_and_split_arguments(parser)
    parser.add_argument("--protocol", default="full", choices=PROTOCOLS)
    parser.add_argument("--batch-size", type=count, default=256)
    parser.add_argument("--json", help="also write the metrics to this JSON file")
    parser.add_argument("--projector", metavar="DIR",
                        help="also write the split's image and caption encodings for TensorBoard's projector "
                        "(tensorboard --logdir DIR); a new or empty directory, or one written by --projector")
    parser.add_argument("--images", metavar="DIR",
                        help="with --projector: a folder of the split's images by file name, for a sprite")
    parser.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE",
                        help="with --model-dir: change a model setting that needs no retraining, "
                        "e.g. model.similarity=dot (repeatable)")
    return parser.parse_args(argv)


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    import embedding_projector
    import inference  # Imported here: it loads TensorFlow.
    from data import readers

    if args.images and not args.projector:
        raise InputError("--images is for the --projector sprite; add --projector DIR")
    if args.json:
        readers.check_output_file(args.json, "--json")
    if args.projector:
        embedding_projector.check_directory(args.projector)
    scorer, split = load_model_and_split(args, args.set)
    projector = args.projector
    if projector and not scorer.joint_space:
        print("--projector skipped: the model scores image-caption pairs with a joint network, so its image "
              "and caption encodings are not one space", file=sys.stderr)
        projector = None
    if projector and args.images:
        readers.check_image_files(args.images, split.image_ids)
    encodings = inference.encode_split(scorer, split, args.batch_size)
    result = inference.score_split(scorer, split, args.protocol, args.batch_size, encodings)
    print(f"{args.split or scorer.test_split} split, protocol {args.protocol}:")
    print(format_table(result))
    if args.json:
        write_json_atomically(args.json, json.dumps(result, indent=2, sort_keys=True) + "\n")
    if projector:
        embedding_projector.write_projector(projector, *encodings, split, args.images)
        print(f"projector: tensorboard --logdir {projector}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
