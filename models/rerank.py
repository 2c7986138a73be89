"""Two-stage retrieval: a trained joint-space run proposes, any trained run
re-ranks.

    python train.py --model rerank --model-dir runs/rerank-fv-ens \\
        --set model.members=runs/fv-gmm-hglmm-quick,runs/ens-all-quick

`model.members` is two run directories written by train.py: the first
stage, a model whose images and captions meet in one space and whose score
is a similarity of their encodings (`joint_space`: `gru`, RCN, the FNE
pipelines, `w2vv`, `fv-*`), and the second stage, any run (an ensemble and
`mcnn-ens` included). A query (an image in image annotation, a caption in
image retrieval) is ranked in two stages (`common.reranking`):

- the first stage scores every candidate; its ranking is by descending
  score, equal scores in index order; the query's list is its first `k`
  candidates (in both directions the same `k`: the captions proposed for
  an image, the images proposed for a caption);
- the second stage scores only the listed pairs; the list is ranked by
  them, equal second-stage scores in the order `common.metrics` gives equal
  scores of any matrix (so a list of every candidate is ranked exactly as
  the second stage alone ranks); every unlisted candidate (the tail) comes
  after the whole list, in the first stage's ranking.

So a pair outside a query's list is below every re-ranked pair of that
query, and the standard metrics are those of this ranking
(`engine.evaluation.rank_two_stage`, which also reports the first stage's
recall@k of each direction: the ceiling of a re-ranker). The two-stage
score of a pair depends on the query's other candidates (its list), so it
is no similarity of a pair alone: the model's `similarity` is the second
stage's, the score a pair gets once re-ranked.

The model's encodings are its stages' side by side (`stage_encodings`
splits them), with one exception: when the second stage holds the first
stage's run as a part (an ensemble with it as a member,
`RetrievalModel.run_encoding_columns`), the first stage's encodings are
that part's columns of the second stage's, so no caption is encoded twice
by one run. The fit checks that the part is the first stage's run as its
best checkpoint holds it (an `InputError` if that run has been trained
again since the ensemble was fitted).

`k` is `model.k` when given, else chosen on the dev split: the smallest k
of `model.k_grid` whose dev rsum is within `model.k_margin` of the full
re-ranking's (the second stage alone, every pair scored); if none is, every
candidate (k = the larger of the dev images and captions). The test split
takes no part in the choice; results.json's "fit" records it with the dev
rsum at every k of the grid. `evaluate.py --set model.k=K` evaluates a run
at another k without refitting.

The config class (`RerankConfig`) and the registration are in
`models/rerank_config.py`, which imports no TensorFlow (`models.registry`).
"""

import keras
import numpy as np
import tensorflow as tf

from common import metrics, reranking
from common.errors import InputError
from common.records import portable_path
from models.base import Fit, FittedModel, Stage
from models.composite import build_parts, encoding_widths, restore_parts

# Dev images scored at a time, against every dev caption, by either stage in the fit.
IMAGE_BLOCK = 128


