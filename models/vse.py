"""Visual-semantic embedding with a GRU sentence encoder.

`gru`: the Kiros et al. / VSE++ baseline, which is also the "GRU" row of
Francis et al. 2018 (Table I: one capsule, no recursion). Text: word
embedding -> GRU -> last valid state -> L2 norm. Image: affine map of the CNN
feature -> L2 norm. Pairs are compared by cosine similarity and trained with
a bidirectional hinge loss (margin 0.2), summed over the negatives or kept
for the hardest negative only.
"""

import dataclasses

import keras
from keras import layers as keras_layers

from config import TrainConfig
from layers.cosine_similarity import CosineSimilarity
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from layers.text_vectorizer import TextVectorizer
from models import registry
from models.base import RetrievalModel

HINGE_LOSSES = {"sum": SumOfHinges, "max": MaxOfHinges}


@dataclasses.dataclass
class VSEConfig:
    """Hyperparameters of the GRU VSE model (VSE++ defaults).

    Attributes:
      word_dim: word embedding size (300).
      embed_dim: GRU state and joint space size (1024).
      margin: hinge margin (0.2).
      hinge: "max" keeps the hardest negative (VSE++, Francis et al. eqs.
        11-13), "sum" sums over all negatives (Kiros et al., VSE0).
      loss_reduction: "sum" over the batch (VSE++ code) or "mean"
        (Francis et al. eqs. 11-12 divide by the batch size).
      vocab_min_count: keep training words seen at least this often (VSE++
        builds its vocabulary with threshold 4).
      vocab_max_size: keep at most this many words (None = no limit).
      max_length: cut captions to this many tokens (None = no cut).
      word_vectors: initialise the word embedding from this file (any format
        gensim's KeyedVectors reads), "word2vec" to train word2vec on the
        training captions first, or None for random initialisation (VSE++).
    """

    word_dim: int = 300
    embed_dim: int = 1024
    margin: float = 0.2
    hinge: str = "max"
    loss_reduction: str = "sum"
    vocab_min_count: int = 4
    vocab_max_size: int | None = None
    max_length: int | None = None
    word_vectors: str | None = None

    def __post_init__(self):
        if self.hinge not in HINGE_LOSSES:
            raise ValueError(f"hinge must be one of {sorted(HINGE_LOSSES)}, got {self.hinge!r}")


class VSEModel(RetrievalModel):
    """GRU sentence encoder and affine image encoder in a cosine joint space.

    Args:
      config: a `VSEConfig`.
      vocabulary: token list, `<pad>` = 0 and `<unk>` = 1.
    """

    def __init__(self, config, vocabulary, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.vectorizer = TextVectorizer(vocabulary, max_length=config.max_length)
        # VSE++ initialises word embeddings uniformly in [-0.1, 0.1].
        self.word_embedding = keras_layers.Embedding(
            len(vocabulary),
            config.word_dim,
            embeddings_initializer=keras.initializers.RandomUniform(-0.1, 0.1),
            mask_zero=True,
        )
        self.sentence_encoder = self.make_sentence_encoder(config)
        self.image_projection = keras_layers.Dense(config.embed_dim)
        self.text_norm = keras_layers.UnitNormalization()
        self.image_norm = keras_layers.UnitNormalization()
        self.cosine = CosineSimilarity()
        self.hinge = HINGE_LOSSES[config.hinge](
            margin=config.margin, reduction=config.loss_reduction
        )

    def make_sentence_encoder(self, config):
        """The layer reading word vectors [B, L, word_dim] and a mask [B, L]
        into sentence embeddings [B, embed_dim]: here one GRU (Keras'
        cuDNN-compatible variant, as VSE++'s PyTorch GRU)."""
        return keras_layers.GRU(config.embed_dim)

    def encode_text(self, token_ids, training=False):
        words = self.word_embedding(token_ids)
        # The encoder carries its state over padded steps, so its output is
        # the state after the last real word.
        state = self.sentence_encoder(words, mask=token_ids != 0, training=training)
        return self.text_norm(state)

    def encode_image(self, image_features, training=False):
        return self.image_norm(self.image_projection(image_features))

    def similarity(self, image_encodings, text_encodings):
        return self.cosine(image_encodings, text_encodings)

    def pair_loss(self, image_encodings, text_encodings, image_index):
        return self.hinge(self.similarity(image_encodings, text_encodings), image_index)


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
            # Sized for a 2-core CPU (about 11 minutes): the sum of hinges
            # learns fastest in the first epochs (VSE++ Sec. 3.3), and
            # batches of similar caption length cut the GRU's padded steps
            # (1.7x faster here; VSE++ does not bucket).
            "quick": {
                "model.hinge": "sum",
                "train.epochs": 4,
                "train.bucket_by_length": True,
            },
        },
    )
)
