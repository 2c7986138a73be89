"""The exports' image signatures: JPEG/PNG bytes in, the same encodings and
scores as the precomputed features of the same files (the embedded rows,
made outside this repository), for a model of every family; the serving
conventions (named inputs, serving_default, version folders)."""

import functools
import io
import dataclasses
import json
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import train
from common.errors import error_reason
from data import feature_extractor
from data.image_features import ImageFeatures, file_stems
from engine.evaluation import refusal_reason
from engine.export import IMAGE_SIGNATURES, export_saved_model
from tests.engine.session_loading import SAVED_MODEL_CLI, LoadedSession, assert_session_loader_agrees, python_outputs
from tests.data.test_extract_features import _save_module
from tests.helpers import EMBEDDED_DATA, EMBEDDED_IMAGES, randomize_weights
from tests.models.test_fne_pipelines import VARIANTS as FNE_PIPELINES, tiny
from tests.models.test_registered_models import SINGLE_MODELS, VOCABULARY, tiny_model

SAMPLES = sorted(EMBEDDED_IMAGES.glob("*.jpg"))
CAPTIONS = ["A dog runs through the snow .", "Two children play on a beach", "a man rides a bike"]
FAMILIES = ["trained", "trained_rcn", "trained_w2vv", "trained_fv", "trained_fne", "trained_mcnn_st"]
# Runs combining trained runs: an ensemble of three families, m-CNN's
# ensemble, the two-stage run (without image signatures: their features
# record no provenance).
COMPOSITES = ["trained_ensemble", "trained_mcnn_ens", "trained_rerank"]
# The signatures that run the image backbone.
BACKBONE_SIGNATURES = (*IMAGE_SIGNATURES, "extract_image_features", "serving_default")


def embedded_features(kind):
    """The embedded test features of `kind` (`fc`, `fne` or both) of the sample JPEGs."""
    ids = (EMBEDDED_DATA / "test_ids.txt").read_text().split()
    rows = [ids.index(path.name) for path in SAMPLES]
    parts = [np.load(EMBEDDED_DATA / f"test_{stem}.npy")[rows].astype(np.float32) for stem in file_stems(kind)]
    return np.concatenate(parts, axis=1)


def jpegs(paths=SAMPLES):
    return tf.constant([path.read_bytes() for path in paths])


@functools.cache
def extracted_features(recorded, kind):
    """The features of the sample JPEGs by the backbone the provenance
    (JSON) `recorded` names, of `kind`: built and run once a recipe, as
    the families on the same features share it."""
    return feature_extractor.from_provenance(json.loads(recorded), kind)(SAMPLES, 8)


@pytest.fixture(scope="module")
def exports(request, tmp_path_factory):
    """{family fixture: the SavedModel of its run}. A run trained on
    features without provenance (the m-CNN's shortened test split) is
    exported again with --provenance naming the embedded features, as an
    older run would be."""
    paths = {}
    for name in FAMILIES:
        run = request.getfixturevalue(name)
        config = json.loads((run / "config.json").read_text())
        if config["image_features"]["provenance"] is None:
            copy = tmp_path_factory.mktemp("export") / run.name
            shutil.copytree(run, copy, ignore=shutil.ignore_patterns("saved_model", "checkpoints", "logs"))
            assert train.main(["--model-dir", str(copy), "--export-only", "--provenance", str(EMBEDDED_DATA)]) == 0
            run = copy
        paths[name] = run / "saved_model"
    return paths


@pytest.fixture(scope="module")
def session_once():
    """`session_once(path)`: the SavedModel at `path` in the session loader
    (a `LoadedSession`), loaded once for the module's tests."""
    sessions = {}

    def load(path):
        if path not in sessions:
            sessions[path] = LoadedSession(path)
        return sessions[path]

    yield load
    for session in sessions.values():
        session.close()


def export_of(run, exports, request):
    """The SavedModel of the run fixture `run` (`exports`' for a family)."""
    return exports[run] if run in exports else request.getfixturevalue(run) / "saved_model"


