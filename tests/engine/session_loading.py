"""An export run through the session loader: the TF1 loader of TensorFlow
Serving, `saved_model_cli run`, the C API and TF-Java
(`tf.compat.v1.saved_model.loader.load` into a fresh graph and session),
its signatures compared with `tf.saved_model.load`'s on the same inputs."""

import shutil
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.helpers import EMBEDDED_IMAGES

# The CLI the TensorFlow wheel installs, beside this Python.
SAVED_MODEL_CLI = shutil.which("saved_model_cli") or str(Path(sys.executable).parent / "saved_model_cli")

JPEGS = [path.read_bytes() for path in sorted(EMBEDDED_IMAGES.glob("*.jpg"))[:3]]
CAPTIONS = ["A dog runs through the snow .", "Two children play on a beach", "a man rides a bike", "grass"]
# The size given to the inner dimensions a signature leaves open (a sequence of word encodings).
OPEN_SIZE = 5


def signature_inputs(signature, seed=0):
    """{input name: array} for a loaded signature: three sample JPEGs as
    `images`, CAPTIONS as `text`, and three rows of uniform [0, 2) values
    for a float input (image features, encodings)."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, spec in signature.structured_input_signature[1].items():
        if name == "images":
            inputs[name] = np.array(JPEGS, dtype=object)
        elif name == "text":
            inputs[name] = np.array(CAPTIONS, dtype=object)
        else:
            shape = [3, *(OPEN_SIZE if size is None else size for size in spec.shape[1:])]
            inputs[name] = rng.uniform(0, 2, size=shape).astype(spec.dtype.as_numpy_dtype)
    return inputs


class LoadedSession:
    """The SavedModel at `path` loaded by the session loader into a graph
    and session of its own, kept open so that several tests run their
    calls in one load (a run of a signature reuses the graph the session
    pruned for it the first time); `close()` ends the session."""

    def __init__(self, path):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            self.signatures = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], str(path)).signature_def

    def outputs(self, calls):
        """{call: {output name: array}, or the `tf.errors.OpError` it
        raised}, for `calls` {call: (signature name, {input name: array})}."""
        results = {}
        for call, (name, inputs) in calls.items():
            signature = self.signatures[name]
            try:
                results[call] = self.session.run({key: info.name for key, info in signature.outputs.items()},
                                                 {signature.inputs[key].name: value for key, value in inputs.items()})
            except tf.errors.OpError as error:
                results[call] = error
        return results

    def close(self):
        self.session.close()


def session_outputs(path, calls):
    """`LoadedSession.outputs` of `calls` in a session loading the
    SavedModel at `path` for them alone."""
    loaded = LoadedSession(path)
    try:
        return loaded.outputs(calls)
    finally:
        loaded.close()


def python_outputs(loaded, calls):
    """`session_outputs` of a SavedModel loaded by `tf.saved_model.load`."""
    results = {}
    for call, (name, inputs) in calls.items():
        signature = loaded.signatures[name]
        specs = signature.structured_input_signature[1]
        try:
            outputs = signature(**{key: tf.constant(value, specs[key].dtype) for key, value in inputs.items()})
            results[call] = {key: value.numpy() for key, value in outputs.items()}
        except tf.errors.OpError as error:
            results[call] = error
    return results


def relative_difference(got, expected):
    """max |got - expected| over max |expected|."""
    return float(np.max(np.abs(got - expected), initial=0.0) / max(np.max(np.abs(expected), initial=0.0), 1e-30))


def assert_session_loader_agrees(path, skipped=(), tolerance=1e-5, loaded=None, session=None):
    """Every signature of the SavedModel at `path` but the `skipped` gives
    in the session loader, on `signature_inputs`, `tf.saved_model.load`'s
    outputs: the same names, dtypes and shapes, the values to `tolerance`
    relative to the largest. `loaded` (its `tf.saved_model.load`) and
    `session` (its `LoadedSession`), when given, are those loads of it,
    shared with other tests. Returns {signature: its largest
    `relative_difference`}."""
    loaded = tf.saved_model.load(str(path)) if loaded is None else loaded
    calls = {name: (name, signature_inputs(signature)) for name, signature in loaded.signatures.items()
             if name not in skipped}
    expected = python_outputs(loaded, calls)
    got = session_outputs(path, calls) if session is None else session.outputs(calls)
    differences = {}
    for name, outputs in expected.items():
        assert not isinstance(got[name], Exception), f"{name}: {got[name]}"
        assert {key: (value.dtype, value.shape) for key, value in got[name].items()} == {
            key: (value.dtype, value.shape) for key, value in outputs.items()}, name
        differences[name] = max(relative_difference(got[name][key], value) for key, value in outputs.items())
    assert {"encode_text", "encode_image", "score"} <= differences.keys(), differences
    assert max(differences.values()) <= tolerance, differences
    return differences
