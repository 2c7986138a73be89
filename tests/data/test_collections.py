"""Tests of `data.collections`: caption ids -> items, frame pooling, safe
parsing of `video2frames.txt`, errors, the exact reduction of one-frame
"videos" to the embedded Flickr8k images (data, training and evaluation),
multi-frame and two-feature collections trained end to end, and the CLI.

The Flickr8k features are images, not videos: the multi-frame and
two-feature tests only prove the mechanics (pooling, concatenation) run
end to end, not anything about video retrieval."""

import json
import math
import re

import numpy as np
import pytest

import evaluate
import train
from common.errors import InputError
from data import collections, readers, splits
from tests.helpers import EMBEDDED_DATA, evaluated_metrics

TINY = [
    "--model", "w2vv-bow", "--preset", "quick",
    "--set", "train.epochs=1", "--set", "train.max_train_images=300", "--set", "model.hidden_units=[64]",
    "--set", "train.validate_max_images=100",
]


def train_tiny(data, model_dir, *extra, export=True):
    """Trains the tiny w2vv-bow on `data` (and exports it unless `export`
    is false); returns (model_dir, results.json)."""
    assert train.main([*TINY, "--data", str(data), "--model-dir", str(model_dir), *extra], export=export) == 0
    return model_dir, json.loads((model_dir / "results.json").read_text())


# --- ids and frames ---------------------------------------------------------


@pytest.mark.parametrize("caption_id, item", [
    ("video7#enc#3", "video7"),
    ("1000268201_693b08cb0e.jpg#0", "1000268201_693b08cb0e"),
    ("clip.v2#1", "clip.v2"),
    ("clip.MP4#0", "clip"),
    ("plain", "plain"),
])
def test_item_id(caption_id, item):
    """The item is the caption id before its first '#', minus an image/video extension only."""
    assert collections.item_id(caption_id) == item


def test_frames_by_video_sorts_by_frame_number_and_ignores_other_ids():
    """Frames sort numerically (v_10 after v_2); ids without an integer suffix are left out."""
    ids = ["v_10", "w_0", "v_2", "plain", "v_x", "_3", "v_1", "a_b_7"]
    assert collections.frames_by_video(ids) == {"v": ["v_1", "v_2", "v_10"], "w": ["w_0"], "a_b": ["a_b_7"]}


def test_frames_by_video_with_a_non_ascii_digit_suffix():
    """A frame id 'v_²' is left out like any non-integer suffix."""
    assert collections.frames_by_video(["v_\u00b2", "v_1"]) == {"v": ["v_1"]}


# --- pooling on a synthetic frame collection --------------------------------

CAPTIONS_PER_VIDEO = {"v1": 1, "v2": 3, "v3": 7, "v4": 2}
FRAMES = 3


def frame_collection(root, frame_name=lambda video, k: f"{video}_{k}"):
    """Writes collection 'test' of 4 videos x 3 frames, frame rows shuffled in
    feature.bin, captions interleaved; returns (per-video frame rows, captions)."""
    rng = np.random.default_rng(7)
    frames = {v: rng.normal(size=(FRAMES, 5)).astype(np.float32) for v in CAPTIONS_PER_VIDEO}
    rows = [(frame_name(v, k), frames[v][k]) for v in frames for k in range(FRAMES)]
    rows = [rows[k] for k in rng.permutation(len(rows))]
    captions = [(v, f"caption {k} of {v}") for k in range(7) for v, n in CAPTIONS_PER_VIDEO.items() if k < n]
    collections.write_collection(root, "test", "feat", [r[0] for r in rows], np.stack([r[1] for r in rows]), captions)
    return frames, captions


def check_pooled(split, frames, captions):
    assert split.image_ids == list(CAPTIONS_PER_VIDEO)  # order of first caption
    expected = np.stack([np.mean(frames[v], axis=0) for v in split.image_ids])
    np.testing.assert_allclose(split.images, expected, rtol=0, atol=1e-6)
    assert split.captions == [caption for _, caption in captions]
    np.testing.assert_array_equal(split.caption_image, [split.image_ids.index(v) for v, _ in captions])
    assert np.bincount(split.caption_image).tolist() == list(CAPTIONS_PER_VIDEO.values())


