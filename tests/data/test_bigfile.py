"""Tests of `data.bigfile`: the byte format of a bigfile folder (golden
vector), an exact round trip of real features, one-line `InputError`s naming
the file for every malformed folder, and word vectors in bigfile format."""

import os
import threading
import time

import numpy as np
import pytest

from common import files
from common.errors import InputError
from data.bigfile import BigFile, is_bigfile, write_bigfile
from tests.helpers import EMBEDDED_DATA

GOLDEN_IDS = ["a", "b"]
GOLDEN_ROWS = [[1.0, 2.33, 3.89935], [0.5, 3.0, 4.35394]]
GOLDEN_BYTES = bytes.fromhex("0000803f b81e1540 f38e7940 0000003f 00004040 7a538b40".replace(" ", ""))


def write_by_hand(folder, feature_bytes=GOLDEN_BYTES, shape="2 3", ids="a\nb\n"):
    """A bigfile folder written file by file, without `write_bigfile`."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "feature.bin", "wb") as file:
        file.write(feature_bytes)
    with open(folder / "shape.txt", "w") as file:
        file.write(shape)
    with open(folder / "id.txt", "w") as file:
        file.write(ids)
    return folder


def test_write_bigfile_golden_bytes(tmp_path):
    """write_bigfile writes little-endian float32 rows, `N D` and the ids, byte for byte."""
    folder = tmp_path / "golden"
    write_bigfile(folder, GOLDEN_IDS, GOLDEN_ROWS)
    assert (folder / "feature.bin").read_bytes() == GOLDEN_BYTES
    assert (folder / "shape.txt").read_text().split() == ["2", "3"]
    assert (folder / "id.txt").read_text().split() == ["a", "b"]
    assert is_bigfile(folder) and not list(folder.glob(".*"))  # no temporary file left


def test_hand_written_bigfile_reads_back_in_request_order(tmp_path):
    """A bigfile written by hand reads back exactly, rows in the order asked for."""
    table = BigFile(write_by_hand(tmp_path / "hand"))
    assert table.ids == ["a", "b"] and table.dim == 3 and len(table) == 2 and "b" in table and "c" not in table
    rows = table.read(["b", "a"])
    assert rows.dtype == np.float32 and rows.shape == (2, 3)
    np.testing.assert_array_equal(rows, np.array(GOLDEN_ROWS, np.float32)[[1, 0]])
    np.testing.assert_array_equal(table.read(["a", "a"]), np.array(GOLDEN_ROWS, np.float32)[[0, 0]])


def test_real_features_round_trip_exactly(tmp_path):
    """The embedded test features (1000 x 1280) with their image ids survive write + read bit for bit."""
    features = np.load(EMBEDDED_DATA / "test_ims.npy")
    ids = files.read_lines(EMBEDDED_DATA / "test_ids.txt", "image id")
    assert features.shape == (1000, 1280) and len(ids) == 1000
    write_bigfile(tmp_path / "test_ims", ids, features)
    table = BigFile(tmp_path / "test_ims")
    assert table.ids == ids and table.dim == 1280
    assert np.array_equal(table.read(ids), features.astype(np.float32))
    order = np.random.default_rng(0).permutation(1000)[:50]
    assert np.array_equal(table.read([ids[k] for k in order]), features[order].astype(np.float32))


def _nan_row(folder):
    rows = np.array(GOLDEN_ROWS, np.float32)
    rows[1, 2] = np.nan
    write_by_hand(folder, rows.astype("<f4").tobytes())
    BigFile(folder).read(["a", "b"])


def _unknown_id(folder):
    BigFile(write_by_hand(folder)).read(["a", "nope"])


@pytest.mark.parametrize("make, message", [
    (lambda f: write_by_hand(f, GOLDEN_BYTES[:-4]), r"feature\.bin: 20 bytes, but .* need 24"),
    (lambda f: write_by_hand(f, shape="3 3"), r"id\.txt: 2 ids, but shape\.txt says 3 rows"),
    (lambda f: write_by_hand(f, shape="2 x"), r"shape\.txt: expected two positive integers"),
    (lambda f: write_by_hand(f, shape="2 3 1"), r"shape\.txt: expected two positive integers"),
    (lambda f: write_by_hand(f, shape="0 3", ids=""), r"shape\.txt: expected two positive integers"),
    (lambda f: write_by_hand(f, ids="a b c"), r"id\.txt: 3 ids, but shape\.txt says 2 rows"),
    (lambda f: write_by_hand(f, ids="a a"), r"id\.txt: id 'a' appears more than once"),
    (_nan_row, r"feature\.bin: the row of id 'b' holds NaN or inf"),
    (_unknown_id, r"no features for id 'nope'"),
    (lambda f: (write_by_hand(f), (f / "feature.bin").unlink()), r"feature\.bin: file not found"),
    (lambda f: (write_by_hand(f), (f / "id.txt").unlink()), r"id\.txt: file not found"),
    (lambda f: (write_by_hand(f), (f / "shape.txt").unlink()), r"shape\.txt: file not found"),
    (lambda f: (write_by_hand(f), (f / "feature.bin").unlink(), (f / "feature.bin").mkdir()),
     r"feature\.bin: not a regular file"),
])
def test_malformed_bigfile_is_a_one_line_error_naming_the_file(tmp_path, make, message):
    """Each malformed folder raises InputError naming the file at fault (and the folder)."""
    folder = tmp_path / "bad"
    with pytest.raises(InputError, match=message) as error:
        make(folder)
        BigFile(folder)
    assert str(folder) in str(error.value) and "\n" not in str(error.value)


def test_huge_announced_shape_fails_fast_without_allocating(tmp_path):
    """A shape.txt announcing 10**9 rows (or a 10**9-wide row) over a tiny file fails at once, allocating nothing."""
    # 10**9 rows: the id count (2) contradicts it before feature.bin is looked at.
    write_by_hand(tmp_path / "rows", shape=f"{10**9} 3")
    # 2 ids but 10**9 columns: only the size check (8 bytes vs 8e9) can catch it.
    write_by_hand(tmp_path / "dim", GOLDEN_BYTES[:8], shape=f"2 {10**9}")
    for folder, message in (("rows", r"id\.txt: 2 ids, but shape\.txt says 1000000000 rows"),
                            ("dim", r"feature\.bin: 8 bytes, but shape\.txt's 2 x 1000000000 float32 rows need 8000000000")):
        start = time.perf_counter()
        with pytest.raises(InputError, match=message):
            BigFile(tmp_path / folder)
        assert time.perf_counter() - start < 1.0


def _raises_without_blocking(function, fifo, seconds=10):
    """The exception `function()` raises, failing the test if it blocks on `fifo`."""
    outcome = {}

    def target():
        try:
            function()
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        # Unblock a reader stuck opening the FIFO before failing.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(seconds)
        pytest.fail(f"reading a bigfile blocked on the FIFO {fifo}")
    return outcome.get("error")


@pytest.mark.parametrize("name, message", [
    ("feature.bin", r"feature\.bin: not a regular file"),
    ("shape.txt", r"shape\.txt: not a regular file"),
    ("id.txt", r"id\.txt: not a regular file"),
])
def test_fifo_in_place_of_a_file_is_an_error_not_a_hang(tmp_path, name, message):
    """A FIFO in place of feature.bin (or shape.txt, id.txt) raises InputError instead of blocking."""
    folder = write_by_hand(tmp_path / "fifo")
    (folder / name).unlink()
    os.mkfifo(folder / name)
    error = _raises_without_blocking(lambda: BigFile(folder), folder / name)
    assert isinstance(error, InputError), repr(error)
    with pytest.raises(InputError, match=message):
        raise error


@pytest.mark.parametrize("shape, message", [
    # Python refuses to convert an integer of over 4,300 digits (a ValueError before the fix).
    ("9" * 5000 + " 3", r"shape\.txt: the row count has 5000 digits \(999999999999\.\.\.\): larger than any feature file"),
    ("2 " + "7" * 5000, r"shape\.txt: the dimension has 5000 digits \(777777777777\.\.\.\): larger than any feature file"),
    ("1" + "0" * 18 + " 3", r"shape\.txt: the row count has 19 digits"),
    ("-2 3", r"shape\.txt: expected two positive integers '<rows> <dimension>', got '-2 3'"),
    ("2.0 3", r"shape\.txt: expected two positive integers '<rows> <dimension>', got '2\.0 3'"),
    ("2e0 3", r"shape\.txt: expected two positive integers '<rows> <dimension>', got '2e0 3'"),
    ("2 00", r"shape\.txt: expected two positive integers '<rows> <dimension>', got '2 00'"),
    ("3" * 100 + " x", r"shape\.txt: expected two positive integers .*, got '3{80}' \(and 22 more characters\)$"),
])
def test_shape_txt_of_huge_or_malformed_numbers_is_an_input_error(tmp_path, shape, message):
    """shape.txt with a 5,000-digit count, a negative, a decimal or an
    exponent is a one-line InputError naming shape.txt."""
    folder = write_by_hand(tmp_path / "shape", shape=shape)
    with pytest.raises(InputError, match=message) as error:
        BigFile(folder)
    assert str(error.value).startswith(str(folder / "shape.txt")) and "\n" not in str(error.value)
    assert len(str(error.value)) < 300


def test_leading_zeros_in_shape_txt_do_not_count_as_digits(tmp_path):
    table = BigFile(write_by_hand(tmp_path / "zeros", shape="0" * 30 + "2 0003"))
    assert (len(table), table.dim) == (2, 3)


def test_non_ascii_digit_in_shape_is_an_input_error(tmp_path):
    """shape.txt '² 3' (a character str.isdigit accepts and int rejects) is an InputError naming shape.txt."""
    with pytest.raises(InputError, match=r"shape\.txt"):
        BigFile(write_by_hand(tmp_path / "sup", shape="\u00b2 3"))


def test_word_vectors_in_bigfile_format(tmp_path):
    """load_word_vectors reads a bigfile folder of 3 words as WordVectors with those vectors."""
    from data.word_vectors import load_word_vectors

    words = ["dog", "runs", "grass"]
    vectors = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    write_bigfile(tmp_path / "vec4", words, vectors)
    loaded = load_word_vectors(tmp_path / "vec4")
    assert loaded.index_to_key == words and loaded.vector_size == 4
    for word, vector in zip(words, vectors):
        np.testing.assert_array_equal(loaded[word], vector)
    assert loaded.source == str(tmp_path / "vec4")
