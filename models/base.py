"""The interface every model of the zoo implements: the model
(`RetrievalModel`, and `FittedModel` for one fitted without gradients);
its config's base classes are `models.base_config`'s."""

import abc
import dataclasses

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from common.errors import InputError
from data.image_features import ImageFeatures


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a two-stage model (`RetrievalModel.stages`).

    Attributes:
      model: the stage's trained `RetrievalModel` (its own vectorizer
        takes raw captions).
      columns: (first, past-the-last) column of the two-stage model's image
        features that the stage reads.
    """

    model: "RetrievalModel"
    columns: tuple[int, int]


class RetrievalModel(keras.Model, metaclass=abc.ABCMeta):
    """An image-sentence retrieval model, as the trainer, evaluation and
    export see it.

    Text goes in as raw strings through `vectorizer` (a `TextVectorizer`
    holding the vocabulary and the in-graph tokenizer), so training, the
    checkpoint and the SavedModel all tokenise the same way. Scoring is split
    into an encoding of each side and a `similarity` of the encodings, so
    evaluation encodes every image and caption once and then scores them
    block by block in bounded memory:

    - embedding models (VSE, RCN) encode each side into the joint space and
      compare by cosine or order-violation similarity;
    - a regression model (Word2VisualVec) encodes text into the visual
      feature space and images as themselves;
    - a pairwise model (m-CNN) encodes each side only up to where they meet,
      and its `similarity` evaluates the joint network on every pair.

    Subclasses set `vectorizer` and implement the four methods below (a
    model fitted without gradients derives from `FittedModel` instead,
    which states its `pair_loss`); a model with a trainable word embedding
    sets `word_embedding`, which the default `set_word_vectors`
    initialises.
    """

    vectorizer: keras.layers.Layer
    word_embedding: keras.layers.Embedding | None = None
    # The image features the model reads (`data.image_features.ImageFeatures`:
    # kind, width F, provenance): set when it is built
    # (`models.registry.ModelSpec.build_model`), so whoever holds the model
    # (the trainer, a scorer, the export) reads them here.
    image_features: ImageFeatures

    @abc.abstractmethod
    def encode_text(self, token_ids, training=False):
        """int32 [B, L] token ids (0 = padding) -> float [B, D]."""

    @abc.abstractmethod
    def encode_image(self, image_features, training=False):
        """float [B, F] image features -> float [B, D']."""

    @abc.abstractmethod
    def similarity(self, image_encodings, text_encodings):
        """[n_images, ...] x [n_texts, ...] -> float [n_images, n_texts]."""

    @abc.abstractmethod
    def pair_loss(self, image_encodings, text_encodings, image_index):
        """Training loss of a batch of matching pairs.

        Called on the *global* batch (gathered across replicas), so hardest
        negatives are searched over all of it. Terms of a single encoding
        (regularisers) are added by layers with `add_loss` instead; the
        trainer adds `layer_loss_scale(B) * sum(model.losses)`.

        Args:
          image_encodings, text_encodings: encodings of B matching pairs.
          image_index: int [B], the dataset image of each pair.
        """

    def pair_similarity(self, image_encodings, text_encodings):
        """Similarities of aligned pairs, what a second stage of re-ranking
        scores (`models.rerank`): [P, ...] x [P, ...] -> float32 [P], pair p
        being image p with text p.

        This default runs `similarity` on each pair alone ([1] x [1]): right
        for any model, one call per pair. A family overrides it with its
        similarity of aligned pairs, which costs what P pairs cost."""
        return tf.map_fn(
            lambda pair: tf.cast(self.similarity(pair[0][None], pair[1][None]), tf.float32)[0, 0],
            (image_encodings, text_encodings), fn_output_signature=tf.float32,
        )

    # The list length of a two-stage model (`models.rerank`): a query's
    # candidates are proposed by its first stage's `similarity`, and only
    # its `rerank_k` best are scored by its second stage's `pair_similarity`
    # (`engine.evaluation.rank_two_stage`); None for a model that scores
    # every pair with `similarity`.
    rerank_k = None

    def stages(self):
        """A two-stage model's (first stage, second stage), each a `Stage`,
        what its evaluation scores and its SavedModel serves of each
        (`engine.scoring`, `engine.export`); only called when `rerank_k` is
        set."""
        raise NotImplementedError(f"{type(self).__name__} ranks in one stage (rerank_k is None)")

    def stage_encodings(self, image_encodings, text_encodings):
        """A two-stage model's encodings [n, D] (NumPy arrays or tensors)
        split into its stages' own: ((first stage's image encodings, text
        encodings), (second stage's ...)), views where they can be; only
        called when `rerank_k` is set."""
        raise NotImplementedError(f"{type(self).__name__} ranks in one stage (rerank_k is None)")

    def run_encoding_columns(self, directory):
        """Where the encodings of the trained run in `directory` are within
        this model's, when the model holds that run as a part (an ensemble
        its members): ((first, past-the-last) column of the image
        encodings, (...) of the text encodings); None when it does not."""
        return None

    def call(self, inputs, training=False):
        """{"image_features", "token_ids"} -> similarity matrix of the batch."""
        return self.similarity(
            self.encode_image(inputs["image_features"], training=training),
            self.encode_text(inputs["token_ids"], training=training),
        )

    def layer_loss_scale(self, batch_size):
        """The factor of the layers' losses (`model.losses`) in the training
        loss of a batch of `batch_size` pairs: 1 unless a model states its
        regularisers' weights against a loss other than its `pair_loss`."""
        return 1.0

    # Whether images and captions are encoded into one space, so that two
    # captions (or two images) can be compared with `similarity` too; False
    # for a pairwise model, whose encodings are halves of a joint network.
    joint_space = True

    num_phases = 1

    def start_phase(self, phase):
        """Switches the training loss to that of `phase` (0-based), for a
        model trained in phases (`num_phases` > 1, see
        `TrainConfig.phase_patience`)."""

    def forward_flops(self, token_ids, image_features):
        """The floating-point operations of the forward pass's matrix
        products on a batch (a multiply-add counts 2), for benchmarks; a
        training step costs about 3 times as much (each product's
        gradients, for its input and its weights, cost one product each).
        None where a model does not count them.

        Args:
          token_ids: int array [B, L] of the batch (0 = padding).
          image_features: float array [B, F].
        """
        return None

    def adapt(self, training_image_features):
        """Fits statistics of the training images (e.g. a Full-Network
        Embedding's standardisation) before training; [N, F] array."""

    def set_word_vectors(self, vectors, seed):
        """Initialises the word embedding from pretrained word vectors.

        Args:
          vectors: `data.word_vectors.WordVectors`.
          seed: seeds the rows of words without a vector.

        Returns:
          A one-line description for the log (e.g. the vocabulary coverage).
        """
        if self.word_embedding is None:
            raise InputError(f"model.word_vectors: {type(self).__name__} has no word embedding to initialise; "
                             "set model.word_vectors=null")
        from data import word_vectors  # gensim takes a second to import; only here.

        matrix, coverage = word_vectors.embedding_matrix(
            vectors, self.vectorizer.vocabulary, self.word_embedding.output_dim, seed
        )
        self.word_embedding.embeddings.assign(ops.convert_to_tensor(matrix))
        return f"word vectors cover {100 * coverage:.1f}% of the vocabulary"


@dataclasses.dataclass(frozen=True)
class Fit:
    """What `FittedModel.fit_split` did.

    Attributes:
      chosen: what the fit chose (e.g. a regularisation), by name: numbers
        or strings. It is logged and written to results.json as "fit".
      dev_scores: the fitted model's scores of every pair of the dev split
        given to the fit, [n_images, n_captions], when the fit computed
        them: the trainer validates by ranking them instead of scoring dev
        a second time (for an ensemble of pairwise m-CNNs that second
        scoring is a third of the run). None: the trainer scores dev.
    """

    chosen: dict
    dev_scores: np.ndarray | None = None


class FittedModel(RetrievalModel):
    """A model fitted without gradient descent (in closed form, or assembled
    from trained models): the trainer calls `fit_split` instead of running
    training steps, then validates once."""

    @abc.abstractmethod
    def fit_split(self, train_split, dev_split, writer, seed):
        """Fits the model.

        Args:
          train_split, dev_split: `data.readers.RetrievalSplit`s (dev for
            choosing settings, e.g. a regularisation).
          writer: a `tf.summary` writer for the fit's own scalars.
          seed: seeds any random choice.

        Returns:
          A `Fit`.
        """

    def pair_loss(self, image_encodings, text_encodings, image_index):
        raise TypeError(f"{type(self).__name__} is fitted (fit_split), not trained by gradients")
