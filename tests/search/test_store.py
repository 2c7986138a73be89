"""Tests of `search.store`, the index format: where an index is built,
which folders may receive one, the manifest, shards written and read back
(and damaged ones named), and finishing a build: its shards listed and
checked, the staging folder put in place of the old index."""

import json

import numpy as np
import pytest

from common.errors import InputError
from search import store


def test_an_index_is_built_beside_it_in_a_partial_folder(tmp_path):
    assert store.staging_dir(tmp_path / "photos.index") == tmp_path / "photos.index.partial"


def test_check_out_takes_a_new_folder_an_empty_one_or_an_index(tmp_path):
    store.check_out(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    store.check_out(tmp_path / "empty")
    store.write_manifest(tmp_path / "empty", {"complete": True})
    (tmp_path / "empty" / "shard-000000.npz").write_bytes(b"")
    store.check_out(tmp_path / "empty")  # now an index: it is replaced once the new one is complete


@pytest.mark.parametrize("make, message", [
    (lambda out: None, "the folder {parent} does not exist"),
    (lambda out: out.write_text("x"), "exists and is not an index (a file)"),
    (lambda out: (out.mkdir(), (out / "me.jpg").write_bytes(b"")), "exists and is not an index (a folder without "
                                                                     "index.json); choose a new name"),
    (lambda out: store.staging_dir(out).mkdir(), "{staging} exists and is not an unfinished index; move it away"),
], ids=["no parent", "a file", "someone's folder", "a foreign partial folder"])
def test_check_out_refuses_before_any_work(tmp_path, make, message):
    out = (tmp_path / "missing" / "i") if "parent" in message else tmp_path / "i"
    make(out)
    expected = message.format(parent=out.parent, staging=store.staging_dir(out))
    with pytest.raises(InputError) as error:
        store.check_out(out, "--out")
    assert str(error.value) == f"--out {out}: {expected}"


def test_the_manifest_is_written_with_its_format_and_read_back(tmp_path):
    store.write_manifest(tmp_path, {"kind": "captions", "complete": False})
    written = json.loads((tmp_path / "index.json").read_text())
    assert list(written) == ["format", "kind", "complete"] and written["format"] == "zoo-search-index/1"
    assert store.read_manifest(tmp_path) == written


@pytest.mark.parametrize("content, message", [
    (None, "{folder}: not an index (no index.json)"),
    ("{not json", "{folder}/index.json: unreadable index manifest ("),
    ('{"format": "zoo-search-index/0"}', "{folder}/index.json: not a manifest of this index format (zoo-search-index/1)"),
    ("[1, 2]", "{folder}/index.json: not a manifest of this index format"),
])
def test_a_folder_without_a_manifest_of_the_format_is_not_an_index(tmp_path, content, message):
    if content is not None:
        (tmp_path / "index.json").write_text(content)
    with pytest.raises(InputError) as error:
        store.read_manifest(tmp_path)
    assert str(error.value).startswith(message.format(folder=tmp_path))
    with pytest.raises(InputError, match=f"^{tmp_path / 'nothing'}: no such index \\(not a folder\\)$"):
        store.read_manifest(tmp_path / "nothing")


def test_a_shard_reads_back_as_written_with_its_second_stage_beside_it(tmp_path):
    encodings = np.arange(12, dtype=np.float64).reshape(3, 4)
    path = tmp_path / "shard-000000.npz"
    store.write_shard(path, encodings, ["a/x.jpg", "b.png", "é.jpg"], [("bad.jpg", "unreadable")],
                      rerank_encodings=-encodings[:, :2])
    arrays = store.read_shard(path)
    assert arrays["encodings"].dtype == np.float32
    np.testing.assert_array_equal(arrays["encodings"], encodings)
    assert arrays["ids"].tolist() == ["a/x.jpg", "b.png", "é.jpg"]
    assert arrays["skipped"].tolist() == ["bad.jpg"] and arrays["skip_reasons"].tolist() == ["unreadable"]
    assert store.rerank_file(path) == tmp_path / "shard-000000.rerank.npy"
    np.testing.assert_array_equal(np.load(store.rerank_file(path)), -encodings[:, :2])
    assert set(store.read_shard(path, ("ids",))) == {"ids"}


def test_a_missing_truncated_or_inconsistent_shard_is_named(tmp_path):
    path = tmp_path / "shard-000000.npz"
    with pytest.raises(InputError, match=f"^{path}: shard missing$"):
        store.read_shard(path)
    store.write_shard(path, np.zeros((2, 3)), ["a", "b"])
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(InputError, match=f"^{path}: damaged shard \\(.*\\); build the index again$"):
        store.read_shard(path)
    np.savez(path, encodings=np.zeros((2, 3), np.float32), ids=np.array(["a"]), skipped=np.array([], str),
             skip_reasons=np.array([], str))
    with pytest.raises(InputError, match=f"^{path}: damaged shard \\(2 encodings for 1 ids\\)$"):
        store.read_shard(path)


def staged(tmp_path, shards, rerank_k=None):
    """A staging folder with an unfinished manifest and the given shards
    ([(ids, skipped)]), encodings [n, 2]."""
    staging = tmp_path / "i.partial"
    staging.mkdir()
    store.write_manifest(staging, {"kind": "images", "complete": False, "model": {"rerank_k": rerank_k}})
    for number, (ids, skipped) in enumerate(shards):
        encodings = np.ones((len(ids), 2))
        store.write_shard(staging / f"shard-{number:06d}.npz", encodings, ids, skipped,
                          None if rerank_k is None else encodings)
    return staging


def test_finishing_lists_the_shards_in_order_and_puts_the_index_in_place(tmp_path):
    staging = staged(tmp_path, [(["a", "b"], [("z.jpg", "unreadable")]), (["c"], [("y.jpg", "not an image")])])
    out = tmp_path / "i"
    out.mkdir()
    (out / "old").write_text("the previous index")
    approximate_calls = []

    def approximate(paths, items, manifest):
        approximate_calls.append(([path.name for path in paths], items))
        return {"file": "approximate.faiss"}

    manifest = store.finish(staging, out, approximate)
    assert approximate_calls == [(["shard-000000.npz", "shard-000001.npz"], 3)]
    assert [(shard["file"], shard["items"]) for shard in manifest["shards"]] == [("shard-000000.npz", 2),
                                                                                 ("shard-000001.npz", 1)]
    assert manifest["items"] == 3 and manifest["complete"] is True
    assert manifest["skipped"] == [["y.jpg", "not an image"], ["z.jpg", "unreadable"]]
    assert manifest["approximate"] == {"file": "approximate.faiss"}
    assert not staging.exists() and not (out / "old").exists()
    assert store.read_manifest(out) == {"format": store.FORMAT, **manifest}
    for shard in manifest["shards"]:
        assert shard["bytes"] == (out / shard["file"]).stat().st_size


def test_finishing_refuses_an_item_in_two_shards(tmp_path):
    staging = staged(tmp_path, [(["a", "b"], []), (["c", "b"], [])])
    with pytest.raises(InputError, match=r"shard-000001.npz: holds 'b', which another shard holds too$"):
        store.finish(staging, tmp_path / "i", lambda *args: None)


@pytest.mark.parametrize("shards, message", [
    ([], "nothing to index"),
    ([([], [("x.jpg", "unreadable")])], r"no item could be encoded \(1 skipped, e.g. x.jpg: unreadable\)"),
])
def test_finishing_an_index_of_nothing_is_an_error(tmp_path, shards, message):
    staging = staged(tmp_path, shards)
    with pytest.raises(InputError, match=f"^{tmp_path / 'i'}: {message}$"):
        store.finish(staging, tmp_path / "i", lambda *args: None)
    assert staging.exists()  # left for the user to see


def test_a_two_stage_index_needs_each_shards_second_stage(tmp_path):
    staging = staged(tmp_path, [(["a", "b"], [])], rerank_k=5)
    rerank = store.rerank_file(staging / "shard-000000.npz")
    size = rerank.stat().st_size
    manifest = store.finish(staging, tmp_path / "i", lambda *args: None)
    assert manifest["shards"][0]["rerank_bytes"] == size

    staging = staged(tmp_path, [(["a", "b"], [])], rerank_k=5)
    np.save(store.rerank_file(staging / "shard-000000.npz"), np.ones((3, 2), np.float32))
    with pytest.raises(InputError, match=r"shard-000000.rerank.npy: 3 encodings for the 2 items of shard-000000.npz"):
        store.finish(staging, tmp_path / "j", lambda *args: None)
    store.rerank_file(staging / "shard-000000.npz").unlink()
    with pytest.raises(InputError, match=r"shard-000000.rerank.npy: missing \(the second stage's encodings of "):
        store.finish(staging, tmp_path / "j", lambda *args: None)
