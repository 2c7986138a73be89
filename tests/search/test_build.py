"""Tests of `search.build`: what is indexed (`Source`: images or captions,
each named by its path or line), the manifest of a build, shards of
`shard_items` items partitioning the source in its order, resuming the
same build and restarting another's, and the build's report. (Searching
what it built: tests/search/test_index.py and test_main.py.)"""

import hashlib

import numpy as np
import pytest

from common.errors import InputError
from search import build, store
from search.model import SearchModel

CAPTIONS = ["a dog runs", "two cats play", "a dog runs", "a red car", "children in water", "a girl", "a boy jumps"]


@pytest.fixture
def caption_file(tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text("".join(f"{caption}\n" for caption in CAPTIONS), encoding="utf-8")
    return path


def test_a_source_is_images_or_captions_not_both(exports, photos, caption_file):
    model = SearchModel(exports["cosine"])
    for images, captions in ((None, None), (photos, caption_file)):
        with pytest.raises(InputError, match="^give a folder of images or a caption file to index, not both$"):
            build.Source(model, images, captions)


def test_captions_are_named_by_their_line_and_a_repeated_one_is_kept(exports, caption_file):
    source = build.Source(SearchModel(exports["dot"]), captions=caption_file)
    assert source.kind == "captions" and source.ids == [str(line) for line in range(1, 8)]
    encodings, ids, skipped = source.encode(["3", "1"])
    assert ids == ["3", "1"] and skipped == []
    np.testing.assert_array_equal(encodings[0], encodings[1])  # lines 1 and 3 hold the same caption
    assert source.batch_size() == build.CAPTION_BATCH


def test_images_are_named_by_their_path_under_the_folder(exports, photos):
    source = build.Source(SearchModel(exports["cosine"]), images=photos)
    assert source.kind == "images" and source.batch_size() == store.IMAGE_BATCH
    assert source.ids == sorted(source.ids) and "a/broken.jpg" in source.ids and "notes.txt" not in source.ids
    encodings, ids, skipped = source.encode(["p0.png", "a/broken.jpg"])
    assert ids == ["p0.png"] and encodings.shape == (1, 6) and [name for name, _ in skipped] == ["a/broken.jpg"]


def test_the_manifest_describes_the_source_and_the_model(exports, caption_file):
    model = SearchModel(exports["dot"])
    source = build.Source(model, captions=caption_file)
    manifest = build.manifest_for(model, source)
    assert manifest == {
        "kind": "captions", "source": str(caption_file.resolve()), "source_digest": source.description["source_digest"],
        "complete": False,
        "model": {"path": str(exports["dot"].resolve()), "fingerprint": model.fingerprint, "joint_space": True,
                  "metric": "dot", "encoding_shape": [6]},
    }
    assert manifest["source_digest"] == hashlib.sha256(caption_file.read_bytes()).hexdigest()


def test_shards_of_shard_items_partition_the_source_in_its_order(exports, caption_file, tmp_path):
    model = SearchModel(exports["dot"])
    out = tmp_path / "captions.index"
    manifest = build.build_index(model, out, captions=caption_file, approximate_choice="no", shard_items=3)
    assert [shard["items"] for shard in manifest["shards"]] == [3, 3, 1] and manifest["items"] == 7
    ids, encodings = [], []
    for shard in manifest["shards"]:
        arrays = store.read_shard(out / shard["file"])
        ids += arrays["ids"].tolist()
        encodings.append(arrays["encodings"])
    assert ids == [str(line) for line in range(1, 8)]
    np.testing.assert_allclose(np.concatenate(encodings), model.encode_text_batch(CAPTIONS), rtol=1e-6)
    assert (out / build.CAPTIONS_FILE).read_text(encoding="utf-8").splitlines() == CAPTIONS
    assert manifest["approximate"] is None and not store.staging_dir(out).exists()


def test_the_same_build_resumes_and_another_starts_anew(exports, caption_file, tmp_path, capsys):
    model = SearchModel(exports["dot"])
    source = build.Source(model, captions=caption_file)
    manifest = build.manifest_for(model, source)
    staging = tmp_path / "i.partial"
    assert build.start_or_resume(staging, manifest, source) == (set(), 0)
    store.write_shard(staging / "shard-000000.npz", np.zeros((2, 6)), ["1", "2"], [("3", "refused")])
    assert build.start_or_resume(staging, manifest, source) == ({"1", "2", "3"}, 1)
    assert capsys.readouterr().err == f"resuming {staging}: 3 of 7 captions done\n"
    other = build.manifest_for(SearchModel(exports["cosine"]), build.Source(SearchModel(exports["cosine"]),
                                                                           captions=caption_file))
    assert build.start_or_resume(staging, other, source) == (set(), 0)
    assert capsys.readouterr().err == f"{staging}: an unfinished index of another model or source; starting it anew\n"
    assert not store.shard_files(staging) and store.read_manifest(staging) == {"format": store.FORMAT, **other}


def test_a_caption_the_model_refuses_names_its_line(exports, tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text("a dog\n" + "word " * 20 + "\n")  # hand exports take 12 words at most
    source = build.Source(SearchModel(exports["dot"]), captions=path)
    with pytest.raises(InputError, match=f"^{path.resolve()}: line 2: the model refuses the caption \\("):
        source.encode(["1", "2"])


def test_the_report_lists_the_skipped_files_then_one_line(tmp_path, capsys):
    manifest = {"items": 9, "kind": "images", "approximate": {"file": "a"}, "skipped": [["x.jpg", "unreadable"]],
                "model": {"rerank_k": 20}}
    build.report(tmp_path / "i", manifest)
    out, err = capsys.readouterr()
    assert err == "skipped x.jpg: unreadable\n"
    assert out == (f"{tmp_path / 'i'}: 9 images and an approximate index, re-ranked by the second stage in lists "
                   "of 20, 1 skipped (listed in index.json)\n")
    build.report(tmp_path / "i", {"items": 2, "kind": "captions", "approximate": None, "skipped": [], "model": {}})
    assert capsys.readouterr() == (f"{tmp_path / 'i'}: 2 captions\n", "")
