"""A trained export (the tiny `gru` run) in the SavedModel consumers of
docs/exports.md#serving, run by that page's own code: the session loader
(TensorFlow Serving's, the C API's), `saved_model_cli run`, TF Hub's
`hub.load` and `hub.KerasLayer` in a tf_keras model, and Keras 3's
`TFSMLayer`. Each scores the 8 sample JPEGs against their 40 captions as
`tf.saved_model.load` does, and, independently of it, ranks the images'
own captions where evaluate.py ranks them (the run's checkpoint on the
precomputed features). The page's TF Serving requests, REST and gRPC, fed
to the session loader, give the scores of `tf.saved_model.load`."""

import argparse
import base64
import contextlib
import json
import re
import shlex
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from engine import arguments, evaluation
from tests.engine.session_loading import SAVED_MODEL_CLI, LoadedSession
from tests.helpers import EMBEDDED_IMAGES, REPO

# How far the scores of the JPEGs are from those of the stored features,
# relative to the largest (float16 storage and JPEG decoding:
# tests/engine/test_export.py): a caption further than twice this from an
# image's own best caption cannot change places with it.
JPEG_TOLERANCE = 4e-3


def serving_section():
    """docs/exports.md's "Serving" section."""
    text = (REPO / "docs" / "exports.md").read_text()
    return text.split("\n## Serving\n", 1)[1].split("\n## ", 1)[0]


def fenced(text, language):
    """The fenced blocks of `language` in `text`."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


def documented_command(program):
    """The argv of the section's console command running `program` (its
    first line after `$ `, with the lines it continues)."""
    for block in fenced(serving_section(), "console"):
        argv = shlex.split(re.match(r"\$ ((?:.*\\\n)*.*)", block).group(1).replace("\\\n", " "))
        if argv[0] == program:
            return argv
    raise AssertionError(f"docs/exports.md#serving shows no {program} command")


@pytest.fixture(scope="module")
def documented(trained, tmp_path_factory):
    """The namespace of the section's Python blocks, run in order in a
    folder where `data/` is the repository's and `runs/gru-quick` the tiny
    run; all but the one that sends the gRPC request (it needs a server).
    Returns (the namespace, the folder)."""
    folder = tmp_path_factory.mktemp("documented")
    (folder / "data").symlink_to(REPO / "data")
    (folder / "runs").mkdir()
    (folder / "runs" / "gru-quick").symlink_to(trained)
    namespace = {}
    with contextlib.chdir(folder):
        for block in fenced(serving_section(), "python"):
            if "insecure_channel" not in block:
                exec(block, namespace)  # noqa: S102 - the page's own code
    return namespace, folder


@pytest.fixture(scope="module")
def evaluated(trained, sample_data):
    """(the sample split, its [8, 40] scores as evaluate.py computes them
    with the run's best checkpoint on the split's precomputed features)."""
    args = argparse.Namespace(model_dir=str(trained), saved_model=None, data=str(sample_data), image_features=None,
                              split=None)
    scorer, split = arguments.load_model_and_split(args)
    return split, evaluation.score_matrix(scorer.similarity, *evaluation.encode_split(scorer, split))


@pytest.fixture(scope="module")
def loaded(trained):
    return tf.saved_model.load(str(trained / "saved_model"))


@pytest.fixture(scope="module")
def session(trained):
    """The export in the session loader, loaded once for the module's tests."""
    loaded = LoadedSession(trained / "saved_model")
    yield loaded
    loaded.close()


def python_scores(loaded, photos, captions):
    """`serving_default` of the export in `tf.saved_model.load`."""
    return loaded.signatures["serving_default"](images=tf.constant(photos), text=tf.constant(captions))["output_0"].numpy()


def run_session_loader(export, session, photos, captions, documented, folder):
    inputs = {"images": np.array(photos, dtype=object), "text": np.array(captions, dtype=object)}
    return session.outputs({"scores": ("serving_default", inputs)})["scores"]["output_0"]


