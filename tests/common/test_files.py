"""Tests of `common.files`: checked reads naming the file at fault, checked
output paths, atomic writes and the two-rename folder replacement."""

import errno
import os
import stat
import tempfile

import pytest

from common import files
from common.errors import InputError


def test_check_file_takes_a_regular_file_and_names_anything_else(tmp_path):
    regular = tmp_path / "a.txt"
    regular.write_text("x")
    files.check_file(regular)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, message in [(tmp_path / "missing.txt", "file not found"), (tmp_path, "not a regular file"),
                          (fifo, "not a regular file")]:
        with pytest.raises(InputError, match=f"^{path}: {message}"):
            files.check_file(path)


def test_read_text_reads_utf8_and_refuses_other_bytes(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("café\n".encode("utf-8"))
    assert files.read_text(path) == "café\n"
    path.write_bytes(b"caf\xe9\n")  # Latin-1
    with pytest.raises(InputError, match=f"^{path}: unreadable"):
        files.read_text(path)


def test_read_lines_strips_lines_and_splits_at_newlines_only(tmp_path):
    path = tmp_path / "caps.txt"
    path.write_text("  a dog \nline\u2028with a separator\x1c inside\nlast", encoding="utf-8")
    assert files.read_lines(path, "caption") == ["a dog", "line\u2028with a separator\x1c inside", "last"]
    path.write_text("one\ntwo\n", encoding="utf-8")  # a final newline ends the last line, no empty line after it
    assert files.read_lines(path, "caption") == ["one", "two"]


@pytest.mark.parametrize("text, number", [("one\n\nthree\n", 2), ("one\n   \n", 2), ("\n", 1), ("a\nb\n\n", 3)])
def test_an_empty_line_is_an_error_naming_the_file_and_the_line(tmp_path, text, number):
    path = tmp_path / "caps.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=f"^{path}: line {number} is an empty caption$"):
        files.read_lines(path, "caption")


def test_check_output_file(tmp_path, monkeypatch):
    files.check_output_file(tmp_path / "new.json", "--out")
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
    with pytest.raises(InputError, match=r"^--out .*: the directory .*missing does not exist"):
        files.check_output_file(tmp_path / "missing" / "x.json", "--out")
    with pytest.raises(InputError, match=r"^--record .*: is a directory; give a file name"):
        files.check_output_file(tmp_path, "--record")

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(InputError, match=r"^--out .*: the directory .* is not writable \(Permission denied\)"):
        files.check_output_file(tmp_path / "new.json", "--out")


def test_check_output_dir_refuses_only_an_existing_non_directory(tmp_path):
    files.check_output_dir(tmp_path, "--model-dir")
    files.check_output_dir(tmp_path / "new", "--model-dir")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="^--model-dir .*file: exists and is not a directory$"):
        files.check_output_dir(tmp_path / "file", "--model-dir")


def test_check_output_folder_takes_new_empty_or_its_own_kind_only(tmp_path):
    files.check_output_folder(tmp_path / "new", "--out", "index.json", "an index")
    (tmp_path / "empty").mkdir()
    files.check_output_folder(tmp_path / "empty", "--out", "index.json", "an index")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "index.json").write_text("{}")
    (tmp_path / "index" / "shard-0.npy").write_text("")
    files.check_output_folder(tmp_path / "index", "--out", "index.json", "an index")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_text("")
    with pytest.raises(InputError, match=r"^--out .*photos: exists and is not an index \(a folder without index.json\)"):
        files.check_output_folder(tmp_path / "photos", "--out", "index.json", "an index")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=r"^--out .*file: exists and is not an index \(a file\)"):
        files.check_output_folder(tmp_path / "file", "--out", "index.json", "an index")


def test_atomic_write_replaces_the_file_whole_with_the_umask_permissions(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    previous = os.umask(0o022)
    try:
        files.write_json_atomically(path, '{"a": "é"}')
    finally:
        os.umask(previous)
    assert path.read_text(encoding="utf-8") == '{"a": "é"}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's private 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file left


def test_an_interrupted_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")

    def half_then_fail(file):
        file.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(InputError, match=r"^.*out.json: cannot be written \(No space left on device\); any previous"):
        files.atomic_write(path, half_then_fail)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_replace_directory_puts_the_new_folder_in_place_of_the_old(tmp_path):
    out = tmp_path / "out"
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "new.txt").write_text("new")
    files.replace_directory(staging, out)  # no previous folder
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"] and not staging.exists()

    staging.mkdir()
    (staging / "newer.txt").write_text("newer")
    files.replace_directory(staging, out)  # over a previous folder, whose files go
    assert sorted(p.name for p in out.iterdir()) == ["newer.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # neither staging nor the retired folder is left
