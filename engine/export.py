"""SavedModel export with the zoo's common serving signatures.

Every model exports the same four functions (also available as signatures):

- `encode_text(text: string[None]) -> float32[None, D]`
- `encode_image(image_features: float32[None, F]) -> float32[None, D]`
- `score(image_features: float32[None, F], text: string[None])
   -> float32[None, None]`: the similarity of every image with every text,
   in the model's own similarity (the only correct comparison for models
   whose similarity is not a dot product);
- `similarity(image_encodings, text_encodings) -> float32[None, None]`: the
   same on encodings already computed, for scoring large collections block
   by block.

The variable `image_features` names the kind of features `F` is (a kind
of `data.image_features`: "fc", one CNN layer's; "fne", every layer's;
"fc+fne", both side by side, for an ensemble of members reading each;
exports made before the kinds had one name hold "ims", "stages" and
"ims+stages", read as these);
`image_provenance`, how they were made (the JSON of the training folder's
provenance.json, `data.provenance`; "" where it was not recorded).

When that provenance names a backbone `data.feature_extractor` rebuilds (the
embedded features' EfficientNet-Lite0, the Keras Applications backbones of
`data.extract_features`, a TF Hub module directory), the export also takes
encoded images:

- `encode_image_bytes(images: string[None]) -> float32[None, D]`: JPEG or
  PNG file contents -> decoding, resizing, views and scaling as recorded ->
  the backbone -> `encode_image`;
- `score_images(images: string[None], text: string[None])
   -> float32[None, None]`: `score` of those images.

`serving_default` is `score_images` where it exists, else `score`.

Every SavedModel loader runs every signature: `tf.saved_model.load` (and TF
Hub, Keras' `TFSMLayer`), which restores the object graph, and the session
loader of TF Serving, `saved_model_cli run` and the C API, which restores
variables by the SavedModel's saver. So the object graph holds the
tf.Variables and resources the functions read (`ServingModule.track_state`),
not the model's Keras 3 variables, which the saver would restore into
copies.

Texts are raw strings: the vocabulary and the tokenizer are in the graph.
An empty caption, or one longer than the model accepts, fails the call with
an InvalidArgumentError that says so.

A two-stage model (`models.rerank`: `RetrievalModel.rerank_k` set, its
stages from `stages()`) exports the same signatures, read so that an index
can be built from them and a TF Serving user gets re-ranked scores
(`TwoStageServingModule`):

- `encode_text`, `encode_image`, `encode_image_bytes` and `similarity` are
  the first stage's: a joint space, so `joint_space` is true and
  `similarity(encode_image(f), encode_text(t))` is the first stage's score
  (the proposal), not `score`;
- `score(image_features, text)` ranks each image's row of texts in two
  stages (`common.reranking`), k = `rerank_k` (the run's, chosen on dev or
  `model.k`; every text when a row has fewer): the first stage's k best
  texts of the row (equal first-stage scores and the cut by the lower
  index) get the second stage's score of their pair, as it is (equal ones
  stay equal: `common.reranking` orders them as `common.metrics` orders
  ties); the j-th (0-based) other text in the first stage's ranking gets
  the row's lowest listed score - 1 - j (`common.reranking.tail_scores`):
  below every listed score, in the first stage's order. So sorting a row
  by `score` is its two-stage ranking, and its first k are the second
  stage's scores. `score_images` is `score` of encoded images (the backbone
  run once for both stages);
- the second stage's, for search: `rerank_encode_text(text)`,
  `rerank_encode_image(image_features)` (its encodings, of any model: an
  ensemble's or m-CNN's are the halves its pair scoring combines) and
  `rerank_score_pairs(image_encodings [P, ...], text_encodings [P, ...])
  -> float32[P]` (pair p: image p with text p; `pair_similarity`);
- with images, `extract_image_features(images) -> float32[None, F]`, the
  features both stages' `encode_image` take, so a search index runs the
  backbone once per image;
- the variable `rerank_k` (int32).
"""

import json
import logging
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf
from tensorflow.python.saved_model import save_context
from tensorflow.saved_model.experimental import TrackableResource

from common.errors import InputError, error_reason
from common.files import replace_directory
from data import feature_extractor

SIGNATURES = ("encode_text", "encode_image", "score", "similarity")
IMAGE_SIGNATURES = ("encode_image_bytes", "score_images")
RERANK_SIGNATURES = ("rerank_encode_text", "rerank_encode_image", "rerank_score_pairs")


