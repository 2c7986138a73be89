"""The GRU VSE model's settings (`models.vse`): its config class and the
`gru` registration with its presets, without TensorFlow, so a command's
flags are checked before TensorFlow loads (`models.registry`)."""

import dataclasses

from common.config import TrainConfig, setting
from models import registry
from models.base_config import VocabularyConfig

# The hinge losses, similarities and image inputs a config names (the
# layers of each are `models.vse`'s).
HINGE_NAMES = ("sum", "max")
SIMILARITY_NAMES = ("cosine", "order")
IMAGE_INPUT_NAMES = ("raw", "unit", "fne")


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
    similarity: str = setting("cosine", choices=SIMILARITY_NAMES)
    absolute: bool = False
    image_bias: bool = True
    image_input: str = setting("raw", choices=IMAGE_INPUT_NAMES)

    def __post_init__(self):
        if not all(phase in HINGE_NAMES for phase in self.hinge.split("-")):
            raise ValueError(f"hinge must be 'sum', 'max' or phases such as 'sum-max', got {self.hinge!r}")


registry.register(
    registry.ModelSpec(
        name="gru",
        config_class=VSEConfig,
        build=registry.deferred("models.vse:VSEModel"),
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
