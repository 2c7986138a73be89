"""Fisher vectors of word vectors + regularised CCA (Klein, Lev, Sadeh,
Wolf, "Associating Neural Word Embeddings with Deep Image Representations
using Fisher Vectors", CVPR 2015): the closed-form fitting parts."""

from common.config import TrainConfig
from data.embedded import EMBEDDED_GLOVE_50D
from models import registry
from models.fisher_vectors.model import ENCODINGS, FisherVectorModel, FVConfig, fv_vocabulary

# Nothing is trained by gradients; the training settings only seed the fit.
FITTED = TrainConfig(epochs=1)

# The embedded GloVe 6B 50-d vectors of the Flickr8k words for the paper's
# GoogleNews word2vec 300-d (which cannot ship); everything else as the paper.
QUICK = {"model.word_vectors": EMBEDDED_GLOVE_50D, "model.word_dim": 50}

for _encoding in ENCODINGS:
    registry.register(
        registry.ModelSpec(
            name=f"fv-{_encoding}",
            config_class=FVConfig,
            build=FisherVectorModel,
            train=FITTED,
            vocabulary=fv_vocabulary,
            presets={"paper": {"model.encoding": _encoding}, "quick": {"model.encoding": _encoding, **QUICK}},
        )
    )