def run_saved_model_cli(export, session, photos, captions, documented, folder):
    """The page's `saved_model_cli run`, on this export, photos and captions."""
    argv = documented_command("saved_model_cli")
    argv[0] = SAVED_MODEL_CLI
    argv[argv.index("--dir") + 1] = str(export)
    argv[argv.index("--input_exprs") + 1] = f"text={list(captions)!r}"
    np.save(folder / argv[argv.index("--inputs") + 1].split("=", 1)[1], np.array(photos, dtype=object))
    subprocess.run(argv, cwd=folder, capture_output=True, check=True)
    return np.load(folder / argv[argv.index("--outdir") + 1] / "output_0.npy")


def run_hub_load(export, session, photos, captions, documented, folder):
    return python_scores(documented[0]["module"], photos, captions)


def run_hub_keras_layer(export, session, photos, captions, documented, folder):
    return documented[0]["hub_scorer"]({"images": tf.constant(photos), "text": tf.constant(captions)}).numpy()


def run_keras_tfsm_layer(export, session, photos, captions, documented, folder):
    return np.asarray(documented[0]["keras_scorer"]([tf.constant(photos), tf.constant(captions)]))


CONSUMERS = {"session loader": run_session_loader, "saved_model_cli run": run_saved_model_cli,
             "hub.load": run_hub_load, "hub.KerasLayer": run_hub_keras_layer, "keras TFSMLayer": run_keras_tfsm_layer}


def clear_rows(scores, is_true, margin):
    """Which rows have their best true score further than `margin` from
    every other score of the row."""
    best = np.where(is_true, scores, -np.inf).max(axis=1, keepdims=True)
    return np.where(scores == best, np.inf, np.abs(scores - best)).min(axis=1) > margin


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_consumer_scores_as_python_and_ranks_own_captions_as_evaluate(consumer, trained, documented, evaluated,
                                                                        loaded, session, tmp_path):
    split, evaluated_scores = evaluated
    photos = [(EMBEDDED_IMAGES / name).read_bytes() for name in split.image_ids]
    scores = CONSUMERS[consumer](trained / "saved_model", session, photos, split.captions, documented, tmp_path)
    expected = python_scores(loaded, photos, split.captions)
    assert scores.dtype == np.float32 and scores.shape == (len(photos), len(split.captions))
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    # Where the JPEGs cannot change the order: each image's best own caption
    # (i2t), and each caption's image (t2i), ranked where evaluate.py ranks them.
    i2t, t2i, _ = evaluation.rank_matrix(scores, split.caption_image)
    evaluated_i2t, evaluated_t2i, _ = evaluation.rank_matrix(evaluated_scores, split.caption_image)
    is_true = split.caption_image[None, :] == np.arange(len(photos))[:, None]
    margin = 2 * JPEG_TOLERANCE * np.abs(evaluated_scores).max()
    images, captions = clear_rows(evaluated_scores, is_true, margin), clear_rows(evaluated_scores.T, is_true.T, margin)
    assert images.sum() >= 4 and captions.sum() >= 20, (images, captions)
    np.testing.assert_array_equal(i2t[images], evaluated_i2t[images])
    np.testing.assert_array_equal(t2i[captions], evaluated_t2i[captions])


def test_the_documented_tf_serving_requests_score_in_the_session_loader(trained, documented, loaded, session):
    namespace, folder = documented
    body, request = json.loads((folder / "request.json").read_text()), namespace["request"]
    rest = {"images": np.array([base64.b64decode(image["b64"]) for image in body["inputs"]["images"]], dtype=object),
            "text": np.array(body["inputs"]["text"], dtype=object)}
    grpc = {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}
    results = session.outputs({"rest": (body["signature_name"], rest),
                               "grpc": (request.model_spec.signature_name, grpc)})
    expected = python_scores(loaded, namespace["photos"], namespace["captions"])
    assert expected.shape == (8, 2)
    for name in ("rest", "grpc"):
        np.testing.assert_allclose(results[name]["output_0"], expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    assert f"--model_name={request.model_spec.name}" in documented_command("tensorflow_model_server")
