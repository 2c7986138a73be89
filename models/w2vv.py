"""Word2VisualVec (Dong, Li, Snoek, "Predicting Visual Features From Text
for Image and Video Caption Retrieval", IEEE TMM 2018).

Nothing is learned on the visual side: a sentence is vectorised at three
scales (Sec. III-A) and an MLP regresses the CNN feature of its image (or
video) from them; retrieval ranks by the cosine between the predicted and
the real visual feature (Sec. III-C).

    s_bow(q)      = word counts over the training words seen >= 5 times   (1)
    s_word2vec(q) = the mean of the sentence's word vectors              (2)
    h_|q|         = the last state of a GRU over the word embeddings     (3)
    s(q)          = [s_bow(q), s_word2vec(q), h_|q|]                      (4)
    r(q)          = ReLU(W_l ... ReLU(W_1 s(q) + b_1) ... + b_l)          (5-7)
    loss          = mean squared error (r(q) - phi(x))^2                  (8-9)

Registered rows of Table I (one config field, `scales`):
- `w2vv`: multi-scale (eq. 4), bow + word2vec + gru;
- `w2vv-bow`, `w2vv-word2vec`, `w2vv-gru`: the single-scale columns.

Everything runs in the graph: the SavedModel takes raw strings, tokenises
them once ("alnum", the public code's `clean_str`), looks them up once in a
vocabulary of the training words seen >= 5 times (BoW and GRU words, in
that order) followed by the other words of the word-vector file (seen by
the word2vec scale only), and computes the three scales from those ids.

Readings taken where the paper is silent, and the public code
(`danieljf24/w2vv`) where it fills the gap:
- Three layers = input -> one hidden layer of 2048 -> the visual feature
  (Sec. IV-A: "the number of layers is three"; eqs. 5-7 index the layers
  inconsistently). ReLU on every layer, the output included (Sec. III-B).
- Dropout 0.2 (the paper says "dropout to all hidden layers", no rate):
  on the word embeddings, the GRU's inputs and recurrent state, and the
  hidden layers, as the public code.
- The GRU is eq. 3 (reset gate before the recurrent product; sigmoid
  gates), Keras' `GRU(reset_after=False)` (as `PackedGRU`, which skips the
  padding), whose update gate z is the
  paper's 1 - z (the same function class). The public code used Keras 2's
  hard sigmoid; the paper writes a sigmoid, which is taken. It reads the
  first 32 tokens (the public code's `sent_maxlen`), masked instead of
  pre-padded (a deliberate deviation: the same last state only while the
  padding steps leave the state at zero, as at initialisation; once the
  padding's embedding and the biases are trained they move it, so the
  public code's encoding of a caption depends on how much padding its
  batch had, ours does not). Its embedding is trainable,
  initialised from the word vectors, missing words U(-1, 1); words of the
  BoW vocabulary only, others are UNK.
- Eq. 2 divides by |q|; the mean here is over the words that have a
  vector (the public code), and a sentence without any is the zero vector.
- Stopwords are kept in BoW and word2vec: the paper's vocabulary sizes
  (2,535 on Flickr8k, reproduced by `tests/models/test_w2vv.py`) are
  those of the unfiltered vocabulary. The public code's default filters
  stopwords from both; that variant is not offered.
- Word vectors: the paper's 500-d skip-gram vectors trained on the tags of
  30M Flickr images (a 3 GB download) cannot ship here. The `paper` preset
  trains 500-d skip-gram word2vec on the training captions instead; pass
  the real vectors with `--set model.word_vectors=PATH` (gensim formats or a
  bigfile folder such as `vec500flickr30m`).
- Training (Sec. III-B) with the public code's values where the paper has
  none: RMSprop, lr 1e-4, rho 0.9, eps 1e-6 *outside* the square root
  (Keras 2; emulated by eps 1e-12 inside it, Keras 3's form; see
  `TrainConfig.optimizer_epsilon`), batches of 100, gradients clipped at
  global norm 5, the learning rate halved after 3 validations without
  improvement, early stop after 10, at most 100 epochs; the validation
  measure (unnamed in the paper) is image->text mAP, the public code's.
  Every caption once per epoch (the public code draws 100 random images
  with one caption per step, 300 steps an "epoch").
- The ranking-loss and similarity ablations the paper mentions without
  numbers are config values: `loss` ("mse", or the zoo's hinge losses on
  the model's similarity, margin 0.2) and `similarity` ("cosine", "dot",
  "neg_mse"; for training with a hinge loss and for retrieval).

The config class (`W2VVConfig`), the presets and the registrations are in
`models/w2vv_config.py`, which imports no TensorFlow (`models.registry`).
"""

