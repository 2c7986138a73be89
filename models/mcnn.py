"""m-CNN (Ma, Lu, Shang, Li, "Multimodal Convolutional Neural Networks for
Matching Image and Sentence", ICCV 2015).

No joint space: a matching CNN convolves a sentence's word vectors with the
image vector, and an MLP turns the joint representation into a score.

    nu_im   = ReLU(w_im CNN(I) + b_im), d = 256                     (1)
    s_match = w_s ReLU(w_h nu_JR + b_h) + b_s                          (2)
    conv    = g(window) * ReLU(w [nu^i || .. || nu^{i+2} (|| nu_im)] + b)   (3-6, 8)
    pool    = max(nu^{2i}, nu^{2i+1})                                  (7)
    st:       nu_JR = [nu_im || nu_st]                                 (9)
    loss    = max(0, mu - s(x_n, y_n) + s(x_n, y_m)), mu = 0.5         (10)

Registered rows of Table 2 (`variant`: where the image enters, Table 1):
- `mcnn-wd`: the first convolution (words), `mcnn-phs`: the second (short
  phrases), `mcnn-phl`: the third (long phrases), `mcnn-st`: the MLP
  (sentence; three unimodal convolutions);
- `mcnn-ens`: the sum of the four trained models' scores
  (`--set model.members=DIR_wd,DIR_phs,DIR_phl,DIR_st`): the zoo's
  ensemble (`models.ensemble`) with raw scores and unit weights.

Full ranking is a network evaluation per (image, sentence) pair. The
multimodal layer is linear in its concatenated input, so it is split
(`MultimodalConv1D`, `MultimodalDense`) into a text part computed once per
sentence (`encode_text`: the layers below the image, the multimodal layer's
text term, max-pooled) and an image part computed once per image
(`encode_image`); `similarity` adds them per pair and runs the rest of the
network on blocks of pairs in bounded memory. This is exact (tested against
a literal concatenate-then-convolve transcription of eqs. 3-9).

Readings taken where the paper is silent:
- Convolutions are "valid" (no border padding): 30 -> 28 -> 14 -> 12 -> 6 ->
  4 -> 2 positions, so nu_JR is 2 x 300 (st: 256 + 600); with "same" padding
  the paper's sizes would not pool evenly.
- Sentences are cut to their first 30 tokens and padded after the last word
  (Hu et al. 2014, whose gate m-CNN takes). Padded word vectors are exactly
  0, and the gate of eq. 6 (stated for the word-level network) is applied in
  every convolution of every variant, computed from the word mask.
- The image enters every window that starts on a real word: one copy per
  window (eq. 5), zero-padded where the sentence is (Sec. 3.1).
- Dropout 0.1 (a drop rate, as Hinton et al.) on the MLP's hidden layer,
  per pair; dropout on the shared image or sentence vectors would not be
  the per-pair noise the paper describes and would break the factorisation.
- One model is trained for both directions ("our m-CNNs are bidirectional";
  Tables 2-4 report both for each model): eq. 10 with a random non-matching
  sentence for the image and a random non-matching image for the sentence.
  The random pair of the k-th positive is its batch neighbour k+1 (batches
  are a fresh random sample of the pairs every epoch), pairs of the same
  image excluded; the loss is the mean over the batch's positive pairs.
- Words: 50-d skip-gram vectors trained on the training captions (the
  paper's corpus is not named), tuned; every training word is in the
  vocabulary; the treebank tokenizer keeps punctuation ("." is a word of
  Table 5). The paper's captions were lemmatised ("three person sit ...");
  the lemma file is not available here, surface forms are used (a
  deviation).
- Images: the zoo's precomputed, frozen CNN features (the paper fine-tunes
  VGG-19 or OverFeat end to end: a deviation for a CPU budget); W_im is
  d x (feature size). The paper's CNN output is its last fully connected
  layer before the last ReLU (signed); the embedded features come after a
  non-linearity (EfficientNet-Lite0's head after its ReLU6: non-negative).
- Training: SGD (the paper's), batches of 128 ("100~150"), learning rate
  per member (not given; chosen by sweeps, see `PAPER_LEARNING_RATES`),
  at most 100 epochs with early
  stopping after 10 validations without a better dev rsum ("early-stopping"),
  no gradient clipping (none in the paper).
- The ensemble sums the members' raw scores ("summing the matching scores"),
  unweighted.
"""