def test_frame_features_are_mean_pooled_per_video(tmp_path):
    """Frames `<video>_<n>` (shuffled rows) pool to their mean; 1, 3, 7 or 2 captions per item map right."""
    frames, captions = frame_collection(tmp_path)
    assert (tmp_path / "test" / "TextData" / "test.caption.txt").read_text().splitlines()[:5] == [
        "v1#0 caption 0 of v1", "v2#0 caption 0 of v2", "v3#0 caption 0 of v3", "v4#0 caption 0 of v4",
        "v2#1 caption 1 of v2"]
    check_pooled(splits.load_split(tmp_path, "test", "feat"), frames, captions)


def video2frames_text(frames, frame_name, as_json):
    mapping = {v: [frame_name(v, k) for k in range(FRAMES)] for v in frames}
    return json.dumps(mapping) if as_json else repr(mapping)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "python-literal"])
def test_video2frames_gives_the_same_pooling(tmp_path, as_json):
    """Frame ids unrelated to the video names pool the same through video2frames.txt, JSON or Python literal."""
    name = lambda video, k: f"frame{ord(video[1]) * 10 + k:05d}"  # noqa: E731
    frames, captions = frame_collection(tmp_path, name)
    text = video2frames_text(frames, name, as_json)
    assert ("'" in text) != as_json  # the Python literal really is one (single quotes)
    (tmp_path / "test" / "FeatureData" / "feat" / "video2frames.txt").write_text(text)
    check_pooled(collections.load_collection(tmp_path, "test", "feat"), frames, captions)


