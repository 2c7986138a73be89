"""`python -m search index/query`: the printed results, --json, the --html
page (opened in headless Chromium), and every bad input of the issue: one
`error:` line and exit status 2, before any encoding, and an existing
index never left half-overwritten."""

import contextlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from search import build, store
from search.__main__ import main
from search.index import Index
from tests.helpers import run_timing_imports
from tests.search.hand_exports import good_images


def run(capsys, *argv):
    """(exit status, stdout, stderr) of `python -m search ARGV`."""
    status = main([str(word) for word in argv])
    out, err = capsys.readouterr()
    return status, out, err


def error_line(err):
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def built_image_index(exports, photos, tmp_path_factory):
    """`python -m search index` of `photos` with the cosine export, run
    once for the module's tests (its printed lines checked here)."""
    out = tmp_path_factory.mktemp("built") / "photos.index"
    printed, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(err):
        status = main(["index", "--saved-model", str(exports["cosine"]), "--images", str(photos), "--out", str(out)])
    assert status == 0, err.getvalue()
    assert printed.getvalue() == f"{out}: 11 images, 2 skipped (listed in index.json)\n"
    assert "skipped a/broken.jpg: not a decodable JPEG/PNG image (Unknown image file format" in err.getvalue()
    assert "skipped empty.jpeg: not a decodable JPEG/PNG image" in err.getvalue()
    return out


@pytest.fixture
def image_index(built_image_index, tmp_path):
    """A copy of `built_image_index` of the test's own (an index records
    no path of its own), to query, damage or build again."""
    out = tmp_path / "photos.index"
    shutil.copytree(built_image_index, out)
    return out


def test_query_prints_the_best_images_and_their_scores(image_index, exports, photos, capsys):
    status, printed, _ = run(capsys, "query", image_index, "a dog runs on the beach", "--k", "3")
    assert status == 0
    lines = printed.splitlines()
    assert [line.split()[0] for line in lines] == ["1", "2", "3"]
    loaded = tf.saved_model.load(str(exports["cosine"]))
    images = good_images(photos)
    ids = sorted(images)
    scores = loaded.similarity(loaded.encode_image_bytes(tf.constant([images[name] for name in ids])),
                               loaded.encode_text(tf.constant(["a dog runs on the beach"]))).numpy()[:, 0]
    best = np.argsort(-scores, kind="stable")[:3]
    assert [line.split()[2] for line in lines] == [str(photos / ids[j]) for j in best]
    np.testing.assert_allclose([float(line.split()[1]) for line in lines], scores[best], atol=1e-4)

    status, printed, _ = run(capsys, "query", image_index, "a dog runs on the beach", "--k", "3", "--json")
    results = json.loads(printed)["results"]
    assert [result["item"] for result in results] == [str(photos / ids[j]) for j in best]
    assert [result["id"] for result in results] == [ids[j] for j in best]


def test_the_html_page_shows_the_thumbnails_in_headless_chromium(image_index, tmp_path, capsys):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs Chromium (Debian: apt-get install chromium)")
    page = tmp_path / "page.html"
    status, _, err = run(capsys, "query", image_index, "a dog runs on the beach", "--k", "5", "--html", page)
    assert status == 0, err
    # A copy of the page that records, once everything has loaded, which
    # images the browser decoded (natural width > 0).
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", (
        "<script>addEventListener('load', () => { document.body.dataset.loaded = "
        "[...document.images].map(i => i.complete && i.naturalWidth > 0 ? 1 : 0).join(','); });</script></body>")))
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", checked.as_uri()], capture_output=True, text=True, timeout=120).stdout
    loaded = re.search(r'data-loaded="([01,]*)"', dom)
    assert loaded, dom[:2000]
    assert loaded.group(1) == "1,1,1,1,1"
    assert len(re.findall(r'<figure class="result"', dom)) == 5


def test_an_image_queries_a_caption_index(exports, photos, tmp_path, capsys):
    captions = tmp_path / "captions.txt"
    captions.write_text("a dog runs\na girl in a pink dress\nsnow and mountains\n")
    out = tmp_path / "captions.index"
    assert run(capsys, "index", "--saved-model", exports["cosine"], "--captions", captions, "--out", out)[0] == 0
    status, printed, err = run(capsys, "query", out, "--image", photos / "p0.png", "--k", "2", "--json")
    assert status == 0, err
    results = json.loads(printed)["results"]
    assert len(results) == 2
    assert {result["item"] for result in results} <= {"a dog runs", "a girl in a pink dress", "snow and mountains"}
    page = tmp_path / "page.html"
    assert run(capsys, "query", out, "--image", photos / "p0.png", "--html", page)[0] == 0
    assert (photos / "p0.png").resolve().as_uri() in page.read_text()


# --- bad input ---------------------------------------------------------------------------------


def index_argv(exports, source, out, model="cosine"):
    return ["index", "--saved-model", exports[model], *source, "--out", out]


