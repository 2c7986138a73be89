"""Fisher vectors of word vectors + regularised CCA (Klein, Lev, Sadeh,
Wolf, "Associating Neural Word Embeddings with Deep Image Representations
using Fisher Vectors", CVPR 2015): the closed-form fitting parts. This
package's module registers the models without TensorFlow (their config,
`config`, too); the model is `model`'s (`models.registry`)."""

from common.config import TrainConfig
from data.embedded import EMBEDDED_GLOVE_50D
from models import registry
from models.fisher_vectors.config import ENCODINGS, FVConfig

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
            build=registry.deferred("models.fisher_vectors.model:FisherVectorModel"),
            train=FITTED,
            vocabulary=registry.deferred("models.fisher_vectors.model:fv_vocabulary"),
            presets={"paper": {"model.encoding": _encoding}, "quick": {"model.encoding": _encoding, **QUICK}},
        )
    )
