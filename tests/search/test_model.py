"""Tests of `search.model`: an export as search uses it (hand-built
SavedModels, tests/search/hand_exports.py): the metric found by probing
its similarity, its fingerprint, whether it takes images, a two-stage
export's encodings split into its stages', and a batch of image files
encoded with the unreadable and undecodable ones skipped and named."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from search import model as search_model
from search.model import SearchModel, encode_image_files
from tests.search.hand_exports import ENCODING, HandExport, HandTwoStageExport, pixels, png_bytes, save


@pytest.fixture(scope="module")
def two_stage(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_stage")
    return save(HandTwoStageExport(HandExport("cosine"), HandExport("pairwise", seed=2), 3), root / "export")


@pytest.mark.parametrize("name, metric, joint_space", [("cosine", "cosine", True), ("dot", "dot", True),
                                                       ("pairwise", "model", False)])
def test_the_metric_is_the_product_the_similarity_computes(exports, name, metric, joint_space):
    model = SearchModel(exports[name])
    assert (model.metric, model.joint_space, model.rerank_k) == (metric, joint_space, None)


def similarity_function(function, image_dim=ENCODING, text_dim=ENCODING):
    return tf.function(function, input_signature=[tf.TensorSpec([None, image_dim], tf.float32),
                                                  tf.TensorSpec([None, text_dim], tf.float32)])


@pytest.mark.parametrize("function, dims, metric", [
    (lambda a, b: 3.0 + a @ tf.transpose(b), (6, 6), "model"),  # a dot product plus a constant is no dot product
    (lambda a, b: -tf.reduce_sum(tf.square(a[:, None] - b[None]), axis=2), (6, 6), "model"),  # negative MSE
    (lambda a, b: 0.5 * tf.math.l2_normalize(a, 1) @ tf.transpose(tf.math.l2_normalize(b, 1)), (6, 6), "model"),
    (lambda a, b: tf.zeros([tf.shape(a)[0], tf.shape(b)[0]]), (6, 4), "model"),  # encodings of two widths
    (lambda a, b: a @ tf.transpose(b), (6, 6), "dot"),
    (lambda a, b: tf.math.l2_normalize(a, 1) @ tf.transpose(tf.math.l2_normalize(b, 1)), (6, 6), "cosine"),
])
def test_the_probe_tells_dot_and_cosine_from_any_other_similarity(function, dims, metric):
    assert search_model._probe_metric(similarity_function(function, *dims), joint_space=True) == metric
    assert search_model._probe_metric(similarity_function(function, *dims), joint_space=False) == "model"


def test_normalize_scales_rows_to_unit_length_and_leaves_zero_rows():
    rows = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])
    np.testing.assert_allclose(search_model.normalize(rows), [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]])


def test_the_fingerprint_tells_two_models_apart(exports):
    cosine, again, other = SearchModel(exports["cosine"]), SearchModel(exports["cosine"]), SearchModel(
        exports["cosine-other"])
    assert cosine.fingerprint == again.fingerprint != other.fingerprint


def test_an_export_without_a_fingerprint_is_refused_in_one_line(exports, tmp_path):
    copy = tmp_path / "export"
    shutil.copytree(exports["cosine"], copy)
    (copy / "fingerprint.pb").unlink()
    with pytest.raises(InputError, match=f"^{copy}: the SavedModel has no readable fingerprint.pb \\(.*\\); "
                                         "export it again with this TensorFlow$"):
        SearchModel(copy)


def test_an_export_without_the_image_signature_cannot_take_images(exports):
    assert SearchModel(exports["cosine"]).takes_images
    model = SearchModel(exports["text-only"])
    assert not model.takes_images
    with pytest.raises(InputError, match=r"^--images: the SavedModel .* takes precomputed image features only "
                                         r"\(it has no encode_image_bytes signature\)"):
        model.check_takes_images("--images")


def test_texts_and_images_are_encoded_as_the_export_encodes_them(exports):
    model, loaded = SearchModel(exports["dot"]), tf.saved_model.load(str(exports["dot"]))
    texts = ["a dog", "two cats play"]
    np.testing.assert_allclose(model.encode_text_batch(texts), loaded.encode_text(tf.constant(texts)).numpy())
    np.testing.assert_allclose(model.encode_texts(texts, batch_size=1), loaded.encode_text(tf.constant(texts)).numpy())
    features = tf.stack([pixels(png_bytes(seed)) for seed in range(2)]).numpy()
    np.testing.assert_allclose(model.encode_image_bytes([png_bytes(0), png_bytes(1)]),
                               loaded.encode_image(features).numpy(), rtol=1e-5)
    np.testing.assert_allclose(model.encode_image_features(features), loaded.encode_image(features).numpy(), rtol=1e-6)


def test_a_two_stage_exports_encodings_are_both_stages_side_by_side(two_stage):
    model = SearchModel(two_stage)
    loaded = tf.saved_model.load(str(two_stage))
    assert model.rerank_k == 3 and model.metric == "cosine"
    assert model.rerank_encoding_shape("image") == model.rerank_encoding_shape("text") == [ENCODING]
    texts = tf.constant(["a dog", "a red car"])
    both = model.encode_text_batch(texts.numpy().astype(str).tolist())
    first, second = model.split(both, "text")
    np.testing.assert_allclose(first, loaded.encode_text(texts).numpy(), rtol=1e-6)
    np.testing.assert_allclose(second, loaded.rerank_encode_text(texts).numpy(), rtol=1e-6)
    images = model.encode_image_bytes([png_bytes(3)])
    features = pixels(png_bytes(3))[None]
    first, second = model.split(images, "image")
    np.testing.assert_allclose(first, loaded.encode_image(features).numpy(), rtol=1e-5)
    np.testing.assert_allclose(second, loaded.rerank_encode_image(features).numpy(), rtol=1e-5)


def test_a_batch_of_files_skips_the_unreadable_and_the_undecodable(exports):
    model = SearchModel(exports["cosine"])
    files = {"good0.png": png_bytes(0), "junk.jpg": b"not an image", "good1.png": png_bytes(1)}

    def read(name):
        if name == "gone.png":
            raise FileNotFoundError(2, "No such file or directory")
        return files[name]

    encodings, encoded, skipped = encode_image_files(model, ["good0.png", "gone.png", "junk.jpg", "good1.png"], read)
    assert encoded == ["good0.png", "good1.png"]
    np.testing.assert_allclose(encodings, model.encode_image_bytes([files["good0.png"], files["good1.png"]]),
                               rtol=1e-6)
    assert [name for name, _ in skipped] == ["gone.png", "junk.jpg"]
    assert skipped[0][1] == "unreadable (No such file or directory)"
    assert skipped[1][1].startswith("not a decodable JPEG/PNG image (")
    assert encode_image_files(model, ["gone.png"], read) == (None, [], [("gone.png", "unreadable (No such file or "
                                                                                      "directory)")])