@pytest.mark.parametrize("family", FAMILIES)
def test_score_images_equals_score_on_the_precomputed_features(exports, loaded_once, family):
    loaded = loaded_once(exports[family])
    kind = loaded.image_features.numpy().decode()
    features = embedded_features(kind)
    texts = tf.constant(CAPTIONS)
    expected = loaded.score(features, texts).numpy()
    scores = loaded.score_images(jpegs(), texts).numpy()
    assert scores.shape == (len(SAMPLES), len(CAPTIONS))
    # The features agree to float16 storage and JPEG decoding (relative 2.4e-4 per row) ...
    close = np.isclose(scores, expected, rtol=2e-3, atol=2e-3 * np.abs(expected).max()).all(axis=1)
    if family == "trained_fne":
        # ... which the FNE's discretisation turns into a whole step for a
        # value lying at a threshold: most images, not all, score the same
        # (6 of the 8 for the tiny poe-fne run, the others within 1.5%).
        assert close.mean() >= 0.5, close
        np.testing.assert_allclose(scores, expected, atol=0.05 * np.abs(expected).max())
    else:
        assert close.all(), np.abs(scores - expected).max()
        encodings, reference = loaded.encode_image_bytes(jpegs()).numpy(), loaded.encode_image(features).numpy()
        assert encodings.dtype == np.float32 and encodings.shape == reference.shape
        np.testing.assert_allclose(encodings, reference, rtol=2e-3, atol=2e-3 * np.abs(reference).max())
    # The signature is the recorded recipe, then the model: on the features
    # the backbone makes of the same files, exactly `score`.
    extracted = extracted_features(loaded.image_provenance.numpy().decode(), kind)
    np.testing.assert_allclose(scores, loaded.score(extracted, texts).numpy(), rtol=1e-4, atol=1e-5)


def test_the_loaded_signatures_take_named_inputs_and_a_png_is_the_same_image(exports, loaded_once):
    loaded = loaded_once(exports["trained"])
    signature = loaded.signatures["encode_image_bytes"]
    (output,) = signature(images=jpegs(SAMPLES[:1])).values()
    np.testing.assert_allclose(output.numpy(), loaded.encode_image(embedded_features("fc")[:1]).numpy(),
                               rtol=2e-3, atol=2e-3)
    png = io.BytesIO()
    Image.open(SAMPLES[0]).save(png, format="PNG")  # the decoded pixels, losslessly
    (from_png,) = signature(images=tf.constant([png.getvalue()])).values()
    np.testing.assert_allclose(from_png.numpy(), output.numpy(), rtol=1e-5, atol=1e-6)
    (default,) = loaded.signatures["serving_default"](images=jpegs(), text=tf.constant(CAPTIONS)).values()
    np.testing.assert_allclose(default.numpy(), loaded.score_images(jpegs(), tf.constant(CAPTIONS)).numpy())
    assert bool(loaded.joint_space.numpy())
    assert json.loads(loaded.image_provenance.numpy())["backbone"] == "efficientnet-lite0"


@pytest.mark.parametrize("contents", [b"not an image", b"\xff\xd8\xff\xe0 a truncated JPEG", b""])
def test_a_corrupt_or_non_image_input_is_an_invalid_argument_error(exports, loaded_once, contents):
    loaded = loaded_once(exports["trained"])
    with pytest.raises(tf.errors.InvalidArgumentError):
        loaded.encode_image_bytes(tf.constant([SAMPLES[0].read_bytes(), contents]))
    assert loaded.encode_image_bytes(jpegs(SAMPLES[:1])).shape[0] == 1  # still serving


def test_an_empty_batch_of_images_has_empty_encodings_and_scores(trained, loaded_once):
    loaded = loaded_once(trained / "saved_model")
    width = loaded.encode_image(embedded_features("fc")[:1]).shape[1]
    empty = tf.constant([], tf.string)
    encodings = loaded.encode_image_bytes(empty)
    assert encodings.dtype == tf.float32 and encodings.shape == (0, width)
    assert loaded.score_images(empty, tf.constant(CAPTIONS)).shape == (0, len(CAPTIONS))


