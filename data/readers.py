"""Readers and writers of the dataset layouts the zoo accepts.

- VSE++ "precomp": `<root>/{split}_ims.npy` (features) + `{split}_caps.txt`
  (one caption a line) + optional `{split}_ids.txt` (one image id a line)
  (`load_precomp`).
- Collections in the "bigfile" layout of the Word2VisualVec / video
  retrieval community: `<root>/<split>/FeatureData/<feature>/` +
  `<root>/<split>/TextData/<split>.caption.txt`, any number of captions
  per image or video, frame features pooled per video (`data.collections`).
Training and evaluation read either through `data.splits.load_split`.
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
from pathlib import Path

import numpy as np

from common.errors import InputError
from common.files import atomic_write, check_file, read_lines, read_text
from data.image_features import ONE_LAYER

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
      captions_file: the file the captions came from, for messages.
    """

    images: np.ndarray
    captions: list[str]
    caption_image: np.ndarray
    image_ids: list[str]
    source: str
    captions_file: str = ""

    def first_images(self, n_images):
        """The split cut to its first `n_images` images and their captions."""
        keep = self.caption_image < n_images
        return dataclasses.replace(
            self,
            images=self.images[:n_images],
            captions=[caption for caption, kept in zip(self.captions, keep) if kept],
            caption_image=self.caption_image[keep],
            image_ids=self.image_ids[:n_images],
        )


@dataclasses.dataclass(frozen=True)
class ImageCaptions:
    """A split of a text release, before image features exist.

    Attributes:
      image_files: file names, relative to an image folder.
      captions: the captions of each image.
    """

    image_files: list[str]
    captions: list[list[str]]


