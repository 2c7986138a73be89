"""File input and output every floor uses: checked reads that name the
file at fault, checked output paths, and atomic writes.

Every problem raises `InputError` with a one-line message naming the file.
"""

import os
import shutil
import stat
import tempfile
from pathlib import Path

from common.errors import InputError


def check_file(path):
    """Raises `InputError` naming `path` unless it is a regular file: not
    found, or a directory, FIFO or device (reading a FIFO would wait for a
    writer forever)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: not a regular file (a directory, FIFO or device)")


def check_output_file(path, argument):
    """Fails, before any work, unless `path` can be written as a file: its
    directory exists and takes a new file, and it is not itself a directory."""
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"{argument} {path}: the directory {path.parent} does not exist")
    if path.is_dir():
        raise InputError(f"{argument} {path}: is a directory; give a file name")
    try:  # a probe file: catches permissions and read-only file systems alike
        descriptor, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    except OSError as error:
        raise InputError(f"{argument} {path}: the directory {path.parent} is not writable "
                         f"({error.strerror or error})") from None
    os.close(descriptor)
    os.unlink(probe)


def check_output_dir(path, argument):
    """Fails, before any work, if `path` exists and is not a directory."""
    if Path(path).exists() and not Path(path).is_dir():
        raise InputError(f"{argument} {path}: exists and is not a directory")


def check_output_folder(path, argument, marker, kind):
    """Fails, before any work, unless the folder `path` can receive `kind`
    (e.g. "an index"): it is new, empty, or already `kind`, which holds the
    file `marker`. Anything else (a file, someone's folder of photos) is
    refused, so nothing is ever written among a user's files."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{argument} {path}: exists and is not {kind} (a file)")
    if path.is_dir() and any(path.iterdir()) and not (path / marker).is_file():
        raise InputError(f"{argument} {path}: exists and is not {kind} (a folder without {marker}); "
                         "choose a new name")


def read_text(path):
    """The text of a UTF-8 file; `InputError` naming it if it is missing,
    not a regular file or unreadable."""
    check_file(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: unreadable ({error})") from None


def read_lines(path, what):
    """The stripped lines of a text file; an empty line is an error.

    Lines end at "\\n" only, as VSE++ reads them: `str.splitlines` would
    also split a caption at U+2028, \\x1c and the like.
    """
    text = read_text(path)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError(f"{path}: line {number} is an empty {what}")
    return [line.strip() for line in lines]


def atomic_write(path, write):
    """Calls `write(binary_file)` on a temporary file, then renames it to
    `path`: a reader never sees half a file, an interruption leaves the old one."""
    # Not `tempfile.mkstemp`: its files are private (0600); this one gets
    # the permissions of any new file (umask).
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except OSError as error:
        raise InputError(f"{path}: cannot be written ({error.strerror}); any previous version is unchanged") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def write_json_atomically(path, text):
    """Writes `text` to `path` via a temporary file and a rename."""
    atomic_write(path, lambda file: file.write(text.encode("utf-8")))


def replace_directory(staging, out):
    """Puts the folder `staging` at `out` (Paths on one file system) with
    two renames: an existing `out` stays whole until the new one is in
    place, and is then removed."""
    if out.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        out.rename(retired / out.name)
        staging.rename(out)
        shutil.rmtree(retired)
    else:
        staging.rename(out)
