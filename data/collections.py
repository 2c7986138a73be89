"""Datasets as collections in the bigfile layout (images or videos).

The layout of Word2VisualVec and of the video retrieval code that followed
it (dual encoding, W2VV++), one folder per collection (split):

    <root>/<collection>/FeatureData/<feature>/{shape.txt,id.txt,feature.bin}
                                             [video2frames.txt]
    <root>/<collection>/TextData/<collection>.caption.txt

- Caption lines are `<caption id> <caption>`: the id is everything before
  the first whitespace, the item (image or video) is the id before its
  first `#` (`video7#enc#3`, `1000268201_693b08cb0e.jpg#0`), without a
  `.jpg`/`.mp4`-style extension. An item may have any number of captions
  (MSVD about 40, MSR-VTT 20, a TrecVid set 1).
- Features are per item (an id per image or video), or per frame: the
  frames of a video are listed by `video2frames.txt` (a JSON object or the
  Python dict literal dual encoding writes, parsed as a literal, never
  executed), or else are the ids `<video>_<frame number>`. A video's
  feature is the mean of its frames' features (Dong et al. 2018,
  Sec. III-D).

Training on MSR-VTT in dual encoding's layout, for example:

    python train.py --model w2vv --data VisualSearch \\
        --set data.train_split=msrvtt10ktrain --set data.dev_split=msrvtt10kval \\
        --set data.test_split=msrvtt10ktest \\
        --set data.image_features=resnet-152-img1k-flatten0_outputos

`python -m data.collections --precomp DIR --out DIR` writes a precomp
folder (e.g. the embedded Flickr8k) in this layout (`precomp_to_collections`):
every input is checked before anything is written, the collections are
written into a staging folder beside `--out` and renamed into place at
the end, so an error or an interruption leaves `--out` as it was.
"""

import ast
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from common import files
from common.errors import ArgumentParser, InputError, run_command
from data import readers
from data.bigfile import BigFile, write_bigfile
from data.image_features import ONE_LAYER

VIDEO_EXTENSIONS = (".mp4", ".avi", ".webm", ".mkv")
ITEM_EXTENSIONS = readers.IMAGE_EXTENSIONS + VIDEO_EXTENSIONS


def caption_file(root, collection):
    return Path(root) / collection / "TextData" / f"{collection}.caption.txt"


def load_collection(root, collection, feature):
    """Reads one collection as a `RetrievalSplit`, items in the order of
    their first caption, each item's feature pooled from its frames if
    the feature file holds frames."""
    path = caption_file(root, collection)
    captions, caption_items = [], []
    for number, line in enumerate(files.read_lines(path, "caption line"), start=1):
        fields = line.split(maxsplit=1)
        if len(fields) != 2:
            raise InputError(f"{path}: line {number} is not '<caption id> <caption>'")
        caption_items.append(item_id(fields[0]))
        captions.append(fields[1])
    items = list(dict.fromkeys(caption_items))
    index = {item: k for k, item in enumerate(items)}
    features = BigFile(Path(root) / collection / "FeatureData" / feature)
    return readers.RetrievalSplit(
        images=item_features(features, items),
        captions=captions,
        caption_image=np.array([index[item] for item in caption_items], dtype=np.int64),
        image_ids=items,
        source=str(Path(root) / collection),
        captions_file=str(path),
    )


def item_id(caption_id):
    """The image or video a caption id names: before the first `#`, without
    an image or video file extension (for images, `readers.image_key`: an
    item is the image id by which `readers.image_file` finds its file)."""
    item = readers.image_key(caption_id.split("#", 1)[0])
    stem, dot, extension = item.rpartition(".")
    return stem if dot and f".{extension.lower()}" in VIDEO_EXTENSIONS else item


def item_features(features, items):
    """float32 [len(items), D]: each item's row, or the mean of its frames'."""
    if all(item in features for item in items):
        return features.read(items)
    frames = read_video2frames(features.path / "video2frames.txt") or frames_by_video(features.ids)
    pooled = np.empty((len(items), features.dim), np.float32)
    for row, item in enumerate(items):
        if item in frames:
            lost = next((frame for frame in frames[item] if frame not in features), None)
            if lost is not None:
                raise InputError(f"{features.path}: no features for frame {lost!r} of video {item!r}")
            pooled[row] = features.read(frames[item]).mean(axis=0)
        elif item in features:
            pooled[row] = features.read([item])[0]
        else:
            raise InputError(
                f"{features.path}: no features for {item!r} (neither the id nor frames '{item}_<n>' or in video2frames.txt)"
            )
    return pooled


def frames_by_video(frame_ids):
    """{video: its frame ids sorted by frame number} for ids `<video>_<n>`
    (`n` an integer); other ids are left out."""
    videos = {}
    for frame in frame_ids:
        video, _, number = frame.rpartition("_")
        if video and number.isascii() and number.isdigit():
            videos.setdefault(video, []).append((int(number), frame))
    return {video: [frame for _, frame in sorted(frames)] for video, frames in videos.items()}


def read_video2frames(path):
    """{video: [frame ids]} from `video2frames.txt` (JSON, or a Python dict
    literal as dual encoding writes it), or None if there is no such file.

    The file is parsed as a literal (`ast.literal_eval`), never evaluated:
    an expression that is not a plain dict of string lists is an error.
    """
    path = Path(path)
    if not path.exists():
        return None
    text = files.read_text(path)
    try:
        mapping = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            mapping = ast.literal_eval(text)
        # What literal_eval raises for text that is no literal, an
        # unhashable key, or nesting too deep.
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise InputError(f"{path}: neither JSON nor a Python dict literal of video -> frame ids") from None
    valid = isinstance(mapping, dict) and all(
        isinstance(video, str) and isinstance(frames, list) and frames and all(isinstance(f, str) for f in frames)
        for video, frames in mapping.items()
    )
    if not valid:
        raise InputError(f"{path}: expected a dict of video id -> non-empty list of frame ids")
    return mapping


