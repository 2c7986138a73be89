"""What an index is built from: a folder of images or a file of captions,
checked before any encoding starts."""

import hashlib
from pathlib import Path

from common.errors import InputError
from common.files import read_lines
from data.readers import JPEG_PNG_EXTENSIONS


def list_images(folder, argument="--images"):
    """The JPEG and PNG files under `folder` (recursively; by their suffix,
    any case), as '/'-separated paths relative to it, sorted.

    Fails (`InputError`) when `folder` is missing, not a folder, or holds
    no such file."""
    folder = Path(folder)
    check_folder(folder, argument)
    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                   if path.suffix.lower() in JPEG_PNG_EXTENSIONS and path.is_file())
    if not files:
        raise InputError(f"{argument} {folder}: holds no JPEG or PNG image ({', '.join(JPEG_PNG_EXTENSIONS)}, "
                         "in any sub-folder)")
    return files


def check_folder(folder, argument="--images"):
    """Fails (`InputError`) when `folder` is missing or not a folder."""
    if not Path(folder).exists():
        raise InputError(f"{argument} {folder}: no such folder")
    if not Path(folder).is_dir():
        raise InputError(f"{argument} {folder}: not a folder")


def read_captions(path):
    """The captions of a text file, one a line; an empty line or an empty
    file is an error naming the file."""
    captions = read_lines(path, "caption")
    if not captions:
        raise InputError(f"{path}: holds no caption")
    return captions


def file_digest(path):
    """The SHA-256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