def test_saved_model_cli_lists_every_signature_with_named_inputs(exports):
    shown = subprocess.run([SAVED_MODEL_CLI, "show", "--all", "--dir", str(exports["trained"])], capture_output=True, text=True,
                           check=True).stdout
    for name, inputs in [("encode_text", ["text"]), ("encode_image", ["image_features"]),
                         ("score", ["image_features", "text"]), ("similarity", ["image_encodings", "text_encodings"]),
                         ("encode_image_bytes", ["images"]), ("score_images", ["images", "text"]),
                         ("serving_default", ["images", "text"])]:
        block = shown.split(f"signature_def['{name}']:")[1].split("signature_def[")[0]
        for argument in inputs:
            assert f"inputs['{argument}']" in block, (name, argument)


@pytest.mark.slow  # over 10 s on 2 cores
def test_an_export_into_a_numbered_version_folder(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("saved_model", "checkpoints", "logs"))
    assert train.main(["--model-dir", str(copy), "--export-only", "--serving-version", "2"]) == 0
    assert (copy / "saved_model" / "2" / "saved_model.pb").is_file()
    assert "score_images" in tf.saved_model.load(str(copy / "saved_model" / "2")).signatures


def test_an_older_run_exports_image_features_only_with_a_notice(trained, tmp_path, caplog):
    copy = tmp_path / "old"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns("saved_model", "checkpoints", "logs"))
    config = json.loads((copy / "config.json").read_text())
    config["image_features"]["provenance"] = None
    (copy / "config.json").write_text(json.dumps(config))
    assert train.main(["--model-dir", str(copy), "--export-only"]) == 0
    assert any("records no feature provenance" in record.getMessage() for record in caplog.records)
    loaded = tf.saved_model.load(str(copy / "saved_model"))
    assert "encode_image_bytes" not in loaded.signatures and "serving_default" in loaded.signatures
    assert loaded.image_provenance.numpy() == b""