def load_precomp(root, split, stem=ONE_LAYER):
    """Reads one split of the VSE++ precomp layout.

    Args:
      root: the folder holding the split's files.
      split: "train", "dev", "test" or any other file name prefix.
      stem: the file stem of the features, `{split}_{stem}.npy` (a kind's:
        `data.image_features.KINDS`).

    Returns:
      A `RetrievalSplit`.

    The layout is detected as VSE++ does: if the feature file has as many
    rows as there are captions, it holds one row per caption (caption j
    describes row j), and VSE++ evaluates with every 5th row only, so those
    rows are kept as the images (caption j -> image j // 5); otherwise it
    holds one row per image and the captions file must hold exactly 5
    captions per image, in image order.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: data folder not found")
    features_path = root / f"{split}_{stem}.npy"
    captions_path = root / f"{split}_caps.txt"
    features = _load_features(features_path)
    captions = read_lines(captions_path, "caption")
    if len(features) == len(captions):
        if len(captions) % CAPTIONS_PER_IMAGE:
            raise InputError(
                f"{captions_path}: {len(captions)} captions, one row each in {features_path.name}, "
                f"is not a multiple of {CAPTIONS_PER_IMAGE} captions per image"
            )
        features = features[::CAPTIONS_PER_IMAGE]
    elif len(captions) != CAPTIONS_PER_IMAGE * len(features):
        raise InputError(
            f"{captions_path}: {len(captions)} captions for {len(features)} images in {features_path.name}; "
            f"expected {CAPTIONS_PER_IMAGE} per image"
        )
    ids_path = root / f"{split}_ids.txt"
    image_ids = [""] * len(features)
    if ids_path.exists():
        image_ids = read_lines(ids_path, "image id")
        if len(image_ids) != len(features):
            raise InputError(f"{ids_path}: {len(image_ids)} ids for {len(features)} images in {features_path.name}")
    return RetrievalSplit(
        images=features,
        captions=captions,
        caption_image=np.arange(len(captions), dtype=np.int64) // CAPTIONS_PER_IMAGE,
        image_ids=image_ids,
        source=str(root),
        captions_file=str(captions_path),
    )


def _load_features(path):
    if not Path(path).exists():
        raise InputError(f"{path}: feature file not found")
    _check_npy_size(path)
    try:
        features = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise InputError(f"{path}: not a readable .npy array ({str(error).splitlines()[0]})") from None
    real = np.issubdtype(features.dtype, np.integer) or np.issubdtype(features.dtype, np.floating)
    if features.ndim != 2 or not real or len(features) == 0:
        raise InputError(f"{path}: expected a non-empty 2-D numeric array, got shape {features.shape} {features.dtype}")
    features = features.astype(np.float32)
    finite = np.isfinite(features).all(axis=1)
    if not finite.all():
        raise InputError(f"{path}: row {int(np.argmin(finite))} holds NaN or inf")
    return features


def _check_npy_size(path):
    """Fails unless the array an .npy header announces fits in the file, so
    that a corrupt header cannot make NumPy allocate terabytes."""
    check_file(path)
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                return  # a newer format: np.load checks it
            shape, _, dtype = read_header[version](file)
            offset = file.tell()
    except (OSError, ValueError, EOFError) as error:
        raise InputError(f"{path}: not a readable .npy array ({str(error).splitlines()[0]})") from None
    needed = offset + int(np.prod(shape, dtype=object)) * dtype.itemsize
    size = os.path.getsize(path)
    if needed > size:
        raise InputError(f"{path}: its header announces a {' x '.join(map(str, shape))} {dtype} array "
                         f"({needed:,} bytes) but the file has {size:,} bytes; truncated or corrupt")


JPEG_PNG_EXTENSIONS = (".jpg", ".jpeg", ".png")  # the photos `search` indexes and `tools.bench_images` times
IMAGE_EXTENSIONS = (*JPEG_PNG_EXTENSIONS, ".gif", ".bmp")  # every format `data.image_decoding` decodes


def image_key(image_id):
    """The key two image ids are compared by: the id without a known image
    extension (`IMAGE_EXTENSIONS`, any case), so that
    `1258913059_07c613f7ff.jpg` (precomp ids, the Flickr8k text release)
    and `1258913059_07c613f7ff` (collections, which name items without
    their extension) are the same image; a folder stays part of the id
    (`val2014/COCO_val2014_000000391895.jpg` ~ `val2014/COCO_val2014_000000391895`)."""
    stem, dot, extension = image_id.rpartition(".")
    return stem if dot and stem and "/" not in extension and f".{extension.lower()}" in IMAGE_EXTENSIONS else image_id


def find_image(image_ids, image_id):
    """The index in `image_ids` of the image `image_id` names (compared by
    `image_key`), or None."""
    key = image_key(image_id)
    return next((index for index, candidate in enumerate(image_ids) if image_key(candidate) == key), None)


def image_file(directory, image_id):
    """The file of image `image_id` under the images folder `directory`, or
    None when there is none: the one way an image id maps to a file.

    An image id is a relative, '/'-separated path under the folder:
    - a file name (`1000268201_693b08cb0e.jpg`, Flickr's precomp ids);
    - a path with sub-folders (`val2014/COCO_val2014_000000391895.jpg`,
      what `data.extract_features` writes for Karpathy's COCO split);
    - either without its extension (`1000268201_693b08cb0e`, the item ids
      of collections, `data.collections`): if `<directory>/<id>` is no
      file and the id has no known image extension, the first of
      `<id>.jpg`, `.jpeg`, `.png`, `.gif`, `.bmp` (each lower, then upper
      case) that is a file is the image's.
    An empty id, an absolute one, or one with a `..` part (or a backslash)
    names no file: an id never reaches outside the folder.
    """
    parts = image_id.split("/")
    if not image_id or image_id.startswith("/") or "\\" in image_id or any(part in ("", ".", "..") for part in parts):
        return None
    path = Path(directory).joinpath(*parts)
    if path.is_file():
        return path
    if image_key(image_id) != image_id:
        return None  # it has an image extension: no other name is tried
    for extension in IMAGE_EXTENSIONS:
        for candidate in (extension, extension.upper()):
            file = path.with_name(path.name + candidate)
            if file.is_file():
                return file
    return None


def find_image_files(directory, image_ids, argument="--images"):
    """The file of each image id under `directory` (see `image_file`), None
    for those it lacks, in the order of `image_ids`: a folder may hold only
    some of a split's images (e.g. the 8 embedded Flickr8k test JPEGs).

    Fails unless `directory` is a folder holding at least one of them: a
    folder holding none is almost certainly the wrong one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{argument} {directory}: not a directory")
    found = [image_file(directory, name) for name in image_ids]
    if image_ids and not any(found):
        named = [name for name in image_ids if name]
        if not named:
            raise InputError(f"{argument} {directory}: the split names none of its {len(image_ids)} images "
                             "(its image ids are unknown), so no file can be found")
        raise InputError(f"{argument} {directory}: none of the split's {len(image_ids)} images is there "
                         f"(e.g. no file {named[0]!r}); is it the folder of the split's images?")
    return found


def read_flickr_text(root, split, token_file="Flickr8k.token.txt", split_pattern="Flickr_8k.{split}Images.txt"):
    """One split of the original Flickr8k text release.

    Args:
      root: the release folder.
      split: "train", "dev" or "test".
      token_file: the caption file: lines `<image>#<k>\\t<caption>`.
      split_pattern: the split file name; it lists one image file a line.

    Returns:
      `ImageCaptions`: the images in split-file order, each with its
      captions in `#k` order. Token-file lines for images in no split (such
      as Flickr8k's junk id `2258277193_586949ec62.jpg.1`) are ignored.

    Flickr30k's release (`results_20130124.token`) has the same caption
    lines but no split files: use Karpathy's JSON for Flickr30k.
    """
    root = Path(root)
    token_path = root / token_file
    by_image = {}
    for number, line in enumerate(read_lines(token_path, "line"), start=1):
        key, tab, caption = line.partition("\t")
        image, hash_, index = key.rpartition("#")
        if not tab or not hash_ or not index.isdigit() or not caption.strip():
            raise InputError(f"{token_path}: line {number} is not '<image>#<k><TAB><caption>'")
        by_image.setdefault(image, []).append((int(index), caption.strip()))
    split_path = root / split_pattern.format(split=split)
    image_files = read_lines(split_path, "image name")
    captions = []
    for image in image_files:
        if image not in by_image:
            raise InputError(f"{split_path}: image {image} has no caption in {token_path.name}")
        captions.append([caption for _, caption in sorted(by_image[image])])
    return ImageCaptions(image_files=image_files, captions=captions)


def read_karpathy_json(path, split):
    """One split of Karpathy's `dataset_{flickr8k,flickr30k,coco}.json`.

    Args:
      path: the JSON file.
      split: "train", "dev" or "test".

    Returns:
      `ImageCaptions` in file order; COCO's files are `filepath/filename`.

    Split names follow the precomp layout: the JSON's "val" is "dev", and
    COCO's "restval" images join "train", as VSE++'s `--use_restval` does
    (its dev and test images are untouched). Images with more than 5
    captions (a few in COCO) keep their first 5, as the precomp files of
    VSE++ do.
    """
    path = Path(path)
    if split not in SPLITS:
        raise InputError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
    wanted = {"train": ("train", "restval"), "dev": ("val",), "test": ("test",)}[split]
    text = read_text(path)
    try:
        images = json.loads(text)["images"]
        selected = [im for im in images if im["split"] in wanted]
        image_files = [str(Path(im.get("filepath", "")) / im["filename"]) for im in selected]
        captions = [[s["raw"].strip() for s in im["sentences"]][:CAPTIONS_PER_IMAGE] for im in selected]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"{path}: not a Karpathy dataset JSON ({type(error).__name__}: {error})") from None
    return ImageCaptions(image_files=image_files, captions=captions)


def write_precomp(root, split, features, data, captions_per_image=CAPTIONS_PER_IMAGE):
    """Writes one split in the precomp layout, one feature row per image.

    Args:
      root: the output folder (created if needed).
      split: the file name prefix.
      features: [n_images, F], written as float32 to `{split}_ims.npy`.
      data: the split's `ImageCaptions`; the first `captions_per_image`
        captions of each image go to `{split}_caps.txt`, the image files to
        `{split}_ids.txt`.
      captions_per_image: an image with fewer captions is an `InputError`.

    Each file is written aside and renamed into place, so an interrupted
    run never leaves a half-written file.
    """
    root = Path(root)
    captions_path = root / f"{split}_caps.txt"
    features = _checked_features(root / f"{split}_ims.npy", features, data.image_files)
    lines = []
    for image, captions in zip(data.image_files, data.captions):
        # Runs of whitespace, newlines included, become one space: the
        # captions file holds one caption a line.
        captions = [" ".join(c.split()) for c in captions[:captions_per_image]]
        if len(captions) < captions_per_image or not all(captions):
            raise InputError(
                f"{captions_path}: image {image} has {sum(map(bool, captions))} non-empty captions, "
                f"fewer than {captions_per_image}"
            )
        lines.extend(captions)
    root.mkdir(parents=True, exist_ok=True)
    write_image_features(root, split, ONE_LAYER, features, data.image_files)
    atomic_write(captions_path, lambda f: f.write(("\n".join(lines) + "\n").encode("utf-8")))
    atomic_write(root / f"{split}_ids.txt", lambda f: f.write(("\n".join(data.image_files) + "\n").encode("utf-8")))


def write_image_features(root, split, name, features, image_files):
    """Writes `{split}_{name}.npy` (float32, one row per image of
    `image_files`), e.g. the per-layer features `stages` beside `ims`."""
    path = Path(root) / f"{split}_{name}.npy"
    features = _checked_features(path, features, image_files)
    Path(root).mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: np.save(f, features))


def _checked_features(path, features, image_files):
    features = np.asarray(features, np.float32)
    if features.ndim != 2 or len(features) != len(image_files):
        raise ValueError(f"features of shape {features.shape} for {len(image_files)} images")
    finite = np.isfinite(features).all(axis=1)
    if not finite.all():
        bad = image_files[int(np.argmin(finite))]
        raise InputError(f"{path}: the features of image {bad} hold NaN or inf")
    return features