import keras
import numpy as np
from keras import layers as keras_layers
from keras import ops

from common.wording import counted
from data.tokenizer import tokenize_strings
from data.vocabulary import Vocabulary
from layers.bag_of_words import BagOfWords
from layers.cosine_similarity import CosineSimilarity
from layers.dot_product_similarity import DotProductSimilarity
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from layers.mean_word_vector import MeanWordVector
from layers.negative_mse_similarity import NegativeMSESimilarity
from layers.packed_gru import PackedGRU
from layers.text_vectorizer import TextVectorizer
from models.base import RetrievalModel
from models.w2vv_config import SCALES

SIMILARITIES = {"cosine": CosineSimilarity, "dot": DotProductSimilarity, "neg_mse": NegativeMSESimilarity}
HINGE_LOSSES = {"hinge_sum": SumOfHinges, "hinge_max": MaxOfHinges}


def w2vv_vocabulary(config, train_captions, word_vectors=None):
    """The training words seen >= `vocab_min_count` times (the BoW and GRU
    vocabulary, most frequent first), then, with the word2vec scale, the
    words of the vector file that the tokenizer can produce (the word2vec
    scale's vocabulary: Sec. III-A's novel words)."""
    extra = []
    if word_vectors is not None and "word2vec" in config.scales:
        words = list(word_vectors.index_to_key[: config.max_vector_words])
        extra = [word for word, tokens in zip(words, tokenize_strings(words, config.tokenizer)) if tokens == [word]]
    return Vocabulary.build(
        train_captions, min_count=config.vocab_min_count, max_size=config.vocab_max_size, tokenizer=config.tokenizer,
        extra_words=extra,
    )


def num_training_words(vocabulary, min_count):
    """How many words follow `<pad>`, `<unk>` before the first word seen
    fewer than `min_count` times in training (all, without counts)."""
    if vocabulary.counts is None:
        return len(vocabulary) - 2
    rare = [i for i, count in enumerate(vocabulary.counts[2:]) if count < min_count]
    return rare[0] if rare else len(vocabulary) - 2


