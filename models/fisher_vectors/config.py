"""The Fisher-vector models' config class, without TensorFlow (their
registrations, `models.fisher_vectors`, need it before TensorFlow loads:
`models.registry`)."""

import dataclasses

from common.config import setting
from models.base_config import ModelConfig

# Sentence encodings and the mixtures they need (Table 1's rows).
ENCODINGS = {"mean": (), "gmm": ("gaussian",), "lmm": ("laplacian",), "hglmm": ("hybrid",),
             "gmm-hglmm": ("gaussian", "hybrid")}


@dataclasses.dataclass
class FVConfig(ModelConfig):
    """Hyperparameters of the Fisher-vector models (Klein et al. 2015).

    Image features (a deliberate deviation): the embedded 1280-d head of
    EfficientNet-Lite0 (image and mirror averaged); the paper encodes
    images with VGG (4096-d, images resized to 221 x 221; VGG-19's fc7
    before its ReLU in the authors' code).

    Attributes:
      encoding: "mean", "gmm", "lmm", "hglmm" or "gmm-hglmm" (Table 1).
      word_vectors: the word vector file (the paper: word2vec GoogleNews
        300-d, which cannot ship; required).
      word_dim: its vector size.
      max_vector_words: the first this many words of the file form the
        vocabulary (None = all).
      ica: apply ICA to the word vectors (the paper: in every experiment).
      ica_sample: ICA and the mixtures are fitted on at most this many
        vocabulary vectors, a seeded sample (300,000, the authors' code).
      num_components: K (30).
      em_iterations: EM iterations of the LMM and HGLMM (10; the GMM runs
        at most 100 to scikit-learn's convergence test).
      cca_etas: the ridge values tried on dev.
      cca_weight_power: scale CCA dimensions by r**power (1; 0 = none).
      tokenizer: "treebank" (lowercases; punctuation is dropped after).
      (The vocabulary is the vector file's: no frequency threshold.)
    """

    encoding: str = setting("hglmm", choices=ENCODINGS)
    word_vectors: str | None = None
    word_dim: int = 300
    max_vector_words: int | None = setting(None, minimum=1)
    ica: bool = True
    ica_sample: int = setting(300_000, minimum=2)
    num_components: int = setting(30, minimum=1)
    em_iterations: int = setting(10, minimum=1)
    cca_etas: tuple[float, ...] = setting((1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1), minimum=0)
    cca_weight_power: float = setting(1.0, minimum=0)
    tokenizer: str = "treebank"

    def __post_init__(self):
        if not self.cca_etas:
            raise ValueError("cca_etas must list at least one ridge")