def test_a_missing_or_empty_image_folder(exports, tmp_path, capsys):
    status, _, err = run(capsys, *index_argv(exports, ["--images", tmp_path / "nowhere"], tmp_path / "i"))
    assert status == 2 and error_line(err) == f"error: --images {tmp_path / 'nowhere'}: no such folder"
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("no image")
    status, _, err = run(capsys, *index_argv(exports, ["--images", empty], tmp_path / "i"))
    assert status == 2 and error_line(err) == (f"error: --images {empty}: holds no JPEG or PNG image "
                                               "(.jpg, .jpeg, .png, in any sub-folder)")
    assert not (tmp_path / "i").exists() and not (tmp_path / "i.partial").exists()


def test_a_model_without_the_image_signature_cannot_index_images(exports, photos, tmp_path, capsys):
    status, _, err = run(capsys, *index_argv(exports, ["--images", photos], tmp_path / "i", model="text-only"))
    assert status == 2
    assert error_line(err) == (f"error: --images: the SavedModel {exports['text-only']} takes precomputed image "
                               "features only (it has no encode_image_bytes signature); export a run whose "
                               "features have a known backbone to index or query with images")
    assert not (tmp_path / "i.partial").exists()


def test_a_caption_file_with_an_empty_line(exports, tmp_path, capsys):
    captions = tmp_path / "captions.txt"
    captions.write_text("a dog runs\n\nsnow\n")
    status, _, err = run(capsys, *index_argv(exports, ["--captions", captions], tmp_path / "i"))
    assert status == 2 and error_line(err) == f"error: {captions}: line 2 is an empty caption"


def test_an_out_that_is_not_an_index(exports, photos, tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("mine")
    status, _, err = run(capsys, *index_argv(exports, ["--images", photos], file))
    assert status == 2 and error_line(err) == f"error: --out {file}: exists and is not an index (a file)"
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    status, _, err = run(capsys, *index_argv(exports, ["--images", photos], folder))
    assert status == 2 and error_line(err) == (f"error: --out {folder}: exists and is not an index (a folder "
                                               "without index.json); choose a new name")
    assert file.read_text() == "mine" and sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]


def test_an_index_queried_with_another_model(image_index, exports, capsys):
    status, _, err = run(capsys, "query", image_index, "a dog", "--saved-model", exports["cosine-other"])
    assert status == 2
    assert re.fullmatch(rf"error: {re.escape(str(image_index))}: built with another model \({re.escape(str(exports['cosine']))}, "
                        rf"fingerprint [\d/]+\); {re.escape(str(exports['cosine-other']))} has fingerprint [\d/]+",
                        error_line(err))


def test_a_truncated_shard(image_index, capsys):
    (shard,) = image_index.glob("shard-*.npz")
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    status, _, err = run(capsys, "query", image_index, "a dog")
    assert status == 2 and error_line(err) == (f"error: {shard}: damaged shard ({size // 2} bytes; the index wrote "
                                               f"{size}); build the index again")


def test_a_corrupted_shard(image_index, capsys):
    """Same size, one byte of the encodings changed: the zip's CRC finds it."""
    (shard,) = image_index.glob("shard-*.npz")
    data = bytearray(shard.read_bytes())
    start = data.index(b"encodings.npy") + 200  # inside that member's data
    data[start] ^= 0xFF
    shard.write_bytes(bytes(data))
    status, _, err = run(capsys, "query", image_index, "a dog")
    assert status == 2
    assert re.fullmatch(rf"error: {re.escape(str(shard))}: damaged shard \(.*\); build the index again",
                        error_line(err))


def test_an_index_of_the_other_kind_or_no_query(image_index, photos, tmp_path, capsys):
    status, _, err = run(capsys, "query", image_index, "--image", photos / "p0.png")
    assert status == 2 and error_line(err) == f"error: {image_index}: an index of images; query it with a text"
    status, _, err = run(capsys, "query", image_index)
    assert status == 2 and error_line(err) == ("error: give a query text (an index of images) or --image FILE "
                                               "(an index of captions)")
    status, _, err = run(capsys, "query", tmp_path / "nowhere", "a dog")
    assert status == 2 and error_line(err) == f"error: {tmp_path / 'nowhere'}: no such index (not a folder)"


def test_a_query_longer_than_any_model_takes_is_refused_before_the_index_opens(image_index, capsys, monkeypatch):
    def opened(*args):
        raise AssertionError("the index was opened")

    monkeypatch.setattr(Index, "open", opened)
    status, _, err = run(capsys, "query", image_index, " ".join(["dog"] * 2000))
    assert status == 2
    assert error_line(err) == "error: the query text has 2,000 tokens; the zoo's models take at most 512"


def test_a_query_the_model_refuses_is_one_line(image_index, capsys):
    # 600 Treebank tokens but 300 alnum ones: within the zoo's limit for a
    # model of the alnum tokenizer, so the model decides (the hand export
    # takes 12 words).
    status, _, err = run(capsys, "query", image_index, " ".join(["dog ,"] * 300))
    assert status == 2
    assert error_line(err).startswith("error: the model refuses the query text (assertion failed: [caption too long]")