class ServingModule(tf.Module):
    """The functions a SavedModel of the zoo offers, around a trained model.

    Args:
      model: a `RetrievalModel`, reading its `image_features` (a
        `data.image_features.ImageFeatures`: kind, width, provenance).
      image_extractor: a `data.feature_extractor.FeatureExtractor` that makes
        them from images, or None: the module then has no image
        signatures.
    """

    def __init__(self, model, image_extractor=None):
        super().__init__()
        self._hold(model, image_extractor)
        features = model.image_features
        # The kind of image features the model reads and how they were made.
        self.image_features = tf.Variable(features.kind, trainable=False, name="image_features")
        self.image_provenance = tf.Variable(json.dumps(features.provenance, sort_keys=True) if features.provenance else "",
                                            trainable=False, name="image_provenance")
        image_spec = tf.TensorSpec([None, features.width], tf.float32, name="image_features")
        text_spec = tf.TensorSpec([None], tf.string, name="text")
        # Whether encodings of one side can be compared with each other
        # (`RetrievalModel.joint_space` of the model `encode_*` serve).
        self.joint_space = tf.Variable(self._encoder().joint_space, trainable=False, name="joint_space")
        image_encoding = self._encode_image(tf.zeros([1, features.width]))
        text_encoding = self._encode_text(tf.constant(["a"]))
        self.encode_text = tf.function(self._encode_text, input_signature=[text_spec])
        self.encode_image = tf.function(self._encode_image, input_signature=[image_spec])
        self.score = tf.function(self._score, input_signature=[image_spec, text_spec])
        self.similarity = tf.function(
            self._similarity,
            input_signature=[
                tf.TensorSpec([None, *image_encoding.shape[1:]], tf.float32, name="image_encodings"),
                tf.TensorSpec([None, *text_encoding.shape[1:]], tf.float32, name="text_encodings"),
            ],
        )
        self.signature_names = SIGNATURES
        if image_extractor is not None:
            bytes_spec = tf.TensorSpec([None], tf.string, name="images")
            self.encode_image_bytes = tf.function(self._encode_image_bytes, input_signature=[bytes_spec])
            self.score_images = tf.function(self._score_images, input_signature=[bytes_spec, text_spec])
            self.signature_names = SIGNATURES + IMAGE_SIGNATURES

    @tf.__internal__.tracking.no_automatic_dependency_tracking
    def _hold(self, model, image_extractor):
        """Keeps the model and the image extractor out of the SavedModel's
        object graph. A Keras 3 variable there is saved as a copy of the
        tf.Variable it wraps: the session loader (TF Serving, `saved_model_cli
        run`, the C API) restores the copy while the functions read the
        original, left uninitialised. `track_state` tracks what they read.
        `_extract` is the extractor's `encode_bytes` as the one function the
        image signatures call, so that its backbone is traced once."""
        self.model = model
        self.image_extractor = image_extractor
        self._extract = None if image_extractor is None else tf.function(
            image_extractor.encode_bytes, input_signature=[tf.TensorSpec([None], tf.string, name="images")])

    def track_state(self):
        """Tracks, once every function is defined, the tf.Variables the
        functions read (those under Keras' variables included) and the
        resources (lookup tables, files) the model and the image extractor
        hold: the state the SavedModel saves and every loader restores."""
        read = [variable for function in self.signatures().values()
                for variable in function.get_concrete_function().variables]
        held = [item for owner in (self.model, self.image_extractor) if owner is not None
                for item in tf.train.TrackableView(owner).descendants()
                if isinstance(item, (TrackableResource, tf.saved_model.Asset))]
        self.state = list({id(item): item for item in read + held}.values())

    def signatures(self):
        """{name: function} of the serving signatures, `serving_default`
        included."""
        functions = {name: getattr(self, name) for name in self.signature_names}
        functions["serving_default"] = functions.get("score_images", self.score)
        return functions

    def _encoder(self):
        """The model whose encoders and similarity the module serves."""
        return self.model

    def _encode_image_bytes(self, images):
        return self._encode_image(self._extract(images))

    def _score_images(self, images, text):
        return self._score(self._extract(images), text)

    def _encode_text(self, text):
        return self._encoder().encode_text(self._encoder().vectorizer(text))

    def _encode_image(self, image_features):
        return self._encoder().encode_image(image_features)

    def _score(self, image_features, text):
        return self._similarity(self._encode_image(image_features), self._encode_text(text))

    def _similarity(self, image_encodings, text_encodings):
        return self._encoder().similarity(image_encodings, text_encodings)


