"""`evaluate.py --projector`: the joint space in TensorBoard's projector,
read back through the projector plugin's own HTTP routes."""

import numpy as np
import pytest

import evaluate
from tests.helpers import EMBEDDED_IMAGES as IMAGES


def projector_client(logdir):
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.projector import projector_plugin
    from werkzeug import Request, test

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    apps = projector_plugin.ProjectorPlugin(base_plugin.TBContext(logdir=str(logdir), multiplexer=multiplexer)) \
        .get_plugin_apps()
    return test.Client(lambda environ, start: apps[Request(environ).path](environ, start))


def test_projector_holds_the_encodings_metadata_and_sprite(trained, sample_data, tmp_path, capsys):
    import tensorflow as tf

    from data import splits
    from engine import scoring

    logdir = tmp_path / "projector"
    argv = ["--model-dir", str(trained), "--data", str(sample_data), "--projector", str(logdir), "--images", str(IMAGES)]
    assert evaluate.main(argv) == 0
    capsys.readouterr()
    # Written twice: a directory written by --projector is replaced.
    assert evaluate.main(argv) == 0 and "projector: tensorboard --logdir" in capsys.readouterr().err

    client = projector_client(logdir)
    assert client.get("/runs").json == ["."]
    [info] = client.get("/info?run=.").json["embeddings"]
    name = info["tensorName"]
    assert info["tensorShape"] == [48, 32] and info["sprite"]["singleImageDim"] == [48, 48]
    split = splits.load_split(sample_data, "test", "ims")
    scorer = scoring.CheckpointScorer.from_model_dir(trained)
    expected = np.concatenate([scorer.encode_images(split.images), scorer.encode_texts(split.captions)])
    tensor = np.frombuffer(client.get(f"/tensor?run=.&name={name}").get_data(), np.float32).reshape(48, 32)
    np.testing.assert_allclose(tensor, expected, rtol=1e-5, atol=1e-6)
    rows = client.get(f"/metadata?run=.&name={name}").get_data(as_text=True).splitlines()
    assert rows[0] == "modality\timage\tcaption" and len(rows) == 49
    assert rows[1] == f"image\t{split.image_ids[0]}\t"
    assert rows[9] == f"caption\t{split.image_ids[0]}\t{split.captions[0]}"
    sprite = tf.io.decode_png(client.get(f"/sprite_image?run=.&name={name}").get_data()).numpy()
    assert sprite.shape == (7 * 48, 7 * 48, 3)  # ceil(sqrt(48)) = 7 tiles a side
    first = tf.image.resize(tf.io.decode_jpeg(tf.io.read_file(str(IMAGES / split.image_ids[0]))), (48, 48),
                            antialias=True).numpy()
    np.testing.assert_allclose(sprite[:48, :48], np.clip(first, 0, 255).astype(np.uint8), atol=1)
    assert np.all(sprite[-48:, -48:] == 235)  # a caption's blank tile


def test_pairwise_model_skips_the_projector(trained_mcnn_st, sample_data, tmp_path, capsys):
    logdir = tmp_path / "projector"
    # On the 8 sample images: the pairwise model scores each of their 40 captions with each.
    assert evaluate.main(["--model-dir", str(trained_mcnn_st), "--data", str(sample_data), "--projector",
                          str(logdir)]) == 0
    assert "--projector skipped" in capsys.readouterr().err and not logdir.exists()