def test_provenance_that_differs_from_the_runs_is_refused(trained, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    recorded = json.loads((EMBEDDED_DATA / "provenance.json").read_text())
    (other / "provenance.json").write_text(json.dumps({**recorded, "crops": 1}))
    assert train.main(["--model-dir", str(trained), "--export-only", "--provenance", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {other / 'provenance.json'}: differs from the provenance recorded in "
                          f"{trained / 'config.json'}") and err.count("\n") == 1


@pytest.mark.parametrize("extra, message", [
    (["--export-only", "--provenance", "{tmp}"], "--provenance {tmp}: no provenance.json there"),
    (["--serving-version", "1"], "--serving-version and --provenance apply to --export-only"),
])
def test_export_options_are_checked_in_one_line(trained, tmp_path, capsys, extra, message):
    argv = ["--model-dir", str(trained), *[word.replace("{tmp}", str(tmp_path)) for word in extra]]
    if "--export-only" not in extra:
        argv = ["--model-dir", str(tmp_path / "new"), "--model", "gru", *extra]
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: {message.replace('{tmp}', str(tmp_path))}\n"


def test_a_backbone_the_zoo_cannot_rebuild_gives_an_export_of_image_features_with_a_warning(trained, tmp_path, caplog):
    from data import provenance
    from models.restore import restore_model

    _, model = restore_model(trained)
    remote = provenance.describe("tfhub:https://tfhub.dev/google/x/feature_vector/2", "imagenet", 10, stages=False)
    model.image_features = dataclasses.replace(model.image_features, provenance=remote)
    path = export_saved_model(model, tmp_path / "export")
    assert any("takes image features only" in record.getMessage() for record in caplog.records)
    loaded = tf.saved_model.load(str(path))
    assert "encode_image_bytes" not in loaded.signatures
    assert json.loads(loaded.image_provenance.numpy())["backbone"] == remote["backbone"]


def test_training_records_the_features_provenance_in_config_json(trained):
    recorded = json.loads((trained / "config.json").read_text())["image_features"]["provenance"]
    assert recorded == json.loads((EMBEDDED_DATA / "provenance.json").read_text())


@pytest.mark.parametrize("run", [run for run in FAMILIES if run != "trained_rcn"])
def test_the_signatures_run_in_the_session_loader_as_in_python(exports, loaded_once, session_once, request, run):
    """The loader of TF Serving, `saved_model_cli run` and the C API
    restores the variables the signatures read (Keras 3's among them).
    Every signature of `trained`'s export; of the others', those that do
    not run the backbone, the same in every export. The slow test below
    checks every signature of every run, rcn's and the composites' too,
    whose graphs take minutes on 2 cores."""
    export = export_of(run, exports, request)
    assert_session_loader_agrees(export, () if run == "trained" else BACKBONE_SIGNATURES, loaded=loaded_once(export),
                                 session=session_once(export))


@pytest.mark.slow  # minutes on 2 cores
@pytest.mark.parametrize("run", FAMILIES[1:] + COMPOSITES)
def test_every_signature_runs_in_the_session_loader_as_in_python(exports, request, run):
    assert_session_loader_agrees(export_of(run, exports, request))


@pytest.mark.slow  # 29 exports of tiny models: minutes on 2 cores
@pytest.mark.parametrize("name", [*SINGLE_MODELS, *(f"{name} fne" for name in FNE_PIPELINES)])
def test_every_model_exports_for_the_session_loader(name, tmp_path):
    """Every registered model (an FNE pipeline on both kinds of features), its
    weights random."""
    if name.endswith(" fne"):
        model = tiny(name.split()[0], "model.image_input=fne")
        model.adapt(np.random.default_rng(0).normal(loc=4, scale=3, size=(40, 12)).astype(np.float32))
    else:
        model = tiny_model(name)
    export_saved_model(randomize_weights(model), tmp_path / "export")
    assert_session_loader_agrees(tmp_path / "export")


@pytest.mark.slow  # two exports: over 10 s on 2 cores
@pytest.mark.parametrize("as_signature", [False, True])
def test_an_export_with_a_tf_hub_backbone_runs_in_the_session_loader(tmp_path, as_signature):
    """The variables of a TF Hub module (a restored SavedModel: a function,
    or a signature only) are the export's too."""
    from data import provenance
    from models import registry

    _save_module(tmp_path / "module", as_signature)
    spec = registry.get("gru")
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16"])
    recorded = provenance.describe(f"tfhub:{tmp_path / 'module'}", "imagenet", 10, stages=False)
    # The module's features: 4 wide.
    model = randomize_weights(spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 4, recorded)))
    export = export_saved_model(model, tmp_path / "export")
    assert "score_images" in assert_session_loader_agrees(export)


def test_bad_input_fails_in_the_session_loader_as_in_python(trained, loaded_once, session_once):
    texts = np.array(CAPTIONS, dtype=object)
    calls = {
        "empty batch": ("serving_default", {"images": np.array([], dtype=object), "text": texts}),
        "non-image": ("encode_image_bytes", {"images": np.array([SAMPLES[0].read_bytes(), b"not an image"],
                                                                dtype=object)}),
        "empty caption": ("serving_default", {"images": np.array([SAMPLES[0].read_bytes()], dtype=object),
                                              "text": np.array(["a dog", ""], dtype=object)}),
    }
    export = trained / "saved_model"
    python, session = python_outputs(loaded_once(export), calls), session_once(export).outputs(calls)
    for outcomes in (python, session):
        assert outcomes["empty batch"]["output_0"].shape == (0, len(CAPTIONS))
        assert isinstance(outcomes["non-image"], tf.errors.InvalidArgumentError)
        assert error_reason(outcomes["non-image"]).startswith("Unknown image file format.")
        assert isinstance(outcomes["empty caption"], tf.errors.InvalidArgumentError)
        assert refusal_reason(outcomes["empty caption"]) == "empty caption: a caption has no tokens."
    assert error_reason(session["non-image"]) == error_reason(python["non-image"])