import math

import keras
import tensorflow as tf
from keras import layers as keras_layers
from keras import ops

from layers.gated_conv1d import GatedConv1D
from layers.multimodal_conv1d import MultimodalConv1D
from layers.multimodal_dense import MultimodalDense
from layers.order_violation_similarity import split_blocks
from layers.text_vectorizer import TextVectorizer
from models.base import RetrievalModel
from models.mcnn_config import IMAGE_LAYER, stage_lengths

class MCNNModel(RetrievalModel):
    """One matching CNN (wd, phs, phl or st), factorised for full ranking.

    Encodings: `encode_text` gives, for wd/phs/phl, the multimodal layer's
    pooled text term and its gate flattened to [B, P * F + P]; for st, the
    text term of the MLP's hidden layer, [B, H]. `encode_image` gives the
    image term of the same layer, [B, F] or [B, H]. They are halves of the
    matching network, not a joint space.
    """

    joint_space = False

    def __init__(self, config, vocabulary, image_dim, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.image_layer = IMAGE_LAYER[config.variant]
        self.vectorizer = TextVectorizer(vocabulary.tokens, tokenizer=config.tokenizer)
        self.word_embedding = keras_layers.Embedding(len(vocabulary), config.word_dim)
        # Created only when asked for: runs without one keep their checkpoints' layout.
        if config.image_adapter:
            self.image_adapter = keras.Sequential(
                [keras_layers.Dense(units, activation="relu") for units in config.image_adapter], name="image_adapter")
        self.image_projection = keras_layers.Dense(config.embed_dim, activation="relu", name="image_projection")  # eq. 1
        self.lengths = stage_lengths(config.max_length, config.window)
        # Named attributes, not a list (TF checkpoints do not see layers held
        # in a Python list): conv1..conv3, one of them multimodal for wd/phs/phl.
        for layer, filters in enumerate(config.feature_maps, start=1):
            conv = MultimodalConv1D if layer == self.image_layer else GatedConv1D
            setattr(self, f"conv{layer}", conv(filters, window=config.window, name=f"conv{layer}"))
        if self.image_layer <= len(config.feature_maps):
            # Built here: its text and image parts are called separately.
            channels = (config.word_dim, *config.feature_maps)[self.image_layer - 1]
            self._conv(self.image_layer).build((None, None, channels), None, (None, config.embed_dim))
        hidden = list(config.hidden_units)
        if self.image_layer == IMAGE_LAYER["st"]:
            self.joint = MultimodalDense(hidden.pop(0), name="joint")  # eq. 9 + the first layer of eq. 2
            self.joint.build((None, self.lengths[-1] * config.feature_maps[-1]), (None, config.embed_dim))
            self.joint_dropout = keras_layers.Dropout(config.dropout)
        mlp = []
        for units in hidden:
            mlp += [keras_layers.Dense(units, activation="relu"), keras_layers.Dropout(config.dropout)]
        # Eq. 2's output bias b_s cancels in every difference of eq. 10 (its
        # gradient is always 0) and shifts every score alike: left out.
        self.mlp = keras.Sequential([*mlp, keras_layers.Dense(1, use_bias=False)], name="mlp")
        # Creates every weight now (the pair network's are otherwise only
        # created by the first pair scored, after the optimizer is built).
        self.score_pairs(self.encode_image(tf.zeros([1, image_dim])), self.encode_text(tf.ones([1, 1], tf.int32)))

    def _multimodal_shape(self):
        """(positions, feature maps) of the multimodal convolution's output."""
        return self.lengths[self.image_layer - 1], self.config.feature_maps[self.image_layer - 1]

    def encoding_sizes(self):
        """(image encoding size, text encoding size)."""
        if self.image_layer == IMAGE_LAYER["st"]:
            return self.config.hidden_units[0], self.config.hidden_units[0]
        positions, filters = self._multimodal_shape()
        return filters, positions * filters + positions

    def _conv(self, layer):
        return getattr(self, f"conv{layer}")

    def encode_text(self, token_ids, training=False):
        ids = token_ids[:, : self.config.max_length]
        ids = tf.pad(ids, [[0, 0], [0, self.config.max_length - tf.shape(ids)[1]]])
        ids = tf.reshape(ids, (-1, self.config.max_length))
        x = self.word_embedding(ids)
        mask = ops.cast(ids != 0, x.dtype)
        x = x * mask[..., None]  # padded words are exactly 0
        for layer in range(1, self.image_layer):  # the unimodal layers below the image
            x, mask = self._conv(layer)(x, mask)
        if self.image_layer == IMAGE_LAYER["st"]:
            return self.joint.text_part(ops.reshape(x, (-1, x.shape[1] * x.shape[2])))
        text, gate = self._conv(self.image_layer).text_part(x, mask)
        return ops.concatenate([ops.reshape(text, (-1, text.shape[1] * text.shape[2])), gate], axis=-1)

    def encode_image(self, image_features, training=False):
        if self.config.image_adapter:
            image_features = self.image_adapter(image_features)
        image = self.image_projection(image_features)
        if self.image_layer == IMAGE_LAYER["st"]:
            return self.joint.image_part(image)
        return self._conv(self.image_layer).image_part(image)

    def score_pairs(self, image_encodings, text_encodings, training=False):
        """Scores of pairs of encodings whose leading axes broadcast:
        aligned pairs [N, F'] x [N, E] -> [N]; all pairs [n, 1, F'] x
        [1, m, E] -> [n, m]."""
        if self.image_layer == IMAGE_LAYER["st"]:
            hidden = self.joint_dropout(self.joint.combine(text_encodings, image_encodings), training=training)
            shape = tf.shape(hidden)[:-1]
            flat = tf.reshape(hidden, (-1, hidden.shape[-1]))
        else:
            positions, filters = self._multimodal_shape()
            lead = tf.shape(text_encodings)[:-1]
            text = tf.reshape(text_encodings[..., : positions * filters], tf.concat([lead, [positions, filters]], 0))
            gate = text_encodings[..., positions * filters :]
            x = MultimodalConv1D.combine(text, gate, image_encodings)  # [..., P, F]
            shape = tf.shape(x)[:-2]
            mask = tf.reshape(tf.broadcast_to(gate, tf.shape(x)[:-1]), (-1, positions))
            x = tf.reshape(x, (-1, positions, filters))
            for layer in range(self.image_layer + 1, 4):
                x, mask = self._conv(layer)(x, mask)
            flat = tf.reshape(x, (-1, x.shape[1] * x.shape[2]))
        return tf.reshape(self.mlp(flat, training=training)[:, 0], shape)

    def pair_similarity(self, image_encodings, text_encodings):
        """The pair network on aligned pairs [P, F'] x [P, E] -> [P]."""
        return tf.cast(self.score_pairs(image_encodings, text_encodings), tf.float32)

    def similarity(self, image_encodings, text_encodings):
        """Every image with every sentence, in blocks of b x b pairs
        holding at most `max_block_elements` floats of the joint layer; a
        side with fewer than b items is one block of them (a few pairs are
        not padded to b x b)."""
        if self.image_layer == IMAGE_LAYER["st"]:
            per_pair = self.config.hidden_units[0]
        else:
            per_pair = math.prod(self._multimodal_shape())
        block = max(1, math.isqrt(self.config.max_block_elements // per_pair))
        b_i, b_t = (tf.clip_by_value(tf.shape(x)[0], 1, block) for x in (image_encodings, text_encodings))
        images, n_images = split_blocks(image_encodings, b_i)  # [I, b_i, F']
        texts, n_texts = split_blocks(text_encodings, b_t)  # [T, b_t, E]

        def image_block_scores(image_block):
            return tf.map_fn(
                lambda text_block: self.score_pairs(image_block[:, None], text_block[None]),
                texts, parallel_iterations=1,
            )  # [T, b_i, b_t]

        scores = tf.map_fn(image_block_scores, images, parallel_iterations=1)  # [I, T, b_i, b_t]
        scores = tf.reshape(tf.transpose(scores, (0, 2, 1, 3)), (tf.shape(images)[0] * b_i, -1))
        return scores[:n_images, :n_texts]

    def pair_loss(self, image_encodings, text_encodings, image_index):
        """Eq. 10 in both directions, each positive meeting the non-matching
        pairs of `config.negatives` once as a wrong sentence for its image
        and once as a wrong image for its sentence; pairs sharing an image
        are no negatives. Mean over the batch's positive pairs."""
        if self.config.negatives == "sampled":
            return self._sampled_pairs_loss(image_encodings, text_encodings, image_index)
        return self._batch_pairs_loss(image_encodings, text_encodings, image_index)

    def _sampled_pairs_loss(self, image_encodings, text_encodings, image_index):
        """The k-th positive's negatives are its batch neighbours k+1 .. k+m
        (a random sample, the batch being one); their hinges summed."""
        shifts = range(1, self.config.negatives_per_pair + 1)
        images = [image_encodings] * (1 + len(shifts)) + [ops.roll(image_encodings, -s, axis=0) for s in shifts]
        texts = [text_encodings] + [ops.roll(text_encodings, -s, axis=0) for s in shifts] + [text_encodings] * len(shifts)
        # Pairs only meet in training: dropout is on.
        scores = ops.reshape(
            self.score_pairs(ops.concatenate(images, 0), ops.concatenate(texts, 0), training=True),
            (1 + 2 * len(shifts), -1),
        )
        scores = ops.cast(scores, "float32")  # the loss in float32 under mixed precision
        positive, wrong_sentence, wrong_image = scores[0], scores[1 : 1 + len(shifts)], scores[1 + len(shifts) :]
        distinct = ops.stack([image_index != ops.roll(image_index, -s, axis=0) for s in shifts])
        margin = self.config.margin
        hinges = ops.relu(margin - positive + wrong_sentence) + ops.relu(margin - positive + wrong_image)
        return ops.sum(ops.where(distinct, hinges, 0.0)) / ops.cast(ops.shape(positive)[0], "float32")

    def _batch_pairs_loss(self, image_encodings, text_encodings, image_index):
        """Every pair of the batch scored ([B, B]: image i, sentence j); the
        k-th positive meets row k's and column k's other images' items,
        averaged ("batch") or the hardest ("hardest")."""
        scores = ops.cast(
            self.score_pairs(image_encodings[:, None], text_encodings[None], training=True), "float32")
        positive = ops.diagonal(scores)
        distinct = image_index[:, None] != image_index[None, :]
        margin = self.config.margin
        wrong_sentence = ops.where(distinct, ops.relu(margin - positive[:, None] + scores), 0.0)  # row: image k
        wrong_image = ops.where(distinct, ops.relu(margin - positive[None, :] + scores), 0.0)  # column: sentence k
        if self.config.negatives == "hardest":
            hinges = ops.max(wrong_sentence, axis=1) + ops.max(wrong_image, axis=0)
        else:
            count = ops.maximum(ops.sum(ops.cast(distinct, "float32"), axis=1), 1.0)  # symmetric: rows = columns
            hinges = (ops.sum(wrong_sentence, axis=1) + ops.sum(wrong_image, axis=0)) / count
        return ops.mean(hinges)
