"""Visual-semantic embedding (VSE) with a GRU sentence encoder.

The pipeline of Kiros et al. that VSE++, the order embeddings of Vendrov et
al. and the Full-Network Embedding pipelines of Vilalta et al. build on.
Text: word embedding -> GRU -> last valid state -> L2 norm. Image: the CNN
feature (raw, L2-normalised, or as a Full-Network Embedding) -> affine or
linear map -> L2 norm; optionally the absolute value of both embeddings
(order embeddings). Pairs are compared by cosine or order-violation
similarity and trained with a bidirectional hinge loss, summed over the
negatives or kept for the hardest negative only.

`gru`: VSE++'s GRU model with VSE++'s defaults (Faghri et al. 2018). It
is not the "GRU" row of Francis et al. 2018 (Table I), which is `rcn-gru`
(`models/rcn.py`): that row trains batches of 16 (here 128) over the 5,000
most frequent words (here every word seen 4 times) from word2vec vectors
(here random ones), unclipped (here clipped at norm 2), the loss averaged
over the batch (here summed), for 15 epochs at a constant rate (here 30,
the rate divided by 10 after 15), its GRU the paper's eqs. 1-4 (here
Keras' cuDNN-compatible one) over sentences cut at 16 words. The Vilalta
et al. variants are registered in `models/fne_pipelines.py`.

The config class (`VSEConfig`) and the `gru` registration are in
`models/vse_config.py`, which imports no TensorFlow (`models.registry`).
"""

import keras
import numpy as np
from keras import layers as keras_layers
from keras import ops

from layers.cosine_similarity import CosineSimilarity
from layers.full_network_embedding import FullNetworkEmbedding
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from layers.order_violation_similarity import OrderViolationSimilarity
from layers.packed_gru import PackedGRU
from layers.text_vectorizer import TextVectorizer
from models.base import RetrievalModel

HINGE_LOSSES = {"sum": SumOfHinges, "max": MaxOfHinges}
SIMILARITIES = {"cosine": CosineSimilarity, "order": OrderViolationSimilarity}
IMAGE_INPUTS = {
    "raw": keras_layers.Identity,
    "unit": keras_layers.UnitNormalization,
    "fne": FullNetworkEmbedding,
}


class VSEModel(RetrievalModel):
    """GRU sentence encoder and CNN-feature image encoder in a joint space.

    Args:
      config: a `VSEConfig`.
      vocabulary: a `data.vocabulary.Vocabulary`.
      image_dim: the image feature size (not needed: the image map adapts).
    """

    def __init__(self, config, vocabulary, image_dim=None, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.vectorizer = TextVectorizer(vocabulary.tokens, max_length=config.max_length, tokenizer=config.tokenizer)
        # VSE++ initialises word embeddings uniformly in [-0.1, 0.1].
        self.word_embedding = keras_layers.Embedding(
            len(vocabulary),
            config.word_dim,
            embeddings_initializer=keras.initializers.RandomUniform(-0.1, 0.1),
            mask_zero=True,
        )
        self.sentence_encoder = self.make_sentence_encoder(config)
        # Normalisations and the similarity in float32 under a mixed
        # precision policy (`TrainConfig.mixed_precision`).
        self.image_input = IMAGE_INPUTS[config.image_input](dtype="float32")
        self.image_projection = keras_layers.Dense(config.embed_dim, use_bias=config.image_bias)
        self.text_norm = keras_layers.UnitNormalization(dtype="float32")
        self.image_norm = keras_layers.UnitNormalization(dtype="float32")
        self.similarity_layer = SIMILARITIES[config.similarity](dtype="float32")
        self.hinges = [
            HINGE_LOSSES[name](margin=config.margin, reduction=config.loss_reduction)
            for name in config.hinge.split("-")
        ]
        self.num_phases = len(self.hinges)
        self.hinge = self.hinges[0]

    def make_sentence_encoder(self, config):
        """The layer reading word vectors [B, L, word_dim] and a mask [B, L]
        into sentence embeddings [B, embed_dim]: here one GRU (Keras'
        cuDNN-compatible variant, as VSE++'s PyTorch GRU), which like
        VSE++'s packed sequences computes each caption's real words only."""
        return PackedGRU(config.embed_dim)

    def encode_text(self, token_ids, training=False):
        words = self.word_embedding(token_ids)
        # The encoder carries its state over padded steps, so its output is
        # the state after the last real word.
        state = self.sentence_encoder(words, mask=token_ids != 0, training=training)
        return self._embedding(self.text_norm(state))

    def encode_image(self, image_features, training=False):
        projected = self.image_projection(self.image_input(image_features))
        return self._embedding(self.image_norm(projected))

    def _embedding(self, unit_vectors):
        return ops.abs(unit_vectors) if self.config.absolute else unit_vectors

    def forward_flops(self, token_ids, image_features):
        """The GRU's products over the real tokens (what it computes) and
        the image map's."""
        tokens = int(np.count_nonzero(token_ids))
        images, features = np.shape(image_features)
        return self.sentence_encoder.forward_flops(tokens) + 2 * images * features * self.config.embed_dim

    def start_phase(self, phase):
        self.hinge = self.hinges[phase]

    def adapt(self, training_image_features):
        if isinstance(self.image_input, FullNetworkEmbedding):
            self.image_input.adapt(training_image_features)

    def similarity(self, image_encodings, text_encodings):
        return self.similarity_layer(image_encodings, text_encodings)

    def pair_similarity(self, image_encodings, text_encodings):
        return self.similarity_layer.pairs(image_encodings, text_encodings)

    def pair_loss(self, image_encodings, text_encodings, image_index):
        return self.hinge(self.similarity(image_encodings, text_encodings), image_index)

    def layer_loss_scale(self, batch_size):
        # Regulariser weights are stated against the hardest-negative loss
        # averaged over the batch (the RCN's lambda, Francis et al. eq. 15):
        # under the sum of hinges or a sum over the batch they are scaled
        # like the loss (`_HingeLoss.scale`).
        return self.hinge.scale(batch_size)