@pytest.mark.parametrize("text", [
    "__import__('os').system('touch PWNED')",
    "{'v1': [open('x').read()]}",
    "{'v1': [open('PWNED', 'w').name]}",
    "{'v1': [__import__('pathlib').Path('PWNED').touch() or 'v1_0']}",
])
def test_video2frames_is_never_executed(tmp_path, monkeypatch, text):
    """Code in video2frames.txt raises InputError naming the file, and its side effect never happens."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text("v1_0")
    frame_collection(tmp_path / "root", lambda video, k: f"f{video}{k}")
    path = tmp_path / "root" / "test" / "FeatureData" / "feat" / "video2frames.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=r"video2frames\.txt: neither JSON nor a Python dict literal"):
        collections.load_collection(tmp_path / "root", "test", "feat")
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("text", ['["v1_0"]', '{"v1": []}', '{"v1": "v1_0"}', "{'v1': [1, 2]}", "{1: ['v1_0']}"])
def test_video2frames_of_the_wrong_shape(tmp_path, text):
    """A literal that is not a dict of video -> non-empty list of frame ids is an InputError naming the file."""
    frame_collection(tmp_path, lambda video, k: f"f{video}{k}")
    (tmp_path / "test" / "FeatureData" / "feat" / "video2frames.txt").write_text(text)
    with pytest.raises(InputError, match=r"video2frames\.txt: expected a dict of video id"):
        collections.load_collection(tmp_path, "test", "feat")


@pytest.mark.parametrize("text", ["{['v1_0']: 1}", "[" * 100_000])
def test_video2frames_that_breaks_the_parsers(tmp_path, text):
    """An unhashable dict key or a too-deep nesting is an InputError naming the file."""
    path = tmp_path / "video2frames.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=r"video2frames\.txt"):
        collections.read_video2frames(path)


def test_unknown_frames_and_items_without_features(tmp_path):
    """A listed frame that is missing, or an item with neither an id nor frames, is an InputError naming it."""
    frame_collection(tmp_path)
    v2f = tmp_path / "test" / "FeatureData" / "feat" / "video2frames.txt"
    v2f.write_text(json.dumps({"v1": ["v1_0"], "v2": ["v2_0", "lost_frame"], "v3": ["v3_0"], "v4": ["v4_0"]}))
    with pytest.raises(InputError, match=r"FeatureData/feat: no features for frame 'lost_frame' of video 'v2'"):
        collections.load_collection(tmp_path, "test", "feat")
    v2f.write_text(json.dumps({"v1": ["v1_0"], "v2": ["v2_0"], "v3": ["v3_0"]}))  # v4 in neither
    with pytest.raises(InputError, match=r"FeatureData/feat: no features for 'v4'"):
        collections.load_collection(tmp_path, "test", "feat")
    v2f.unlink()
    with (tmp_path / "test" / "TextData" / "test.caption.txt").open("a") as file:
        file.write("ghost#0 a caption of no video\n")
    with pytest.raises(InputError, match=r"no features for 'ghost' \(neither the id nor frames 'ghost_<n>'"):
        collections.load_collection(tmp_path, "test", "feat")


def test_caption_line_without_a_caption(tmp_path):
    """A caption line holding only an id ("v1#0") is an InputError naming the file and the line."""
    frame_collection(tmp_path)
    path = tmp_path / "test" / "TextData" / "test.caption.txt"
    lines = path.read_text().splitlines()
    lines.insert(2, "v1#0")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"test\.caption\.txt: line 3 is not '<caption id> <caption>'") as error:
        collections.load_collection(tmp_path, "test", "feat")
    assert str(path) in str(error.value)


# --- one-frame videos reduce exactly to the embedded images -----------------


@pytest.fixture(scope="module")
def frames_root(tmp_path_factory):
    """The embedded Flickr8k as collections of one-frame videos `<image>_0`."""
    root = tmp_path_factory.mktemp("collections") / "frames"
    collections.precomp_to_collections(EMBEDDED_DATA, root, as_frames=True)
    return root


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory, frames_root):
    """The tiny model trained on the precomp folder and on its one-frame
    collections. The precomp folder is the embedded one without its
    provenance.json, as the collections have none: neither export takes
    images (their backbone costs seconds to export and to load, and no
    test here gives images)."""
    runs = tmp_path_factory.mktemp("twin_runs")
    precomp = runs / "data"
    precomp.mkdir()
    for path in EMBEDDED_DATA.iterdir():
        if path.name != "provenance.json":
            (precomp / path.name).symlink_to(path)
    return {
        "precomp": train_tiny(precomp, runs / "precomp"),
        "frames": train_tiny(frames_root, runs / "frames"),
    }


@pytest.mark.parametrize("split", readers.SPLITS)
def test_one_frame_videos_read_back_as_the_precomp_images(frames_root, split):
    """Every split of the one-frame collection equals the precomp split: images bit for bit, captions, mapping."""
    feature_ids = (frames_root / split / "FeatureData" / "ims" / "id.txt").read_text().split()
    assert all(frame.endswith("_0") for frame in feature_ids)
    got = splits.load_split(frames_root, split, "ims")
    want = readers.load_precomp(EMBEDDED_DATA, split)
    assert got.images.dtype == np.float32 and np.array_equal(got.images, want.images)
    assert got.captions == want.captions
    np.testing.assert_array_equal(got.caption_image, want.caption_image)
    assert got.image_ids == [collections.item_id(image) for image in want.image_ids]


def test_training_on_one_frame_videos_matches_training_on_images(twin_runs):
    """The same tiny model trained on both layouts gets the same test metrics (to 1e-9)."""
    (_, precomp), (_, frames) = twin_runs["precomp"], twin_runs["frames"]
    assert set(frames["test"]) == set(precomp["test"]) and "rsum" in precomp["test"]
    for name, value in precomp["test"].items():
        assert frames["test"][name] == pytest.approx(value, abs=1e-9), name
    for name, value in precomp["dev"].items():
        assert frames["dev"][name] == pytest.approx(value, abs=1e-9), name


@pytest.mark.parametrize("run", ["precomp", "frames"])
def test_evaluating_the_export_on_the_frame_collection(twin_runs, frames_root, run, tmp_path):
    """evaluate.py on the one-frame collection reproduces each run's test numbers from its SavedModel."""
    model_dir, results = twin_runs[run]
    out = tmp_path / "metrics.json"
    argv = ["--saved-model", str(model_dir / "saved_model"), "--data", str(frames_root), "--json", str(out)]
    assert evaluate.main(argv) == 0
    got = evaluated_metrics(out)
    for name, value in results["test"].items():
        assert got[name] == pytest.approx(value, abs=1e-6), name


# --- multi-frame pooling end to end (pseudo-clips: NOT video) ---------------


def nearest_train_image(features, train, exclude_same_row=False):
    """Row of `train` nearest (cosine) to each row of `features`; with
    `exclude_same_row`, row k of `features` (train row k itself) is skipped."""
    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = unit(features) @ unit(train).T
    if exclude_same_row:
        sims[np.arange(len(features)), np.arange(len(features))] = -np.inf
    return np.argmax(sims, axis=1)


