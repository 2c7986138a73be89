"""Tests of `search.collection`: the images of a folder (recursive, by
suffix in any case, sorted), the captions of a file, and a file's digest;
each refusal names the folder or file."""

import hashlib

import pytest

from common.errors import InputError
from search import collection


def test_the_images_of_a_folder_are_its_jpegs_and_pngs_anywhere_below_it_sorted(tmp_path):
    for name in ["b.jpg", "a/z.PNG", "a/y.jpeg", "a/deep/x.JPG", "c.png", "notes.txt", "d.gif", "e.jpg.bak"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "folder.jpg").mkdir()  # a folder, whatever its name
    assert collection.list_images(tmp_path) == ["a/deep/x.JPG", "a/y.jpeg", "a/z.PNG", "b.jpg", "c.png"]


def test_a_folder_without_images_missing_or_not_a_folder_is_refused(tmp_path):
    (tmp_path / "text.txt").write_text("x")
    with pytest.raises(InputError, match=f"^--images {tmp_path}: holds no JPEG or PNG image \\(.jpg, .jpeg, .png, "
                                         "in any sub-folder\\)$"):
        collection.list_images(tmp_path)
    with pytest.raises(InputError, match=f"^--in {tmp_path / 'none'}: no such folder$"):
        collection.list_images(tmp_path / "none", "--in")
    with pytest.raises(InputError, match=f"^--images {tmp_path / 'text.txt'}: not a folder$"):
        collection.check_folder(tmp_path / "text.txt")


def test_captions_are_the_lines_of_a_file(tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text("a dog runs\n  two cats  \na dog runs\n", encoding="utf-8")
    assert collection.read_captions(path) == ["a dog runs", "two cats", "a dog runs"]


@pytest.mark.parametrize("text, message", [("", "holds no caption"), ("a\n\nb\n", "line 2 is an empty caption")])
def test_an_empty_caption_file_or_line_is_refused(tmp_path, text, message):
    path = tmp_path / "captions.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=f"^{path}: {message}$"):
        collection.read_captions(path)


def test_the_digest_is_the_files_sha256(tmp_path):
    path = tmp_path / "captions.txt"
    path.write_bytes(b"abc")
    assert collection.file_digest(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = bytes(range(256)) * 9000  # more than the 1 MB blocks it is read in
    path.write_bytes(big)
    assert collection.file_digest(path) == hashlib.sha256(big).hexdigest()
