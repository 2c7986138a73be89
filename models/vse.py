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
"""

import dataclasses

import keras
import numpy as np
from keras import layers as keras_layers
from keras import ops

from common.config import TrainConfig, setting
from layers.cosine_similarity import CosineSimilarity
from layers.full_network_embedding import FullNetworkEmbedding
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from layers.order_violation_similarity import OrderViolationSimilarity
from layers.packed_gru import PackedGRU
from layers.text_vectorizer import TextVectorizer
from models import registry
from models.base import RetrievalModel, VocabularyConfig

HINGE_LOSSES = {"sum": SumOfHinges, "max": MaxOfHinges}
SIMILARITIES = {"cosine": CosineSimilarity, "order": OrderViolationSimilarity}
IMAGE_INPUTS = {
    "raw": keras_layers.Identity,
    "unit": keras_layers.UnitNormalization,
    "fne": FullNetworkEmbedding,
}


@dataclasses.dataclass
class VSEConfig(VocabularyConfig):
    """Hyperparameters of the GRU VSE model (VSE++ defaults).

    Image features (a deliberate deviation, as for every model of the zoo):
    the embedded data is the 1280-d head of EfficientNet-Lite0 (ImageNet
    weights, image and mirror averaged; `data/f8k_precomp/README.md`);
    VSE++ used VGG19 fc7 and ResNet-152 features (1 or 10 crops), so its
    numbers are not expected here.

    Attributes:
      word_dim: word embedding size (300).
      embed_dim: GRU state and joint space size (1024).
      margin: hinge margin (0.2).
      hinge: "max" keeps the hardest negative (VSE++, Francis et al. eqs.
        11-13; Vilalta et al. eq. 4), "sum" sums over all negatives (Kiros
        et al., VSE0; Vilalta et al. eq. 1); "sum-max" trains in two phases,
        the sum, then from its best weights the max (Vilalta et al. Sec.
        3.5's curriculum; see `TrainConfig.phase_patience`).
      loss_reduction: "sum" over the batch (VSE++ code) or "mean"
        (Francis et al. eqs. 11-12 divide by the batch size).
      tokenizer: "treebank" (NLTK's rules, as VSE++) or "alnum"
        (`data.tokenizer.TOKENIZERS`).
      vocab_min_count: keep training words seen at least this often (VSE++
        builds its vocabulary with threshold 4).
      vocab_max_size: keep at most this many words (None = no limit).
      max_length: cut captions to this many tokens (None = no cut).
      word_vectors: initialise the word embedding from this file (word2vec
        binary or text, GloVe, a bigfile folder), "word2vec" to train
        word2vec on the training captions first, or None for random
        initialisation (VSE++).
      similarity: "cosine" (Kiros et al., VSE++) or "order", the
        order-violation similarity of Vendrov et al. (Vilalta et al. eq. 3).
      absolute: take the absolute value of both unit embeddings, keeping
        them in the positive orthant for order embeddings (Vendrov et al.;
        VSE++'s `use_abs`).
      image_bias: an affine image map (Kiros et al., VSE++, Francis et al.)
        or a linear one (Vendrov et al., Vilalta et al. Sec. 3.2).
      image_input: what the image map reads: "raw" features (VSE++),
        "unit" L2-normalised features (Vilalta et al.'s fc7 baselines),
        or "fne", the Full-Network Embedding of raw per-layer features
        (standardised with training statistics and discretised; feed it
        `data.image_features=stages`).
    """

    word_dim: int = 300
    embed_dim: int = setting(1024, minimum=1)
    margin: float = setting(0.2, minimum=0)
    hinge: str = "max"
    loss_reduction: str = setting("sum", choices=("sum", "mean"))
    tokenizer: str = "treebank"
    vocab_min_count: int = 4
    vocab_max_size: int | None = None
    max_length: int | None = setting(None, minimum=1)
    word_vectors: str | None = None
    similarity: str = setting("cosine", choices=SIMILARITIES)
    absolute: bool = False
    image_bias: bool = True
    image_input: str = setting("raw", choices=IMAGE_INPUTS)

    def __post_init__(self):
        if not all(phase in HINGE_LOSSES for phase in self.hinge.split("-")):
            raise ValueError(f"hinge must be 'sum', 'max' or phases such as 'sum-max', got {self.hinge!r}")


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


registry.register(
    registry.ModelSpec(
        name="gru",
        config_class=VSEConfig,
        build=VSEModel,
        # VSE++: Adam 2e-4, batch 128, gradient norm clipped at 2, 30 epochs,
        # learning rate divided by 10 after 15.
        train=TrainConfig(
            optimizer="adam",
            learning_rate=2e-4,
            batch_size=128,
            epochs=30,
            lr_decay_epochs=(15,),
            lr_decay_factor=0.1,
            grad_clip_norm=2.0,
        ),
        presets={
            # Sized for a 2-core CPU (about 6-7 minutes): the sum of hinges
            # learns fastest in the first epochs (VSE++ Sec. 3.3), and
            # batches of similar caption length (1.08-1.15x faster here,
            # where the GRU skips padding anyway; VSE++ does not bucket).
            "quick": {
                "model.hinge": "sum",
                "train.epochs": 4,
                "train.bucket_by_length": True,
            },
        },
    )
)