def write_collection(root, collection, feature, item_ids, features, captions):
    """Writes one collection: features (one row per item, or per frame with
    `item_ids` the frame ids) and captions.

    Args:
      root, collection, feature: where (see the module docstring).
      item_ids: the feature rows' ids.
      features: float [len(item_ids), D].
      captions: list of (item, caption) pairs, in caption file order; the
        k-th caption of an item gets the id `<item>#<k>`.
    """
    write_bigfile(Path(root) / collection / "FeatureData" / feature, item_ids, features)
    counts, lines = {}, []
    for item, caption in captions:
        k = counts[item] = counts.get(item, -1) + 1
        lines.append(f"{item}#{k} {' '.join(caption.split())}")
    path = caption_file(root, collection)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.atomic_write(path, lambda file: file.write(("\n".join(lines) + "\n").encode("utf-8")))


def precomp_to_collections(precomp, out, feature=ONE_LAYER, as_frames=False, splits=readers.SPLITS):
    """Writes the splits of a precomp folder as collections named after the
    splits, with the feature folder named `feature`. `as_frames` writes each
    image as a one-frame video `<image>_0` (pooling must give it back).

    Every input is read and checked first (`InputError` naming the file
    and line: an image id holding whitespace or '#', two ids of one item,
    a malformed captions or features file); nothing is written before.
    The collections are then written into a staging folder beside `out`
    and moved into place at the end:
    - `out` missing or empty: the staging folder becomes `out`;
    - `out` holding collections (another feature of the same data, written
      before): each split's collection is added if missing; an existing one
      must hold the same captions (else `InputError`, before any writing),
      keeps them, and gets the feature folder `FeatureData/<feature>`
      added or replaced whole. Other content of `out` is left alone.
    """
    out = Path(out)
    files.check_output_dir(out, "--out")
    converted = [_checked_split(Path(precomp), split, feature, as_frames) for split in splits]
    existing = out.is_dir() and any(out.iterdir())
    if existing:
        for split, _, _, lines in converted:
            _check_existing_collection(out, split, lines)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # a new folder's permissions, not mkdtemp's private 0700
    try:
        for split, rows, features, lines in converted:
            write_bigfile(staging / split / "FeatureData" / feature, rows, features)
            path = caption_file(staging, split)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = ("\n".join(lines) + "\n").encode("utf-8")
            files.atomic_write(path, lambda file, text=text: file.write(text))
        if not existing:
            if out.is_dir():
                out.rmdir()  # empty
            os.replace(staging, out)
            return
        for split, _, _, _ in converted:
            if not (out / split).exists():
                os.replace(staging / split, out / split)
                continue
            target = out / split / "FeatureData" / feature
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                os.replace(target, staging / split / "replaced")
            os.replace(staging / split / "FeatureData" / feature, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _checked_split(precomp, split, feature, as_frames):
    """(split, feature row ids, features, caption lines) of one precomp
    split, its image ids checked as collection items."""
    data = readers.load_precomp(precomp, split, feature)
    ids_path = precomp / f"{split}_ids.txt"
    seen = {}
    items = []
    for number, image in enumerate(data.image_ids, start=1):
        if not image:
            items.append(f"{split}{number - 1}")
            continue
        if any(character.isspace() for character in image):
            raise InputError(f"{ids_path}: line {number}: image id {image!r} holds whitespace, "
                             "which separates ids in a collection (bigfile id.txt, caption ids)")
        if "#" in image:
            raise InputError(f"{ids_path}: line {number}: image id {image!r} holds '#', "
                             "which ends the item in a collection's caption ids")
        item = item_id(image)
        if item in seen:
            first, first_image = seen[item]
            same = "repeats" if first_image == image else f"is the same item {item!r} as"
            raise InputError(f"{ids_path}: line {number}: image id {image!r} {same} line {first} ({first_image!r})")
        seen[item] = (number, image)
        items.append(item)
    rows = [f"{item}_0" for item in items] if as_frames else items
    counts, lines = {}, []
    for image, caption in zip(data.caption_image, data.captions):
        item = items[image]
        k = counts[item] = counts.get(item, -1) + 1
        lines.append(f"{item}#{k} {' '.join(caption.split())}")
    return split, rows, data.images, lines


def _check_existing_collection(out, split, lines):
    """Fails unless `out/<split>` is missing or a collection of exactly
    these caption lines (another feature of the same data)."""
    collection = out / split
    if not collection.exists():
        return
    path = caption_file(out, split)
    if not path.is_file():
        raise InputError(f"--out {out}: {collection} exists and is no collection (no {path.relative_to(out)}); "
                         "choose a new or empty --out")
    if files.read_lines(path, "caption line") != lines:
        raise InputError(f"--out {out}: {path} holds other captions than the precomp {split} split; "
                         "choose a new or empty --out")


def parse_args(argv):
    parser = ArgumentParser(description="Writes a precomp folder as bigfile collections.")
    parser.add_argument("--precomp", required=True, help="a folder in the precomp layout")
    parser.add_argument("--out", required=True,
                        help="the root folder of the collections: new or empty, or holding these collections "
                        "(the feature is then added or replaced)")
    parser.add_argument("--feature", default=ONE_LAYER, help="which {split}_<name>.npy to convert (and the feature name)")
    parser.add_argument("--as-frames", action="store_true", help="write every image as a one-frame video <image>_0")
    return parser.parse_args(argv)


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    precomp_to_collections(args.precomp, args.out, args.feature, args.as_frames)
    print(f"collections train, dev, test written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
