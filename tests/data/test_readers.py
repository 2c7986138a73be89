import json
import os

import numpy as np
import pytest

from common.errors import InputError
from data import readers
from tests.helpers import EMBEDDED_DATA, EMBEDDED_TEXT, shared_data


def write_split(root, features, captions, ids=None, split="test"):
    root.mkdir(parents=True, exist_ok=True)
    np.save(root / f"{split}_ims.npy", np.asarray(features))
    (root / f"{split}_caps.txt").write_text("\n".join(captions) + "\n")
    if ids is not None:
        (root / f"{split}_ids.txt").write_text("\n".join(ids) + "\n")
    return root


def lie_about_size(path):
    """An .npy header announcing 10^9 rows of 1280 floats over a 1 KB body."""
    with open(path, "wb") as file:
        np.lib.format.write_array_header_1_0(file, {"descr": "<f4", "fortran_order": False, "shape": (10**9, 1280)})
        file.write(bytes(1024))


def fifo(path):
    """A FIFO where a file should be: reading it would wait forever."""
    if path.exists():
        path.unlink()
    os.mkfifo(path)


def captions_for(n_images):
    return [f"caption {k} of image {i}" for i in range(n_images) for k in range(5)]


def test_embedded_flickr8k_splits():
    sizes = {"train": 6000, "dev": 1000, "test": 1000}
    for split, n_images in sizes.items():
        data = readers.load_precomp(EMBEDDED_DATA, split)
        assert data.images.shape == (n_images, 1280) and data.images.dtype == np.float32
        assert len(data.captions) == 5 * n_images == len(data.caption_image)
        np.testing.assert_array_equal(data.caption_image[:7], [0, 0, 0, 0, 0, 1, 1])
        assert data.image_ids[0].endswith(".jpg")


@pytest.mark.parametrize("split", ["train", "dev", "test"])
@pytest.mark.parametrize("feature", ["ims", "stages"])
def test_shared_data_matches_the_embedded_copy(split, feature):
    shared = readers.load_precomp(shared_data("f8k_precomp"), split, feature)
    embedded = readers.load_precomp(EMBEDDED_DATA, split, feature)
    np.testing.assert_array_equal(shared.images, embedded.images)
    assert shared.captions == embedded.captions and shared.image_ids == embedded.image_ids


def test_one_row_per_image_and_one_row_per_caption(tmp_path):
    features = np.arange(6, dtype=np.float16).reshape(3, 2)
    per_image = readers.load_precomp(write_split(tmp_path / "a", features, captions_for(3), ["x", "y", "z"]), "test")
    np.testing.assert_array_equal(per_image.images, features)
    assert per_image.image_ids == ["x", "y", "z"]
    per_caption = readers.load_precomp(write_split(tmp_path / "b", np.repeat(features, 5, axis=0), captions_for(3)), "test")
    np.testing.assert_array_equal(per_caption.images, features)
    np.testing.assert_array_equal(per_caption.caption_image, np.repeat([0, 1, 2], 5))
    assert per_caption.image_ids == ["", "", ""]


def test_lines_end_at_newlines_only(tmp_path):
    captions = captions_for(2)
    captions[3] = "a caption with a line separator \u2028 and a \x1c inside"
    data = readers.load_precomp(write_split(tmp_path, np.zeros((2, 3)), captions), "test")
    assert data.captions[3] == captions[3] and len(data.captions) == 10


@pytest.mark.parametrize("make, message", [
    (lambda r: write_split(r, np.zeros((3, 2)), captions_for(3)[:-1]), "14 captions for 3 images"),
    (lambda r: write_split(r, np.zeros((7, 2)), captions_for(2)[:7]), "7 captions, one row each in test_ims.npy, is not a multiple"),
    (lambda r: write_split(r, np.zeros((3, 2), complex), captions_for(3)), "2-D numeric"),
    (lambda r: write_split(r, np.array([[0.0, 1.0], [np.nan, 0.0], [0.0, 0.0]]), captions_for(3)), "row 1 holds NaN or inf"),
    (lambda r: write_split(r, np.array([[0.0, np.inf]] * 3), captions_for(3)), "row 0 holds NaN or inf"),
    (lambda r: write_split(r, np.zeros(3), captions_for(3)), "2-D numeric"),
    (lambda r: write_split(r, np.zeros((3, 2)), captions_for(3)[:4] + [" "] + captions_for(3)[5:]), "line 5 is an empty caption"),
    (lambda r: write_split(r, np.zeros((3, 2)), captions_for(3), ["x", "y"]), "2 ids for 3 images"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), (r / "test_caps.txt").unlink()), "test_caps.txt: file not found"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), (r / "test_ims.npy").write_bytes(b"junk")), "not a readable .npy"),
    (lambda r: None, "data folder not found"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), lie_about_size(r / "test_ims.npy")),
     "header announces a 1000000000 x 1280 float32 array"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), fifo(r / "test_caps.txt")),
     "test_caps.txt: not a regular file"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), fifo(r / "test_ims.npy")),
     "test_ims.npy: not a regular file"),
    (lambda r: (write_split(r, np.zeros((3, 2)), captions_for(3)), fifo(r / "test_ids.txt")),
     "test_ids.txt: not a regular file"),
])
def test_malformed_precomp_files_are_one_line_errors_naming_the_file(tmp_path, make, message):
    root = tmp_path / "data"
    make(root)
    with pytest.raises(InputError, match=message) as error:
        readers.load_precomp(root, "test")
    assert str(root) in str(error.value) and "\n" not in str(error.value)


