"""Readers and writers of the dataset layouts the zoo accepts.

- VSE++ "precomp": `<root>/{split}_ims.npy` (features) + `{split}_caps.txt`
  (one caption a line) + optional `{split}_ids.txt` (one image id a line).
  What training and evaluation read (`load_precomp`).
- The original Flickr8k text release: `Flickr8k.token.txt` +
  `Flickr_8k.{train,dev,test}Images.txt` (`read_flickr_text`).
- Karpathy's `dataset_{flickr8k,flickr30k,coco}.json` (`read_karpathy_json`).
The last two name images and captions only; `data.extract_features` turns
them, with an image folder, into the precomp layout (`write_precomp`).

Every problem with a file raises `InputError` with a one-line message naming
the file.
"""

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from data.errors import InputError

CAPTIONS_PER_IMAGE = 5
SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class RetrievalSplit:
    """One split ready for training or evaluation.

    Attributes:
      images: float32 [n_images, F].
      captions: [n_captions] raw caption strings.
      caption_image: int64 [n_captions], the row of `images` each caption
        describes.
      image_ids: [n_images] image names ("" when unknown).
      source: where it was read from, for messages.
    """

    images: np.ndarray
    captions: list
    caption_image: np.ndarray
    image_ids: list
    source: str


@dataclasses.dataclass(frozen=True)
class ImageCaptions:
    """A split of a text release, before image features exist.

    Attributes:
      image_files: file names, relative to an image folder.
      captions: the captions of each image.
    """

    image_files: list
    captions: list


def load_precomp(root, split, image_features="ims"):
    """Reads one split of the VSE++ precomp layout.

    The layout is detected as VSE++ does: if the feature file has as many
    rows as there are captions, it holds one row per caption, and VSE++
    evaluates with every 5th row, so those rows are kept as the images
    (caption j -> image j // 5); otherwise it holds one row per image and
    the captions file must hold exactly 5 captions per image, in image order.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: data folder not found")
    features_path = root / f"{split}_{image_features}.npy"
    captions_path = root / f"{split}_caps.txt"
    features = _load_features(features_path)
    captions = _read_lines(captions_path, "caption")
    if len(features) == len(captions):
        features = features[::CAPTIONS_PER_IMAGE]
    if len(captions) != CAPTIONS_PER_IMAGE * len(features):
        raise InputError(
            f"{captions_path}: {len(captions)} captions for {len(features)} images in {features_path.name}; "
            f"expected {CAPTIONS_PER_IMAGE} per image"
        )
    ids_path = root / f"{split}_ids.txt"
    image_ids = [""] * len(features)
    if ids_path.exists():
        image_ids = _read_lines(ids_path, "image id")
        if len(image_ids) != len(features):
            raise InputError(f"{ids_path}: {len(image_ids)} ids for {len(features)} images in {features_path.name}")
    return RetrievalSplit(
        images=features,
        captions=captions,
        caption_image=np.arange(len(captions), dtype=np.int64) // CAPTIONS_PER_IMAGE,
        image_ids=image_ids,
        source=str(root),
    )


def _load_features(path):
    try:
        features = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: feature file not found") from None
    except (OSError, ValueError, EOFError) as error:
        raise InputError(f"{path}: not a readable .npy array ({str(error).splitlines()[0]})") from None
    if features.ndim != 2 or not np.issubdtype(features.dtype, np.number) or len(features) == 0:
        raise InputError(f"{path}: expected a non-empty 2-D numeric array, got shape {features.shape} {features.dtype}")
    features = features.astype(np.float32)
    finite = np.isfinite(features).all(axis=1)
    if not finite.all():
        raise InputError(f"{path}: row {int(np.argmin(finite))} holds NaN or inf")
    return features


def _read_lines(path, what):
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: unreadable ({error})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError(f"{path}: line {number} is an empty {what}")
    return [line.strip() for line in lines]


def read_flickr_text(root, split, token_file="Flickr8k.token.txt", split_pattern="Flickr_8k.{split}Images.txt"):
    """One split of the original Flickr8k text release.

    `Flickr8k.token.txt` lines are `<image>#<k>\\t<caption>`; the split files
    list one image file name a line. Token-file lines for images in no split
    (such as the junk id `2258277193_586949ec62.jpg.1`) are ignored.
    Flickr30k's release has no split files: use Karpathy's JSON for it.
    """
    root = Path(root)
    token_path = root / token_file
    by_image = {}
    for number, line in enumerate(_read_lines(token_path, "line"), start=1):
        key, tab, caption = line.partition("\t")
        image, hash_, index = key.rpartition("#")
        if not tab or not hash_ or not index.isdigit() or not caption.strip():
            raise InputError(f"{token_path}: line {number} is not '<image>#<k><TAB><caption>'")
        by_image.setdefault(image, []).append((int(index), caption.strip()))
    split_path = root / split_pattern.format(split=split)
    image_files = _read_lines(split_path, "image name")
    captions = []
    for image in image_files:
        if image not in by_image:
            raise InputError(f"{split_path}: image {image} has no caption in {token_path.name}")
        captions.append([caption for _, caption in sorted(by_image[image])])
    return ImageCaptions(image_files=image_files, captions=captions)


def read_karpathy_json(path, split):
    """One split of Karpathy's `dataset_*.json`.

    Split names follow the precomp layout: the JSON's "val" is "dev", and
    COCO's "restval" images join "train" (as VSE++ trains on COCO). Images
    with more than 5 captions (a few in COCO) keep their first 5, as VSE++.
    """
    path = Path(path)
    if split not in SPLITS:
        raise InputError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
    wanted = {"train": ("train", "restval"), "dev": ("val",), "test": ("test",)}[split]
    try:
        images = json.loads(path.read_text(encoding="utf-8"))["images"]
        selected = [im for im in images if im["split"] in wanted]
        image_files = [str(Path(im.get("filepath", "")) / im["filename"]) for im in selected]
        captions = [[s["raw"].strip() for s in im["sentences"]][:CAPTIONS_PER_IMAGE] for im in selected]
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(f"{path}: not a Karpathy dataset JSON ({type(error).__name__}: {error})") from None
    return ImageCaptions(image_files=image_files, captions=captions)


def write_precomp(root, split, features, data, captions_per_image=CAPTIONS_PER_IMAGE):
    """Writes `{split}_ims.npy`, `{split}_caps.txt` and `{split}_ids.txt`.

    Each file is written aside and renamed into place, so an interrupted
    run never leaves a half-written file.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if len(features) != len(data.image_files):
        raise ValueError(f"{len(features)} feature rows for {len(data.image_files)} images")
    lines = []
    for image, captions in zip(data.image_files, data.captions):
        if len(captions) < captions_per_image:
            raise InputError(f"image {image} has {len(captions)} captions, fewer than {captions_per_image}")
        lines.extend(c.replace("\n", " ") for c in captions[:captions_per_image])
    _atomic_write(root / f"{split}_ims.npy", lambda f: np.save(f, np.asarray(features, np.float32)))
    _atomic_write(root / f"{split}_caps.txt", lambda f: f.write(("\n".join(lines) + "\n").encode("utf-8")))
    _atomic_write(root / f"{split}_ids.txt", lambda f: f.write(("\n".join(data.image_files) + "\n").encode("utf-8")))


def _atomic_write(path, write):
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