class W2VVModel(RetrievalModel):
    """Multi-scale sentence vectorisation -> MLP -> the visual feature space.

    Args:
      config: a `W2VVConfig`.
      vocabulary: a `Vocabulary` as `w2vv_vocabulary` builds it.
      image_dim: the visual feature size, the MLP's output size.
    """

    def __init__(self, config, vocabulary, image_dim, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        n_words = num_training_words(vocabulary, config.vocab_min_count)
        if n_words == 0:
            raise ValueError(f"no training word is seen {counted(config.vocab_min_count, 'time')}")
        self.vectorizer = TextVectorizer(vocabulary.tokens, tokenizer=config.tokenizer)
        self.scales = [scale for scale in SCALES if scale in config.scales]
        if "bow" in self.scales:
            self.bag_of_words = BagOfWords(n_words)
        if "word2vec" in self.scales:
            self.mean_word_vector = MeanWordVector(len(vocabulary), config.word_dim)
        if "gru" in self.scales:
            # Ids 0 .. n_words + 1: padding, UNK, the training words.
            self.gru_vocabulary_size = n_words + 2
            init = config.missing_word_init
            self.word_embedding = keras_layers.Embedding(
                self.gru_vocabulary_size, config.word_dim,
                embeddings_initializer=keras.initializers.RandomUniform(-init, init), mask_zero=True,
            )
            self.embedding_dropout = keras_layers.Dropout(config.dropout)
            self.gru = PackedGRU(
                config.gru_units, reset_after=False, dropout=config.dropout, recurrent_dropout=config.dropout
            )
        # Eqs. 5-7: ReLU layers, dropout after each hidden one, the output
        # layer of the visual feature's size. (A Sequential, not a list of
        # layers: TF checkpoints do not see layers held in a Python list.)
        # Its input is declared float32 (each layer casts it to its compute
        # dtype): one it made itself would take the compute dtype of a mixed
        # policy for good, and the model's float32 test and export
        # (`engine.runtime.computing_in_float32`) would round the sentence
        # vectors to the low precision. The same layers and checkpoint either
        # way.
        sentence_dim = sum({"bow": n_words, "word2vec": config.word_dim, "gru": config.gru_units}[scale]
                           for scale in self.scales)
        mlp = [keras.Input((sentence_dim,), dtype="float32")]
        for units in config.hidden_units:
            mlp += [keras_layers.Dense(units, activation="relu"), keras_layers.Dropout(config.dropout)]
        self.mlp = keras.Sequential([*mlp, keras_layers.Dense(image_dim, activation="relu")], name="mlp")
        self.similarity_layer = SIMILARITIES[config.similarity](dtype="float32")  # also under mixed precision
        if config.loss in HINGE_LOSSES:
            self.hinge = HINGE_LOSSES[config.loss](margin=config.margin, reduction="sum")

    def sentence_vector(self, token_ids, training=False):
        """s(q) of eq. 4: float [B, m + word_dim + gru_units] (the chosen scales)."""
        parts = []
        if "bow" in self.scales:
            parts.append(self.bag_of_words(token_ids))
        if "word2vec" in self.scales:
            parts.append(self.mean_word_vector(token_ids))
        if "gru" in self.scales:
            ids = ops.where(token_ids < self.gru_vocabulary_size, token_ids, 1)[:, : self.config.max_gru_tokens]
            words = self.embedding_dropout(self.word_embedding(ids), training=training)
            parts.append(self.gru(words, mask=ids != 0, training=training))
        return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)

    def encode_text(self, token_ids, training=False):
        """r(q) of eqs. 5-7: the predicted visual feature, float [B, image_dim]."""
        return self.mlp(self.sentence_vector(token_ids, training=training), training=training)

    def forward_flops(self, token_ids, image_features):
        """The GRU's products over its real tokens and the MLP's."""
        flops = 0
        if "gru" in self.scales:
            flops += self.gru.forward_flops(int(np.count_nonzero(np.asarray(token_ids)[:, : self.config.max_gru_tokens])))
        dense = [layer for layer in self.mlp.layers if isinstance(layer, keras_layers.Dense)]
        return flops + sum(2 * len(token_ids) * int(np.prod(layer.kernel.shape)) for layer in dense)

    def encode_image(self, image_features, training=False):
        """phi(x) itself: nothing is learned on the visual side."""
        return ops.cast(image_features, "float32")

    def similarity(self, image_encodings, text_encodings):
        return self.similarity_layer(image_encodings, text_encodings)

    def pair_similarity(self, image_encodings, text_encodings):
        return self.similarity_layer.pairs(image_encodings, text_encodings)

    def pair_loss(self, image_encodings, text_encodings, image_index):
        if self.config.loss == "mse":
            # Eq. 8, averaged over the feature dimensions and the batch
            # (Keras' "mse", as the public code).
            return ops.mean(ops.square(text_encodings - image_encodings))
        return self.hinge(self.similarity(image_encodings, text_encodings), image_index)

    def set_word_vectors(self, vectors, seed):
        from data import word_vectors  # gensim is slow to import; only here.

        tokens = self.vectorizer.vocabulary
        notes = []
        if "word2vec" in self.scales:
            matrix, found = word_vectors.lookup_vectors(vectors, tokens, self.config.word_dim)
            self.mean_word_vector.set_vectors(matrix, found)
            notes.append(f"{int(found.sum())} of {len(tokens)} vocabulary words have a vector")
        if "gru" in self.scales:
            matrix, coverage = word_vectors.embedding_matrix(
                vectors, tokens[: self.gru_vocabulary_size], self.config.word_dim, seed,
                init_scale=self.config.missing_word_init,
            )
            self.word_embedding.embeddings.assign(ops.convert_to_tensor(matrix))
            notes.append(f"they cover {100 * coverage:.1f}% of the GRU's words")
        return "; ".join(notes)