class Rerank(FittedModel):
    """A first stage proposing and a second stage re-ranking (the module
    docstring): their `models` (built by `models.composite.build_parts`,
    with untrained weights) and `parts` (`models.composite.Part`s);
    `fit_split` loads their best weights and chooses `k` on dev."""

    joint_space = False

    def __init__(self, config, models, parts, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.parts = parts
        # Raw captions go to both stages, which tokenise them themselves.
        self.vectorizer = keras.layers.Identity()
        self.first_stage, self.second_stage = models
        first = parts[0].run
        if not self.first_stage.joint_space:
            raise InputError(
                f"{first.directory}/config.json: a {first.experiment.model_name!r} run cannot be the first "
                "stage: its image and caption encodings meet in no space of their own (joint_space is false); "
                "take a joint-space run (gru, rcn, an FNE pipeline, w2vv, fv-*)")
        # The k chosen on dev (0 until fitted); `config.k`, when set, wins.
        self.list_length = self.add_weight(shape=(), dtype="int32", initializer="zeros", trainable=False,
                                           name="list_length")
        image_sizes, text_sizes = zip(*map(encoding_widths, models))
        # Each stage's (image, text) columns of the model's encodings (the module docstring), and the stages that
        # encode (indices into _stages).
        shared = self.second_stage.run_encoding_columns(first.directory)
        self.shares_encodings = shared is not None
        if self.shares_encodings:
            self.encoding_columns = (shared, ((0, image_sizes[1]), (0, text_sizes[1])))
            self.encoding_stages = (1,)
        else:
            self.encoding_columns = (((0, image_sizes[0]), (0, text_sizes[0])),
                                     ((image_sizes[0], sum(image_sizes)), (text_sizes[0], sum(text_sizes))))
            self.encoding_stages = (0, 1)

    @property
    def rerank_k(self):
        return self.config.k if self.config.k is not None else int(self.list_length.numpy())

    def encode_text(self, texts, training=False):
        """tf.string [B] raw captions -> the encoding stages' encodings, side by side."""
        return tf.concat([self._stages[i].encode_text(self._stages[i].vectorizer(texts)) for i in self.encoding_stages],
                         axis=-1)

    def encode_image(self, image_features, training=False):
        """[B, F] (the features both stages read, side by side) -> the
        encoding stages' encodings of their own columns, side by side."""
        return tf.concat([self._stages[i].encode_image(image_features[:, slice(*self.parts[i].columns)])
                          for i in self.encoding_stages], axis=-1)

    @property
    def _stages(self):
        return self.first_stage, self.second_stage

    def stages(self):
        return tuple(Stage(stage, part.columns) for stage, part in zip(self._stages, self.parts))

    def stage_encodings(self, image_encodings, text_encodings):
        return tuple((image_encodings[:, slice(*image)], text_encodings[:, slice(*text)])
                     for image, text in self.encoding_columns)

    def similarity(self, image_encodings, text_encodings):
        """The second stage's scores of every pair: a listed pair's score."""
        return tf.cast(self.second_stage.similarity(*self.stage_encodings(image_encodings, text_encodings)[1]),
                       tf.float32)

    def fit_split(self, train_split, dev_split, writer, seed):
        """Loads both stages' best weights (their records' checkpoints),
        then chooses `k` on `dev_split` unless `config.k` is set; the
        training split is not used. Scores every dev pair by both stages
        (the full re-ranking is the reference of the choice). Its `Fit`
        holds no dev scores: a two-stage ranking is not one matrix, and the
        trainer's validation scores only the second stage's listed pairs."""
        restore_parts(self._stages, self.parts)
        images = self.encode_image(tf.constant(dev_split.images))
        texts = tf.concat([self.encode_text(tf.constant(np.asarray(dev_split.captions[a : a + 256], dtype=object)))
                           for a in range(0, len(dev_split.captions), 256)], axis=0)
        parts = self.stage_encodings(images, texts)
        if self.shares_encodings:
            self._check_shared_encodings(dev_split, *parts[0])
        first, second = (np.concatenate([tf.cast(stage.similarity(stage_images[a : a + IMAGE_BLOCK], stage_texts),
                                                 tf.float32).numpy()
                                         for a in range(0, len(dev_split.images), IMAGE_BLOCK)])
                         for stage, (stage_images, stage_texts) in zip(self._stages, parts))
        caption_image = dev_split.caption_image
        full = metrics.retrieval_metrics(second, caption_image)["rsum"]
        every = max(first.shape)
        by_k = {k: reranking.two_stage_metrics(first, second, caption_image, k) for k in sorted(set(self.config.k_grid))}
        within = [k for k, result in by_k.items() if result["rsum"] >= full - self.config.k_margin]
        chosen = self.config.k if self.config.k is not None else (within[0] if within else every)
        self.list_length.assign(chosen)
        return Fit({
            "k": chosen,
            "k_from": ("model.k" if self.config.k is not None else
                       f"dev: the smallest k of the grid within {self.config.k_margin:g} rsum of the full re-ranking"
                       + ("" if within else "; none is, so every candidate")),
            "dev_recall_sum": round(reranking.two_stage_metrics(first, second, caption_image, chosen)["rsum"], 2),
            "dev_recall_sum_full_rerank": round(full, 2),
            "dev_recall_sum_first_stage": round(metrics.retrieval_metrics(first, caption_image)["rsum"], 2),
            "dev_recall_sum_by_k": {str(k): round(result["rsum"], 2) for k, result in by_k.items()},
            "dev_list_recall_by_k": {str(k): [round(result["i2t_list_recall"], 2), round(result["t2i_list_recall"], 2)]
                                     for k, result in by_k.items()},
            "members": [portable_path(member) for member in self.config.members],
        })

    def _check_shared_encodings(self, dev_split, images, texts, sample=256):
        """`InputError` unless the first stage's own encodings of dev
        images and captions (a sample of each) are the second stage's
        columns that stand for them."""
        first, part = self.first_stage, self.parts[0]
        own = (first.encode_image(tf.constant(dev_split.images[:sample, slice(*part.columns)])),
               first.encode_text(first.vectorizer(tf.constant(np.asarray(dev_split.captions[:sample], dtype=object)))))
        for mine, theirs in zip(own, (images[:sample], texts[:sample])):
            mine, theirs = np.asarray(mine, np.float32), np.asarray(theirs, np.float32)
            if not np.abs(mine - theirs).max() <= 1e-4 * max(np.abs(mine).max(), 1e-6):
                raise InputError(f"model.members: {self.config.members[1]} holds {part.run.directory} with other "
                                 f"weights than {part.run.directory}'s best checkpoint (trained again since?); fit "
                                 f"{self.config.members[1]} again, or take a first stage it does not hold")


def build(config, stages, image_dim):
    """The two-stage model of its `stages` (`models.members.TrainedRun`s,
    as `models.members.rerank_stages` read them from `config.members`);
    `image_dim` must be the sum of the dimensions of the kinds of features
    they read."""
    return Rerank(config, *build_parts(stages, image_dim))
