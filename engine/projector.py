"""The joint space of images and captions for TensorBoard's projector.

`write_projector(directory, ...)` writes one embedding tensor holding the
split's images then its captions (a checkpoint), `metadata.tsv` with the
modality, image file name and caption text of every row, optionally an
image sprite, and `projector_config.pbtxt` tying them together, so that

    tensorboard --logdir DIRECTORY

shows the joint space in the "Projector" tab (PCA, t-SNE, UMAP; colour or
search by modality, image or caption).

The sprite shows the images an images folder holds (`find_sprite_images`)
and a flat grey tile for each one it lacks, so a folder of a few of the
split's images (e.g. the 8 embedded Flickr8k test JPEGs) still gives
pictures; caption points get a lighter blank tile.
"""

import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from common.errors import InputError
from common.files import check_output_folder
from data.readers import find_image_files

TENSOR_NAME = "joint_space/.ATTRIBUTES/VARIABLE_VALUE"
CONFIG_FILE = "projector_config.pbtxt"
SPRITE_TILE = 48  # pixels; the sprite of 6,000 points is then 3,744 pixels wide
CAPTION_TILE = 235  # the grey of a caption's blank tile
MISSING_IMAGE_TILE = 128  # the darker grey of an image the images folder lacks


def check_directory(directory):
    """Fails unless `directory` can receive a projector: missing, empty, or
    written by `write_projector` before (it is then replaced)."""
    directory = Path(directory)
    check_output_folder(directory, "--projector", CONFIG_FILE, "a projector")
    if not directory.parent.is_dir():
        raise InputError(f"--projector {directory}: the directory {directory.parent} does not exist")


def find_sprite_images(images_dir, split, split_name):
    """The file of each image of `split` under `images_dir`, None for those
    it lacks (grey tiles in the sprite); prints how many were found.

    Fails (`InputError`) when `images_dir` is no folder or holds none of
    the split's images: then it is almost certainly the wrong folder."""
    files = find_image_files(images_dir, split.image_ids)
    found = sum(file is not None for file in files)
    missing = "" if found == len(files) else "; the others are grey tiles in the projector's sprite"
    print(f"{found} of {len(files)} {split_name} images found in {images_dir}{missing}", file=sys.stderr)
    return files


def write_projector(directory, image_encodings, text_encodings, split, image_files=None):
    """Writes the projector files for the encodings of `split`.

    Args:
      directory: where to write (see `check_directory`); replaced as a whole
        once the new files are complete.
      image_encodings: float [n_images, D].
      text_encodings: float [n_captions, D], the same space.
      split: the `data.readers.RetrievalSplit` encoded.
      image_files: optional, for the sprite: the file of each image of the
        split, None where there is none (`find_sprite_images`); a missing
        image gets a flat grey tile, a caption a lighter blank one.
    """
    import tensorflow as tf
    from tensorboard.plugins import projector

    directory = Path(directory)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # a new folder's permissions, not mkdtemp's private 0700
    try:
        embedding = np.concatenate([image_encodings, text_encodings]).astype(np.float32)
        # save(), not write(): the "checkpoint" state file (relative paths)
        # is how the projector finds the tensor in its log directory.
        tf.train.Checkpoint(joint_space=tf.Variable(embedding)).save(str(staging / "embedding"))
        rows = ["modality\timage\tcaption"]
        rows += [f"image\t{name}\t" for name in split.image_ids]
        rows += [f"caption\t{split.image_ids[image]}\t{_tsv(caption)}"
                 for caption, image in zip(split.captions, split.caption_image)]
        (staging / "metadata.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        config = projector.ProjectorConfig()
        entry = config.embeddings.add()
        entry.tensor_name = TENSOR_NAME
        entry.metadata_path = "metadata.tsv"
        if image_files is not None:
            _write_sprite(staging / "sprite.png", image_files, len(split.captions))
            entry.sprite.image_path = "sprite.png"
            entry.sprite.single_image_dim.extend([SPRITE_TILE, SPRITE_TILE])
        projector.visualize_embeddings(str(staging), config)
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _tsv(text):
    return " ".join(text.split())  # no tabs or newlines inside a field


def _write_sprite(path, image_files, blank_tiles):
    """One SPRITE_TILE-square tile per point, row-major in a square grid:
    the images (a grey tile where the file is None), then a blank tile per
    caption."""
    import tensorflow as tf

    tiles = len(image_files) + blank_tiles
    side = math.ceil(math.sqrt(tiles))
    sprite = np.full((side * SPRITE_TILE, side * SPRITE_TILE, 3), CAPTION_TILE, np.uint8)
    for index, file in enumerate(image_files):
        row, column = divmod(index, side)
        tile = sprite[row * SPRITE_TILE:(row + 1) * SPRITE_TILE, column * SPRITE_TILE:(column + 1) * SPRITE_TILE]
        if file is None:
            tile[...] = MISSING_IMAGE_TILE
            continue
        try:
            image = tf.io.decode_image(tf.io.read_file(str(file)), channels=3, expand_animations=False)
        except tf.errors.OpError as error:
            raise InputError(f"{file}: not a readable image ({str(error).splitlines()[0]})") from None
        resized = tf.image.resize(image, (SPRITE_TILE, SPRITE_TILE), antialias=True)
        tile[...] = np.clip(resized.numpy(), 0, 255).astype(np.uint8)
    Path(path).write_bytes(tf.io.encode_png(sprite).numpy())