def test_an_interrupted_rebuild_leaves_the_existing_index_whole(image_index, exports, photos, capsys, monkeypatch,
                                                                interrupt_second_batch):
    before = {path.name: path.read_bytes() for path in image_index.iterdir()}
    _, expected, _ = run(capsys, "query", image_index, "a dog", "--json")
    real_encode = interrupt_second_batch
    monkeypatch.setattr(store, "IMAGE_BATCH", 3)
    status, _, err = run(capsys, *index_argv(exports, ["--images", photos], image_index))
    assert status == 130
    assert err.strip().endswith(f"interrupted: 0 of 13 images are kept in {store.staging_dir(image_index)}; "
                                "the same command resumes from there")
    assert {path.name: path.read_bytes() for path in image_index.iterdir()} == before
    assert run(capsys, "query", image_index, "a dog", "--json")[1] == expected
    monkeypatch.setattr(build.Source, "encode", real_encode)
    assert run(capsys, *index_argv(exports, ["--images", photos], image_index, model="dot"))[0] == 0
    assert json.loads(Path(image_index / "index.json").read_text())["model"]["metric"] == "dot"
    assert not store.staging_dir(image_index).exists()


def test_an_approximate_index_is_queried_through_the_graph_or_exactly(exports, photos, tmp_path, capsys):
    out = tmp_path / "approximate.index"
    status, printed, _ = run(capsys, *index_argv(exports, ["--images", photos], out), "--approximate", "always")
    assert status == 0 and printed == f"{out}: 11 images and an approximate index, 2 skipped (listed in index.json)\n"
    results = {}
    for options in ([], ["--exact"], ["--ef-search", "11"]):
        status, printed, _ = run(capsys, "query", out, "a dog runs on the beach", "--k", "11", "--json", *options)
        assert status == 0
        results[" ".join(options)] = [result["id"] for result in json.loads(printed)["results"]]
    # With 11 items, a graph search keeping 11 candidates sees them all: the exact ranking.
    assert results["--ef-search 11"] == results["--exact"]
    assert sorted(results[""]) == sorted(results["--exact"])


def test_an_unfinished_index_a_damaged_approximate_index_and_an_image_query_without_the_signature(
        exports, photos, tmp_path, capsys, monkeypatch):
    real_encode = build.Source.encode

    def interrupted(source, ids):
        raise KeyboardInterrupt

    monkeypatch.setattr(build.Source, "encode", interrupted)
    assert run(capsys, *index_argv(exports, ["--images", photos], tmp_path / "i"))[0] == 130
    monkeypatch.setattr(build.Source, "encode", real_encode)
    partial = store.staging_dir(tmp_path / "i")
    status, _, err = run(capsys, "query", partial, "a dog")
    assert status == 2 and error_line(err) == f"error: {partial}: an unfinished index; run its build again to complete it"

    out = tmp_path / "approximate.index"
    assert run(capsys, *index_argv(exports, ["--images", photos], out), "--approximate", "always")[0] == 0
    graph = out / "approximate.faiss"
    graph.write_bytes(graph.read_bytes()[:100])
    status, _, err = run(capsys, "query", out, "a dog")
    assert status == 2
    assert re.fullmatch(rf"error: {re.escape(str(graph))}: damaged approximate index \(.+\); build the index again",
                        error_line(err))

    captions = tmp_path / "captions.txt"
    captions.write_text("a dog runs\nsnow\n")
    out = tmp_path / "captions.index"
    assert run(capsys, *index_argv(exports, ["--captions", captions], out, model="text-only"))[0] == 0
    status, _, err = run(capsys, "query", out, "--image", photos / "p0.png")
    assert status == 2 and error_line(err).startswith(f"error: --image: the SavedModel {exports['text-only']} takes "
                                                      "precomputed image features only")


def test_a_saved_model_that_is_not_one(photos, tmp_path, capsys):
    status, _, err = run(capsys, "index", "--saved-model", tmp_path / "nowhere", "--images", photos, "--out",
                         tmp_path / "i")
    assert status == 2 and error_line(err).startswith(f"error: {tmp_path / 'nowhere'}: not a readable SavedModel (")


@pytest.mark.parametrize("argv, error", [
    (["query", "{tmp}/nowhere", "a dog"], "error: {tmp}/nowhere: no such index (not a folder)"),
    (["index", "--saved-model", "{tmp}", "--images", "{tmp}", "--out", "{tmp}/i"],
     "error: {tmp}: not a readable SavedModel (no saved_model.pb in that folder)"),
    (["index", "--saved-model", "{tmp}/model", "--images", "{tmp}/nowhere", "--out", "{tmp}/i"],
     "error: --images {tmp}/nowhere: no such folder"),
    (["index", "--saved-model", "{tmp}/model", "--captions", "{tmp}/nowhere.txt", "--out", "{tmp}/i"],
     "error: {tmp}/nowhere.txt: file not found"),
], ids=["index", "saved-model", "images", "captions"])
def test_a_mistyped_path_is_refused_before_tensorflow_loads(argv, error, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"")  # a SavedModel, as far as can be told without reading it
    status, messages, imported = run_timing_imports(["-m", "search", *[arg.format(tmp=tmp_path) for arg in argv]])
    assert status == 2 and messages == [error.format(tmp=tmp_path)]
    assert "common.errors" in imported and "tensorflow" not in imported