@pytest.fixture(scope="module")
def pseudo_clip_run(tmp_path_factory):
    """Pseudo-clips, NOT video: each of the first 300 train, 100 dev and 100
    test images becomes a 2-frame clip (frame 0 = the image, frame 1 = its
    nearest other training image by cosine), with the image's 5 captions.
    Only proves multi-frame pooling trains and evaluates end to end."""
    root = tmp_path_factory.mktemp("pseudo_clips")
    train_images = readers.load_precomp(EMBEDDED_DATA, "train").images
    clips = {}
    for split, n in (("train", 300), ("dev", 100), ("test", 100)):
        data = readers.load_precomp(EMBEDDED_DATA, split)
        images = data.images[:n]
        neighbours = nearest_train_image(images, train_images, exclude_same_row=split == "train")
        if split == "train":
            assert not np.any(neighbours == np.arange(n))  # the OTHER nearest image
        items = [collections.item_id(image) for image in data.image_ids[:n]]
        frame_ids = [f"{item}_{k}" for item in items for k in (0, 1)]
        frame_rows = np.stack([images, train_images[neighbours]], axis=1).reshape(2 * n, -1)
        captions = [(items[i], c) for i, c in zip(data.caption_image, data.captions) if i < n]
        collections.write_collection(root, split, "ims", frame_ids, frame_rows, captions)
        clips[split] = (images + train_images[neighbours]) / 2
    model_dir, results = train_tiny(root, root / "run", export=False)
    return root, clips, results


def test_pseudo_clips_pool_two_frames(pseudo_clip_run):
    """Each pseudo-clip's feature is the mean of its image and the image's nearest training neighbour."""
    root, clips, _ = pseudo_clip_run
    for split, expected in clips.items():
        got = splits.load_split(root, split, "ims")
        assert got.images.shape == (len(expected), 1280) and len(got.captions) == 5 * len(expected)
        np.testing.assert_allclose(got.images, expected, rtol=1e-6, atol=1e-6)


def test_pseudo_clips_train_and_evaluate_above_chance(pseudo_clip_run):
    """Training on 2-frame pseudo-clips exits 0 and retrieves captions of 100 test clips above chance."""
    _, _, results = pseudo_clip_run
    test = results["test"]
    assert all(math.isfinite(value) for value in test.values())
    # Random i2t R@10 with 100 clips x 5 captions: P(one of 5 in the top 10 of 500).
    chance = 100 * (1 - math.comb(495, 10) / math.comb(500, 10))
    assert 9.5 < chance < 9.7
    assert test["i2t_r10"] > 15, test


# --- two features per item (the second a stand-in for audio) ---------------


@pytest.fixture(scope="module")
def two_feature_run(tmp_path_factory):
    """Collections with features "ims" (1280-d) and "stages" (3120-d per-stage
    features of the same images: a stand-in for audio, NOT audio), and the
    tiny model trained on their concatenation."""
    root = tmp_path_factory.mktemp("two_features")
    for feature in ("ims", "stages"):
        collections.precomp_to_collections(EMBEDDED_DATA, root, feature=feature)
    model_dir, results = train_tiny(root, root / "run", "--set", "data.image_features=ims+stages")
    return root, model_dir, results


def test_two_features_concatenate_per_item(two_feature_run):
    """load_split(..., 'ims+stages') is the 4400-column concatenation of both features (stand-in for audio)."""
    root, _, _ = two_feature_run
    both = splits.load_split(root, "test", "ims+stages")
    data = EMBEDDED_DATA
    ims = readers.load_precomp(data, "test", "ims").images
    stages = readers.load_precomp(data, "test", "stages").images
    assert both.images.shape == (1000, 4400)
    assert np.array_equal(both.images, np.concatenate([ims, stages], axis=1))
    assert both.captions == readers.load_precomp(data, "test").captions


def test_two_feature_model_exports_a_4400_wide_image_encoder(two_feature_run):
    """Training on ims+stages (stand-in for audio) exits 0; the SavedModel's encode_image takes [N, 4400]."""
    import tensorflow as tf

    root, model_dir, results = two_feature_run
    assert json.loads((model_dir / "config.json").read_text())["image_features"]["width"] == 4400
    assert all(math.isfinite(value) for value in results["test"].values())
    loaded = tf.saved_model.load(str(model_dir / "saved_model"))
    rows = splits.load_split(root, "test", "ims+stages").images[:2]
    encoded = loaded.encode_image(tf.constant(rows)).numpy()
    assert encoded.shape[0] == 2 and np.all(np.isfinite(encoded))