class TwoStageServingModule(ServingModule):
    """The functions of a two-stage model's SavedModel (the module
    docstring): `ServingModule`'s, with the first stage's encoders and
    similarity and a two-stage `score`, plus the second stage's encoders
    and pair scoring (`RERANK_SIGNATURES`), `rerank_k` and, with images,
    `extract_image_features`. Args as `ServingModule`'s; `model.stages()`
    gives the stages."""

    def __init__(self, model, image_extractor=None):
        super().__init__(model, image_extractor)
        # The length of each image's list in `score` (`RetrievalModel.rerank_k`).
        self.rerank_k = tf.Variable(model.rerank_k, dtype=tf.int32, trainable=False, name="rerank_k")
        image_spec = tf.TensorSpec([None, model.image_features.width], tf.float32, name="image_features")
        image_encoding = self._rerank_encode_image(tf.zeros([1, model.image_features.width]))
        text_encoding = self._rerank_encode_text(tf.constant(["a"]))
        self.rerank_encode_text = tf.function(self._rerank_encode_text,
                                              input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        self.rerank_encode_image = tf.function(self._rerank_encode_image, input_signature=[image_spec])
        self.rerank_score_pairs = tf.function(
            self._rerank_score_pairs,
            input_signature=[
                tf.TensorSpec([None, *image_encoding.shape[1:]], tf.float32, name="image_encodings"),
                tf.TensorSpec([None, *text_encoding.shape[1:]], tf.float32, name="text_encodings"),
            ],
        )
        self.signature_names = self.signature_names + RERANK_SIGNATURES
        if image_extractor is not None:
            self.extract_image_features = self._extract
            self.signature_names = self.signature_names + ("extract_image_features",)

    def _encoder(self):
        return self.model.stages()[0].model

    def _encode_image(self, image_features):
        return self._stage_encode_image(0, image_features)

    def _similarity(self, image_encodings, text_encodings):
        return tf.cast(super()._similarity(image_encodings, text_encodings), tf.float32)

    def _rerank_encode_text(self, text):
        second = self.model.stages()[1].model
        return second.encode_text(second.vectorizer(text))

    def _rerank_encode_image(self, image_features):
        return self._stage_encode_image(1, image_features)

    def _rerank_score_pairs(self, image_encodings, text_encodings):
        return tf.cast(self.model.stages()[1].model.pair_similarity(image_encodings, text_encodings), tf.float32)

    def _stage_encode_image(self, stage, image_features):
        stage = self.model.stages()[stage]
        return stage.model.encode_image(image_features[:, stage.columns[0] : stage.columns[1]])

    def _score(self, image_features, text):
        """Each image's row of texts ranked in two stages (the module
        docstring): the first stage's `rerank_k` best texts of the row (ties
        and the cut by lower index, `common.reranking`) get the second
        stage's score; the others, minimum listed score - 1 - j for the
        j-th (0-based) of them in the first stage's order."""
        first = self._similarity(self._encode_image(image_features), self._encode_text(text))
        n_images, n_texts = tf.shape(first)[0], tf.shape(first)[1]
        k = tf.minimum(self.rerank_k, n_texts)
        order = tf.argsort(first, axis=1, direction="DESCENDING", stable=True)
        listed = order[:, :k]
        second = tf.reshape(self._rerank_score_pairs(tf.repeat(self._rerank_encode_image(image_features), k, axis=0),
                                                     tf.gather(self._rerank_encode_text(text), tf.reshape(listed, [-1]))),
                            [n_images, k])
        below = tf.reduce_min(second, axis=1, keepdims=True) - 1.0 - tf.cast(tf.range(n_texts - k), tf.float32)[None]
        in_order = tf.concat([second, below], axis=1)
        return tf.gather(in_order, tf.argsort(order, axis=1), batch_dims=1)


def export_saved_model(model, path):
    """Writes a SavedModel to `path`, replacing any previous one only once
    the new one is complete (an interrupted export leaves the old intact).

    Args:
      model: the trained model. Its `image_features` (kind, width,
        provenance: `data.image_features.ImageFeatures`) are kept as the
        variables `image_features` (the kind) and `image_provenance`; when
        the provenance names a backbone
        `data.feature_extractor.from_provenance` rebuilds, the export takes
        encoded images too.
      path: the SavedModel directory (its parent is made if missing, for
        TF Serving's `<model>/<version>/` layout).
    """
    path = Path(path)
    features = model.image_features
    extractor = None
    if features.provenance is not None:
        backbone = features.provenance["backbone"]
        extractor = feature_extractor.from_provenance(features.provenance, features.kind)
        if extractor is None:
            logging.getLogger("export").warning(
                "%s: takes image features only: the recorded backbone %s of its %s features is not one the zoo "
                "rebuilds (a TF Hub module needs its directory)", path, backbone, features.kind)
        elif extractor.dim != features.width:
            raise InputError(f"{path}: the recorded backbone {backbone} makes "
                             f"{extractor.dim}-d features, the model reads {features.width}-d ones")
    module = (ServingModule if model.rerank_k is None else TwoStageServingModule)(model, extractor)
    # For inference: written-out gradients (`PackedGRU`'s) stay out.
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    # Traced in the save's context: a tf.function traced outside it is
    # traced again inside (the context is part of its cache key), and the
    # signatures with a backbone take seconds each to trace.
    with save_context.save_context(options):
        module.track_state()
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        try:
            tf.saved_model.save(
                module,
                str(staging),
                signatures=module.signatures(),
                options=options,
            )
        except (OSError, tf.errors.OpError) as error:  # a full disk, a quota
            raise InputError(f"{path}: the SavedModel cannot be written ({error_reason(error)}); "
                             "any previous export is unchanged") from None
        replace_directory(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