def test_flickr8k_text_release_matches_the_precomp_order():
    release = EMBEDDED_TEXT
    for split, n_images in (("train", 6000), ("dev", 1000), ("test", 1000)):
        data = readers.read_flickr_text(release, split)
        assert len(data.image_files) == n_images and all(len(c) == 5 for c in data.captions)
    test = readers.read_flickr_text(release, "test")
    precomp = readers.load_precomp(EMBEDDED_DATA, "test")
    assert set(test.image_files) == set(precomp.image_ids)
    junk = "2258277193_586949ec62.jpg.1"
    assert junk in (release / "Flickr8k.token.txt").read_text() and junk not in test.image_files


def test_flickr_text_keeps_split_order_and_caption_numbers(tmp_path):
    (tmp_path / "Flickr8k.token.txt").write_text(
        "a.jpg#1\tsecond a\nb.jpg#0\tfirst b\na.jpg#0\tfirst a\njunk.jpg.1#0\tjunk\n"
    )
    (tmp_path / "Flickr_8k.devImages.txt").write_text("b.jpg\na.jpg\n")
    data = readers.read_flickr_text(tmp_path, "dev")
    assert data.image_files == ["b.jpg", "a.jpg"]
    assert data.captions == [["first b"], ["first a", "second a"]]


def test_flickr_text_errors(tmp_path):
    (tmp_path / "Flickr8k.token.txt").write_text("a.jpg#0\tA dog .\nbroken line\n")
    (tmp_path / "Flickr_8k.testImages.txt").write_text("a.jpg\n")
    with pytest.raises(InputError, match="line 2 is not"):
        readers.read_flickr_text(tmp_path, "test")
    (tmp_path / "Flickr8k.token.txt").write_text("a.jpg#0\tA dog .\n")
    (tmp_path / "Flickr_8k.testImages.txt").write_text("a.jpg\nb.jpg\n")
    with pytest.raises(InputError, match="image b.jpg has no caption"):
        readers.read_flickr_text(tmp_path, "test")
    with pytest.raises(InputError, match="Flickr_8k.trainImages.txt: file not found"):
        readers.read_flickr_text(tmp_path, "train")


def test_karpathy_json(tmp_path):
    images = [
        {"filename": "t.jpg", "split": "train", "sentences": [{"raw": f"train {k}"} for k in range(5)]},
        {"filename": "r.jpg", "filepath": "val2014", "split": "restval", "sentences": [{"raw": f"rest {k}"} for k in range(7)]},
        {"filename": "v.jpg", "split": "val", "sentences": [{"raw": f"val {k}"} for k in range(5)]},
        {"filename": "x.jpg", "split": "test", "sentences": [{"raw": f" test {k} "} for k in range(5)]},
    ]
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"images": images}))
    train = readers.read_karpathy_json(path, "train")
    assert train.image_files == ["t.jpg", "val2014/r.jpg"] and train.captions[1] == [f"rest {k}" for k in range(5)]
    assert readers.read_karpathy_json(path, "dev").image_files == ["v.jpg"]
    assert readers.read_karpathy_json(path, "test").captions == [[f"test {k}" for k in range(5)]]
    for broken in ('{"images": [{"split": "test"}]}', '{"images": [', "[]",
                   '{"images": [{"split": "test", "filename": "a.jpg", "sentences": [{"raw": 5}]}]}'):
        path.write_text(broken)
        with pytest.raises(InputError, match="dataset_coco.json: not a Karpathy dataset JSON") as error:
            readers.read_karpathy_json(path, "test")
        assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="missing.json: file not found"):
        readers.read_karpathy_json(tmp_path / "missing.json", "test")


def test_write_precomp_round_trip(tmp_path):
    b_captions = ["b 0 with\na newline", *(f"b {k}" for k in range(1, 6))]
    data = readers.ImageCaptions(["a.jpg", "b.jpg"], [captions_for(1), b_captions])
    features = np.random.default_rng(0).normal(size=(2, 4))
    readers.write_precomp(tmp_path, "dev", features, data)
    back = readers.load_precomp(tmp_path, "dev")
    np.testing.assert_allclose(back.images, features.astype(np.float32))
    assert back.image_ids == ["a.jpg", "b.jpg"]
    assert back.captions[5:] == ["b 0 with a newline", *(f"b {k}" for k in range(1, 5))]
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "dev_caps.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    for captions, found in ((["only one"], 1), (["one", " ", "three", "four", "five"], 4)):
        with pytest.raises(InputError, match=f"dev_caps.txt: image a.jpg has {found} non-empty captions"):
            readers.write_precomp(tmp_path, "dev", features[:1], readers.ImageCaptions(["a.jpg"], [captions]))
    features[1, 2] = np.nan
    with pytest.raises(InputError, match="dev_ims.npy: the features of image b.jpg hold NaN or inf"):
        readers.write_precomp(tmp_path, "dev", features, data)