# --- command line -----------------------------------------------------------


def test_command_line(tmp_path, capsys):
    """`python -m data.collections --precomp X --out Y` exits 0; --out naming an existing file exits 2."""
    out = tmp_path / "cli"
    assert collections.main(["--precomp", str(EMBEDDED_DATA), "--out", str(out)]) == 0
    assert splits.load_split(out, "dev").captions == readers.load_precomp(EMBEDDED_DATA, "dev").captions
    first_image = (EMBEDDED_DATA / "test_ids.txt").read_text().split()[0]  # 3385593926_d3e9c21170.jpg
    assert (out / "test" / "FeatureData" / "ims" / "id.txt").read_text().split()[0] == first_image[: -len(".jpg")]
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    capsys.readouterr()
    assert collections.main(["--precomp", str(EMBEDDED_DATA), "--out", str(a_file)]) == 2
    assert capsys.readouterr().err.strip() == f"error: --out {a_file}: exists and is not a directory"
    assert collections.main(["--precomp", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2


def test_collections_with_their_own_names_train_and_evaluate(tmp_path):
    """Collections named as a dataset names them (MSR-VTT's msrvtt10ktrain
    ...), chosen with data.*_split; evaluate.py then defaults to the model's
    own test collection."""
    names = {"train": "clipstrain", "dev": "clipsval", "test": "clipstest"}
    for split, n in (("train", 300), ("dev", 100), ("test", 100)):
        data = readers.load_precomp(EMBEDDED_DATA, split)
        items = [collections.item_id(image) for image in data.image_ids[:n]]
        captions = [(items[i], c) for i, c in zip(data.caption_image, data.captions) if i < n]
        collections.write_collection(tmp_path, names[split], "ims", items, data.images[:n], captions)
    model_dir, results = train_tiny(
        tmp_path, tmp_path / "run", *[f"--set=data.{split}_split={name}" for split, name in names.items()], export=False
    )
    out = tmp_path / "metrics.json"
    assert evaluate.main(["--model-dir", str(model_dir), "--json", str(out)]) == 0
    assert evaluated_metrics(out)["rsum"] == pytest.approx(results["test"]["rsum"], abs=1e-6)


# --- checked inputs and a staged, all-or-nothing output ---------------------


def tiny_precomp(root, ids=None, broken=None):
    """A precomp folder of 3 images x 5 captions per split; `ids` {split: ids}
    overrides the default ids; `broken` {file name: text} replaces files."""
    root.mkdir(parents=True, exist_ok=True)
    for s, split in enumerate(readers.SPLITS):
        np.save(root / f"{split}_ims.npy", np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * s)
        (root / f"{split}_caps.txt").write_text("".join(f"a {split} caption {k} of image {i}\n"
                                                        for i in range(3) for k in range(5)))
        names = (ids or {}).get(split, [f"{split}_{i}.jpg" for i in range(3)])
        (root / f"{split}_ids.txt").write_text("\n".join(names) + "\n")
    for name, text in (broken or {}).items():
        (root / name).write_text(text)
    return root


def snapshot(folder):
    """{relative path: bytes or None (a folder)} of everything under `folder`."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("ids, broken, message", [
    ({"dev": ["a.jpg", "b c.jpg", "d.jpg"]}, None,
     r"dev_ids\.txt: line 2: image id 'b c\.jpg' holds whitespace"),
    ({"test": ["a.jpg", "b.jpg", "a.jpg"]}, None, r"test_ids\.txt: line 3: image id 'a\.jpg' repeats line 1"),
    ({"test": ["a.jpg", "a.png", "b.jpg"]}, None,
     r"test_ids\.txt: line 2: image id 'a\.png' is the same item 'a' as line 1 \('a\.jpg'\)"),
    ({"train": ["a#1.jpg", "b.jpg", "c.jpg"]}, None, r"train_ids\.txt: line 1: image id 'a#1\.jpg' holds '#'"),
    (None, {"test_caps.txt": "one\n\nthree\n"}, r"test_caps\.txt: line 2 is an empty caption"),
    (None, {"dev_ids.txt": "a.jpg\nb.jpg\n"}, r"dev_ids\.txt: 2 ids for 3 images"),
], ids=["space", "duplicate", "same-item", "hash", "empty-caption", "id-count"])
@pytest.mark.parametrize("out_state", ["missing", "previous"])
def test_bad_inputs_are_one_line_errors_and_leave_out_unchanged(tmp_path, capsys, ids, broken, message, out_state):
    """Every input problem (in any split) is one line naming the file and line, exit 2, --out untouched."""
    out = tmp_path / "out"
    precomp = tiny_precomp(tmp_path / "bad", ids, broken)
    if out_state == "previous":
        assert collections.main(["--precomp", str(tiny_precomp(tmp_path / "good")), "--out", str(out)]) == 0
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {precomp}/") and re.search(message, err[0])
    assert snapshot(tmp_path) == before  # no half-converted --out, no staging folder left


def test_ids_with_a_folder_convert_and_read_back(tmp_path, capsys):
    """COCO-style ids `val2014/<file>.jpg` are valid collection items `val2014/<file>`."""
    ids = {split: [f"val2014/COCO_{split}_{i}.jpg" for i in range(3)] for split in readers.SPLITS}
    out = tmp_path / "out"
    assert collections.main(["--precomp", str(tiny_precomp(tmp_path / "p", ids)), "--out", str(out)]) == 0
    got = splits.load_split(out, "dev")
    assert got.image_ids == ["val2014/COCO_dev_0", "val2014/COCO_dev_1", "val2014/COCO_dev_2"]
    np.testing.assert_array_equal(got.images, np.arange(12).reshape(3, 4) + 100)
    assert got.captions[5] == "a dev caption 0 of image 1" and got.caption_image.tolist() == [0] * 5 + [1] * 5 + [2] * 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # the staging folder is gone


def test_an_interrupted_conversion_leaves_out_as_it_was(tmp_path, monkeypatch):
    """A failure while writing (here the second split's features) leaves --out missing, or as before."""
    precomp = tiny_precomp(tmp_path / "p")
    calls = []

    def failing(*args):
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return original(*args)

    original = collections.write_bigfile
    monkeypatch.setattr(collections, "write_bigfile", failing)
    out = tmp_path / "out"
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]
    monkeypatch.setattr(collections, "write_bigfile", original)
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 0
    before = snapshot(out)
    calls.clear()
    monkeypatch.setattr(collections, "write_bigfile", failing)
    np.save(precomp / "train_ims.npy", np.ones((3, 4), np.float32))
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 2
    assert snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out", "p"]


def test_an_existing_out_gets_another_feature_of_the_same_data(tmp_path):
    """A second feature is added to the collections; a feature written again is replaced whole."""
    precomp = tiny_precomp(tmp_path / "p")
    for split in readers.SPLITS:
        np.save(precomp / f"{split}_other.npy", np.full((3, 2), 7, np.float32))
    out = tmp_path / "out"
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 0
    captions = (out / "test" / "TextData" / "test.caption.txt").read_bytes()
    assert collections.main(["--precomp", str(precomp), "--out", str(out), "--feature", "other"]) == 0
    both = splits.load_split(out, "test", "ims+other")
    np.testing.assert_array_equal(both.images[:, 4:], np.full((3, 2), 7))
    np.testing.assert_array_equal(both.images[:, :4], np.arange(12).reshape(3, 4) + 200)
    np.save(precomp / "test_other.npy", np.full((3, 3), 9, np.float32))
    assert collections.main(["--precomp", str(precomp), "--out", str(out), "--feature", "other"]) == 0
    np.testing.assert_array_equal(splits.load_split(out, "test", "other").images, np.full((3, 3), 9))
    assert (out / "test" / "TextData" / "test.caption.txt").read_bytes() == captions
    assert sorted(p.name for p in (out / "test").iterdir()) == ["FeatureData", "TextData"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "p"]


@pytest.mark.parametrize("make, message", [
    (lambda out: (out / "test").mkdir(parents=True), r"test exists and is no collection"),
    (lambda out: (out / "test" / "TextData").mkdir(parents=True) or
     (out / "test" / "TextData" / "test.caption.txt").write_text("x#0 another caption\n"),
     r"test\.caption\.txt holds other captions than the precomp test split"),
])
def test_an_existing_out_of_other_data_is_refused(tmp_path, capsys, make, message):
    out = tmp_path / "out"
    make(out)
    (out / "notes.txt").write_text("mine")
    precomp = tiny_precomp(tmp_path / "p")
    before = snapshot(tmp_path)
    assert collections.main(["--precomp", str(precomp), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --out {out}: ") and re.search(message, err[0])
    assert snapshot(tmp_path) == before
