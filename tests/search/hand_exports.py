"""Hand-built SavedModels with the zoo's export signatures, and folders of
images to index.

`HandExport` encodes a text as 1 plus the sum of fixed random vectors of
its words (hashed), and an image as its pixels, decoded and resized to
4 x 4, times a fixed matrix; `encode_image` takes those 48 pixel values as
its precomputed features, so `encode_image_bytes` equals `encode_image` on
them, as the zoo's exports promise. Its similarity is the cosine, the dot
product or (a pairwise model without a joint space) minus the L1
distance of every pair. A caption of more than 12 words fails the call,
as the zoo's exports fail captions longer than they accept.
`HandTwoStageExport` is a two-stage export made of two of them.
"""

import io

import numpy as np
import tensorflow as tf
from PIL import Image

ENCODING = 6
PIXELS = 48  # 4 x 4 x 3
MAX_WORDS = 12


class HandExport(tf.Module):
    def __init__(self, similarity="cosine", images=True, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.word_vectors = tf.Variable(rng.normal(size=(97, ENCODING)).astype(np.float32), trainable=False)
        self.pixel_weights = tf.Variable(rng.normal(size=(PIXELS, ENCODING)).astype(np.float32), trainable=False)
        self.joint_space = tf.Variable(similarity != "pairwise", trainable=False)
        self.image_features = tf.Variable("ims", trainable=False)
        self.kind = similarity
        text = tf.TensorSpec([None], tf.string, name="text")
        features = tf.TensorSpec([None, PIXELS], tf.float32, name="image_features")
        encodings = tf.TensorSpec([None, ENCODING], tf.float32)
        self.encode_text = tf.function(self._encode_text, input_signature=[text])
        self.encode_image = tf.function(self._encode_image, input_signature=[features])
        self.score = tf.function(lambda f, t: self._similarity(self._encode_image(f), self._encode_text(t)),
                                 input_signature=[features, text])
        self.similarity = tf.function(self._similarity, input_signature=[encodings, encodings])
        if images:
            self.encode_image_bytes = tf.function(self._encode_image_bytes,
                                                  input_signature=[tf.TensorSpec([None], tf.string, name="images")])

    def _encode_text(self, text):
        words = tf.strings.split(text)
        tf.debugging.assert_less_equal(words.row_lengths(), tf.constant(MAX_WORDS, tf.int64),
                                       message="caption too long")
        vectors = tf.gather(self.word_vectors, tf.strings.to_hash_bucket_fast(words, 97))
        return 1.0 + tf.reduce_sum(vectors, axis=1)

    def _encode_image(self, image_features):
        return image_features @ self.pixel_weights

    def _encode_image_bytes(self, images):
        return self._encode_image(tf.map_fn(pixels, images, fn_output_signature=tf.TensorSpec([PIXELS], tf.float32)))

    def _similarity(self, image_encodings, text_encodings):
        if self.kind == "dot":
            return image_encodings @ tf.transpose(text_encodings)
        if self.kind == "cosine":
            return tf.math.l2_normalize(image_encodings, 1) @ tf.transpose(tf.math.l2_normalize(text_encodings, 1))
        return -tf.reduce_sum(tf.abs(image_encodings[:, None, :] - text_encodings[None, :, :]), axis=2)


class HandTwoStageExport(tf.Module):
    """A two-stage export's signatures (`engine.export`) around two
    `HandExport`s: `first` proposes (its encoders, image signature and
    similarity are the export's), `second` re-ranks (`rerank_encode_*`,
    `rerank_score_pairs`: its similarity of aligned pairs); lists of `k`.
    Its `extract_image_features` gives the 48 pixel values both take."""

    def __init__(self, first, second, k):
        super().__init__()
        self.first, self.second = first, second
        self.rerank_k = tf.Variable(k, dtype=tf.int32, trainable=False)
        self.joint_space = tf.Variable(True, trainable=False)
        self.image_features = tf.Variable("ims", trainable=False)
        self.encode_text, self.encode_image, self.similarity = first.encode_text, first.encode_image, first.similarity
        self.encode_image_bytes = first.encode_image_bytes
        self.rerank_encode_text, self.rerank_encode_image = second.encode_text, second.encode_image
        encodings = tf.TensorSpec([None, ENCODING], tf.float32)
        self.rerank_score_pairs = tf.function(
            lambda images, texts: tf.linalg.diag_part(second._similarity(images, texts)),
            input_signature=[encodings, encodings])
        self.extract_image_features = tf.function(
            lambda images: tf.map_fn(pixels, images, fn_output_signature=tf.TensorSpec([PIXELS], tf.float32)),
            input_signature=[tf.TensorSpec([None], tf.string, name="images")])


def pixels(data):
    """The 48 features `HandExport` takes for an encoded image."""
    image = tf.cast(tf.io.decode_image(data, channels=3, expand_animations=False), tf.float32) / 255.0
    return tf.reshape(tf.image.resize(image, [4, 4]), [PIXELS])


def save(module, path):
    names = [name for name in ("encode_text", "encode_image", "score", "similarity", "encode_image_bytes",
                               "rerank_encode_text", "rerank_encode_image", "rerank_score_pairs",
                               "extract_image_features") if hasattr(module, name)]
    tf.saved_model.save(module, str(path), signatures={name: getattr(module, name) for name in names})
    return path


def png_bytes(seed):
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=(20, 30, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def good_images(root):
    """{id: bytes} of the decodable images of `photos`."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.suffix.lower() in (".jpg", ".png") and path.name != "broken.jpg"}