@pytest.mark.parametrize("make, extra, message", [
    (lambda p: p.write_text("x"), [], "exists and is not a projector (a file)"),
    (lambda p: (p.mkdir(), (p / "other.txt").write_text("x")), [],
     "exists and is not a projector (a folder without projector_config.pbtxt); choose a new name"),
    (lambda p: None, ["--images", "/nonexistent"], "not a directory"),
])
def test_bad_projector_arguments_fail_before_any_work(trained, tmp_path, capsys, make, extra, message):
    logdir = tmp_path / "projector"
    make(logdir)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert evaluate.main(["--model-dir", str(trained), "--projector", str(logdir), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_images_need_the_projector(trained, capsys):
    assert evaluate.main(["--model-dir", str(trained), "--images", str(IMAGES)]) == 2
    assert "add --projector" in capsys.readouterr().err


@pytest.mark.parametrize("layout", ["precomp", "collections"])
def test_sprite_of_ids_with_a_folder_or_without_extension(trained, unusual_ids, layout, tmp_path, capsys):
    """`pics/x.jpg` and `pics/x` find images/pics/x.jpg for the sprite."""
    import tensorflow as tf

    logdir = tmp_path / "projector"
    argv = ["--model-dir", str(trained), "--data", str(unusual_ids[layout]), "--projector", str(logdir),
            "--images", str(unusual_ids["images"])]
    assert evaluate.main(argv) == 0
    client = projector_client(logdir)
    [info] = client.get("/info?run=.").json["embeddings"]
    rows = client.get(f"/metadata?run=.&name={info['tensorName']}").get_data(as_text=True).splitlines()
    first = unusual_ids["ids"][0]
    assert rows[1] == f"image\tpics/{first if layout == 'precomp' else first[:-len('.jpg')]}\t"
    sprite = tf.io.decode_png(client.get(f"/sprite_image?run=.&name={info['tensorName']}").get_data()).numpy()
    for index in (0, 7):
        image = tf.io.read_file(str(IMAGES / unusual_ids["ids"][index]))
        tile = tf.image.resize(tf.io.decode_jpeg(image), (48, 48), antialias=True).numpy()
        row, column = divmod(index, 7)
        np.testing.assert_allclose(sprite[row * 48:(row + 1) * 48, column * 48:(column + 1) * 48],
                                   np.clip(tile, 0, 255).astype(np.uint8), atol=1)


def test_images_missing_from_the_folder_are_grey_tiles(trained, unusual_ids, tmp_path, capsys):
    """Two of the collection's 8 images absent: exit 0, a line saying so, flat grey tiles for those two and
    the pictures of the others."""
    import tensorflow as tf

    from engine import projector

    images = tmp_path / "images"
    (images / "pics").mkdir(parents=True)
    for name in unusual_ids["ids"][2:]:
        (images / "pics" / name).write_bytes((IMAGES / name).read_bytes())
    logdir = tmp_path / "projector"
    argv = ["--model-dir", str(trained), "--data", str(unusual_ids["collections"]), "--projector", str(logdir),
            "--images", str(images)]
    assert evaluate.main(argv) == 0
    assert (f"6 of 8 test images found in {images}; the others are grey tiles in the projector's sprite"
            in capsys.readouterr().err.splitlines())
    client = projector_client(logdir)
    [info] = client.get("/info?run=.").json["embeddings"]
    sprite = tf.io.decode_png(client.get(f"/sprite_image?run=.&name={info['tensorName']}").get_data()).numpy()
    assert sprite.shape == (7 * 48, 7 * 48, 3)
    tiles = {index: sprite[index // 7 * 48:(index // 7 + 1) * 48, index % 7 * 48:(index % 7 + 1) * 48]
             for index in range(49)}
    for index in (0, 1):
        assert np.all(tiles[index] == projector.MISSING_IMAGE_TILE)
    for index in range(2, 8):
        tile = tf.image.resize(tf.io.decode_jpeg(tf.io.read_file(str(IMAGES / unusual_ids["ids"][index]))), (48, 48),
                               antialias=True).numpy()
        np.testing.assert_allclose(tiles[index], np.clip(tile, 0, 255).astype(np.uint8), atol=1)
        assert not np.all(tiles[index] == projector.MISSING_IMAGE_TILE)
    assert all(np.all(tiles[index] == projector.CAPTION_TILE) for index in range(8, 49))


def test_a_folder_with_none_of_the_images_fails_before_any_work(trained, sample_data, tmp_path, capsys):
    """An images folder holding none of the split's images is the wrong folder: exit 2, one line naming the
    folder and an image file expected there, nothing written."""
    images = tmp_path / "images"
    images.mkdir()
    (images / "unrelated.jpg").write_bytes((IMAGES / "1258913059_07c613f7ff.jpg").read_bytes())
    first = (sample_data / "test_ids.txt").read_text().split()[0]
    logdir = tmp_path / "projector"
    argv = ["--model-dir", str(trained), "--data", str(sample_data), "--projector", str(logdir),
            "--images", str(images)]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: --images {images}: none of the split's 8 images is there (e.g. no file {first!r}); "
                       "is it the folder of the split's images?")
    assert not logdir.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["images"]
