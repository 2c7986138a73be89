"""The "bigfile" feature format of the video retrieval community.

Word2VisualVec (`danieljf24/w2vv`), dual encoding and W2VV++ store features
(of images, video frames, videos, or words) as a folder of three files:

- `shape.txt`: one line `<N> <D>`;
- `id.txt`: the N ids, separated by whitespace (written as one line);
- `feature.bin`: N x D float32, row-major, little-endian, no header, rows in
  the order of `id.txt`.

Unlike the public reader, `BigFile.read` returns rows in the order asked
for, and an unknown id is an error rather than a silently dropped row.
"""

from pathlib import Path

import numpy as np

from common.errors import InputError
from common.files import atomic_write, read_text

FLOAT = np.dtype("<f4")


class BigFile:
    """A bigfile folder, checked on opening and read lazily (memory-mapped).

    Args:
      path: the folder holding `shape.txt`, `id.txt` and `feature.bin`.

    Attributes:
      ids: list[str], the row ids in file order.
      dim: D.

    Raises:
      InputError naming the file: a missing file, a `shape.txt` that is not
      two positive integers, an id count other than N, duplicate ids, or a
      `feature.bin` whose size is not N * D * 4 bytes (checked before
      anything is allocated).
    """

    def __init__(self, path):
        self.path = Path(path)
        n_rows, self.dim = _read_shape(self.path / "shape.txt")
        ids_path = self.path / "id.txt"
        self.ids = read_text(ids_path).split()
        if len(self.ids) != n_rows:
            raise InputError(f"{ids_path}: {len(self.ids)} ids, but shape.txt says {n_rows} rows")
        self.row = {key: row for row, key in enumerate(self.ids)}
        if len(self.row) != n_rows:
            duplicate = next(key for row, key in enumerate(self.ids) if self.row[key] != row)
            raise InputError(f"{ids_path}: id {duplicate!r} appears more than once")
        bin_path = self.path / "feature.bin"
        expected = n_rows * self.dim * FLOAT.itemsize
        try:
            size = bin_path.stat().st_size
        except FileNotFoundError:
            raise InputError(f"{bin_path}: file not found") from None
        if not bin_path.is_file():
            raise InputError(f"{bin_path}: not a regular file")
        if size != expected:
            raise InputError(
                f"{bin_path}: {size} bytes, but shape.txt's {n_rows} x {self.dim} float32 rows need {expected}"
            )
        self.matrix = np.memmap(bin_path, dtype=FLOAT, mode="r", shape=(n_rows, self.dim))

    def __len__(self):
        return len(self.ids)

    def __contains__(self, key):
        return key in self.row

    def read(self, ids):
        """The rows of `ids`, in that order: float32 [len(ids), D].

        Raises:
          InputError: an id that is not in the file, or a row holding NaN or
            inf (naming its id).
        """
        missing = next((key for key in ids if key not in self.row), None)
        if missing is not None:
            raise InputError(f"{self.path}: no features for id {missing!r}")
        rows = np.asarray(self.matrix[[self.row[key] for key in ids]], dtype=np.float32)
        finite = np.isfinite(rows).all(axis=1)
        if not finite.all():
            raise InputError(f"{self.path / 'feature.bin'}: the row of id {ids[int(np.argmin(finite))]!r} holds NaN or inf")
        return rows


def write_bigfile(path, ids, features):
    """Writes `features` (float [N, D]) with their `ids` as a bigfile folder.

    Each file is written aside and renamed into place. Ids must be unique
    and free of whitespace (the format separates them by whitespace).
    """
    path = Path(path)
    features = np.asarray(features, dtype=FLOAT)
    ids = [str(key) for key in ids]
    if features.ndim != 2 or len(features) != len(ids):
        raise ValueError(f"features of shape {features.shape} for {len(ids)} ids")
    if len(set(ids)) != len(ids) or any(not key or len(key.split()) != 1 for key in ids):
        raise ValueError("bigfile ids must be unique, non-empty and without whitespace")
    path.mkdir(parents=True, exist_ok=True)
    atomic_write(path / "feature.bin", lambda file: file.write(np.ascontiguousarray(features).tobytes()))
    atomic_write(path / "id.txt", lambda file: file.write(" ".join(ids).encode("utf-8")))
    atomic_write(path / "shape.txt", lambda file: file.write(f"{len(ids)} {features.shape[1]}".encode()))


def is_bigfile(path):
    """Whether `path` is a folder holding a bigfile's `shape.txt`."""
    return (Path(path) / "shape.txt").is_file()


MAX_SHAPE_DIGITS = 18  # rows and dimension below 10**18: far beyond any file, well within int64


def _read_shape(path):
    """(rows, dimension) of a `shape.txt`: two positive integers of at most
    `MAX_SHAPE_DIGITS` digits (a longer number cannot describe a real file,
    and Python refuses to convert one of over 4,300 digits)."""
    fields = read_text(path).split()
    if len(fields) != 2 or not all(field.isascii() and field.isdigit() for field in fields):
        raise InputError(f"{path}: expected two positive integers '<rows> <dimension>', got {_excerpt(fields)}")
    for name, field in zip(("row count", "dimension"), fields):
        digits = len(field.lstrip("0"))
        if digits > MAX_SHAPE_DIGITS:
            raise InputError(f"{path}: the {name} has {digits} digits ({field[:12]}...): larger than any "
                             f"feature file (at most {MAX_SHAPE_DIGITS} digits)")
    rows, dim = int(fields[0]), int(fields[1])
    if not rows or not dim:
        raise InputError(f"{path}: expected two positive integers '<rows> <dimension>', got {_excerpt(fields)}")
    return rows, dim


def _excerpt(fields):
    text = " ".join(fields)
    return repr(text) if len(text) <= 80 else repr(text[:80]) + f" (and {len(text) - 80} more characters)"