def test_first_images_keeps_the_captions_of_the_kept_images_in_order():
    """Captions need not be grouped by image: each kept caption stays where it was."""
    split = readers.RetrievalSplit(
        images=np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], np.float32),
        captions=["a of 0", "b of 2", "c of 1", "d of 0", "e of 2", "f of 1"],
        caption_image=np.array([0, 2, 1, 0, 2, 1], np.int64),
        image_ids=["x.jpg", "y.jpg", "z.jpg"],
        source="/data", captions_file="/data/test_caps.txt",
    )
    cut = split.first_images(2)
    np.testing.assert_array_equal(cut.images, [[0.0, 1.0], [2.0, 3.0]])
    assert cut.captions == ["a of 0", "c of 1", "d of 0", "f of 1"]
    np.testing.assert_array_equal(cut.caption_image, [0, 1, 0, 1])
    assert cut.image_ids == ["x.jpg", "y.jpg"]
    assert (cut.source, cut.captions_file) == ("/data", "/data/test_caps.txt")
    one = split.first_images(1)
    assert one.captions == ["a of 0", "d of 0"] and one.images.shape == (1, 2) and one.image_ids == ["x.jpg"]
    # As many images as the split has, or more: all of it.
    for n in (3, 10):
        whole = split.first_images(n)
        assert whole.captions == split.captions and whole.image_ids == split.image_ids
        np.testing.assert_array_equal(whole.images, split.images)
        np.testing.assert_array_equal(whole.caption_image, split.caption_image)


# --- image ids and the files they name --------------------------------------


@pytest.mark.parametrize("image_id, key", [
    ("1258913059_07c613f7ff.jpg", "1258913059_07c613f7ff"),
    ("1258913059_07c613f7ff", "1258913059_07c613f7ff"),
    ("photo.JPEG", "photo"),
    ("val2014/COCO_val2014_000000391895.jpg", "val2014/COCO_val2014_000000391895"),
    ("clip.v2", "clip.v2"),
    ("clip.mp4", "clip.mp4"),
    (".jpg", ".jpg"),
])
def test_image_key_drops_an_image_extension_only(image_id, key):
    assert readers.image_key(image_id) == key


def test_find_image_matches_ids_with_or_without_their_extension():
    ids = ["a.jpg", "1258913059_07c613f7ff", "val2014/b.png"]
    assert readers.find_image(ids, "1258913059_07c613f7ff.jpg") == 1
    assert readers.find_image(ids, "a") == 0
    assert readers.find_image(ids, "val2014/b.jpg") == 2
    assert readers.find_image(ids, "b.png") is None  # the folder is part of the id


def image_folder(root):
    """An images folder: flat, in a sub-folder, and an upper-case extension."""
    (root / "val2014").mkdir(parents=True)
    for name in ("flat.jpg", "val2014/COCO_1.jpg", "other.PNG", "both.png", "both.jpg"):
        (root / name).write_bytes(b"not decoded here")
    return root


@pytest.mark.parametrize("image_id, file", [
    ("flat.jpg", "flat.jpg"),
    ("flat", "flat.jpg"),
    ("val2014/COCO_1.jpg", "val2014/COCO_1.jpg"),
    ("val2014/COCO_1", "val2014/COCO_1.jpg"),
    ("other", "other.PNG"),
    ("both", "both.jpg"),  # .jpg comes before .png
    ("flat.png", None),  # an id with an image extension names that file only
    ("missing", None),
    ("", None),
    ("../images/flat.jpg", None),  # never outside the folder
    ("val2014/../flat.jpg", None),
    ("/flat.jpg", None),
    ("val2014//COCO_1.jpg", None),
])
def test_image_file(tmp_path, image_id, file):
    root = image_folder(tmp_path / "images")
    assert readers.image_file(root, image_id) == (None if file is None else root / file)


def test_find_image_files_marks_the_missing_and_refuses_a_folder_with_none(tmp_path):
    root = image_folder(tmp_path / "images")
    assert readers.find_image_files(root, ["val2014/COCO_1", "missing.jpg", "other"]) == [
        root / "val2014/COCO_1.jpg", None, root / "other.PNG"]
    with pytest.raises(InputError, match=r"^--images .*images: none of the split's 2 images is there "
                                         r"\(e.g. no file 'val2014/x'\); is it the folder of the split's images\?$"):
        readers.find_image_files(root, ["val2014/x", "y.jpg"])
    with pytest.raises(InputError, match=r"the split names none of its 2 images"):
        readers.find_image_files(root, ["", ""])
    with pytest.raises(InputError, match=r"^--images .*flat.jpg: not a directory$"):
        readers.find_image_files(root / "flat.jpg", ["flat"])
