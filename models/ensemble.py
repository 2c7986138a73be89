"""A zoo ensemble: trained models of any families combined into one
retrieval model.

    python train.py --model ensemble --model-dir runs/ens \\
        --set model.members=runs/fv-gmm-hglmm-quick,runs/gru-quick,runs/poe-fne-quick,runs/w2vv-quick

Each member is a run directory written by train.py, of any family; members
may read different image features of the same images (one CNN layer's
`ims`, the Full-Network Embedding's per-layer `stages`). The ensemble reads
the features of every kind its members read, side by side (`data.image_features`
"ims+stages": its image input is their concatenation, in that order), and
gives each member its own columns. Its score of an image and a caption is

    s(i, t) = sum_m w_m f_m(s_m(i, t))

where s_m is member m's own similarity and f_m makes the members' scores
comparable (`model.combination`):

- "zscore" (default): (s - mu_m) / sigma_m, with the mean and standard
  deviation of s_m over every (image, caption) pair of the dev split
  (global standardisation);
- "rank": the fraction of the dev pairs that m scores below s (the
  empirical distribution function of its dev scores, from `quantiles`
  quantiles, linear between them and beyond the outermost two, so a
  member's order of its scores is kept everywhere): a rank-based
  combination;
- "sum": s_m itself, the raw scores (m-CNN's ensemble, "summing the
  matching scores"; `mcnn-ens` is this combination with unit weights).

The weights are `model.weights` when given (fixed; e.g. equal), else chosen
on the dev split: every point of the grid over the simplex with step
`weight_step` (4 members, step 0.1: 286 points), the one of the highest dev
rsum (`common.metrics.recall_sum`), ties going to the point nearest equal
weights. A grid, not a fit: rsum is a step function of the weights, without
a gradient to follow; for a few members the grid is cheap (each point is a
weighted sum and two counting passes over the dev matrix), exhaustive, and
holds every member alone and every subset, so the choice is never worse on
dev than the best member. The test split is never seen by the fit. What
was chosen (and every member's own dev rsum) is written to results.json's
"fit".

Why not reciprocal-rank fusion, sum_m 1 / (k + rank_m): its ranks are a
query's own ranking of every candidate, so it needs all candidates of a
query at once and gives a different fused score to a pair in each
direction (an image's ranking of captions, a caption's ranking of images):
it is not a similarity of a pair, and so neither one `score` of a
SavedModel nor scorable block by block. "rank" is the rank-based
combination that is a function of the pair: ranks against the member's dev
scores.

The encodings of the ensemble are its members' encodings side by side;
`similarity` of them is the combined score. They have no space of their
own (`joint_space` False): they are for scoring a collection encoded once
(`similarity`), not for comparing two captions. The run directory refers to
its members' directories (their config.json and vocab.json, read once a
process into `models.members.TrainedRun`s, rebuild the members through
`models.composite`, the two-stage model's build path too); its checkpoint
and its SavedModel hold every weight, so the SavedModel stands alone.

The config class (`EnsembleConfig`) and the registration are in
`models/ensemble_config.py`, which imports no TensorFlow (`models.registry`).
"""

import itertools
import math
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from common import metrics, progress
from common.errors import InputError
from common.records import portable_path
from models.base import Fit, FittedModel
from models.composite import build_parts, encoding_widths, restore_parts
from models.ensemble_config import divides_one

# The grid search refuses grids larger than this (many members, a fine step).
MAX_GRID_POINTS = 20_000
BATCH = 256
IMAGE_BLOCK = 128  # dev images scored at a time, against every dev caption


class Ensemble(FittedModel):
    """The trained members of `config.members` combined (see the module
    docstring): their `models` (built by `models.composite.build_parts`,
    with untrained weights) and `parts` (`models.composite.Part`s);
    `fit_split` loads the members' best weights and chooses the
    combination's statistics and weights on dev."""

    joint_space = False

    def __init__(self, config, models, parts, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.parts = parts
        # Raw captions go to every member, which tokenises them itself.
        self.vectorizer = keras.layers.Identity()
        for index, model in enumerate(models):
            # An attribute each (a list's layers would not be in the checkpoint).
            setattr(self, f"member_{index}", model)
        count = len(models)
        self.center = self.add_weight(shape=(count,), initializer="zeros", trainable=False, name="center")
        self.scale = self.add_weight(shape=(count,), initializer="ones", trainable=False, name="scale")
        self.member_weights = self.add_weight(shape=(count,), initializer="ones", trainable=False, name="member_weights")
        if config.combination == "rank":
            self.score_quantiles = self.add_weight(shape=(count, config.quantiles), initializer="zeros",
                                                   trainable=False, name="score_quantiles")
        self.image_sizes, self.text_sizes = (list(sizes) for sizes in zip(*map(encoding_widths, models)))

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        """The member weights are saved under `mix`, their name before the
        rename, so that runs trained before it restore."""
        children = super()._trackable_children(save_type, **kwargs)
        children["mix"] = children.pop("member_weights")
        return children

    @property
    def members(self):
        """The member models, in the order of `config.members`."""
        return [getattr(self, f"member_{index}") for index in range(len(self.parts))]

    def encode_text(self, texts, training=False):
        """tf.string [B] raw captions -> every member's encoding, side by side."""
        return tf.concat([m.encode_text(m.vectorizer(texts)) for m in self.members], axis=-1)

    def encode_image(self, image_features, training=False):
        """[B, F] (every kind of features the members read, side by side) ->
        every member's encoding of its own columns, side by side."""
        return tf.concat([m.encode_image(image_features[:, slice(*part.columns)])
                          for m, part in zip(self.members, self.parts)], axis=-1)

    def run_encoding_columns(self, directory):
        """A member's columns of the ensemble's encodings (the members' side by side, in order)."""
        for index, part in enumerate(self.parts):
            if Path(part.run.directory).resolve() == Path(directory).resolve():
                return tuple((sum(sizes[:index]), sum(sizes[: index + 1])) for sizes in (self.image_sizes, self.text_sizes))
        return None

    def member_similarities(self, image_encodings, text_encodings):
        """Each member's own similarity [n_images, n_texts] of its part of
        the encodings."""
        images = tf.split(image_encodings, self.image_sizes, axis=-1)
        texts = tf.split(text_encodings, self.text_sizes, axis=-1)
        return [tf.cast(m.similarity(i, t), tf.float32) for m, i, t in zip(self.members, images, texts)]

    def comparable_scores(self, index, scores):
        """f_m of the module docstring: member `index`'s scores made
        comparable with the other members' (by `config.combination`)."""
        if self.config.combination == "sum":
            return scores
        if self.config.combination == "zscore":
            return (scores - self.center[index]) / self.scale[index]
        return quantile_rank(scores, self.score_quantiles[index])

    def similarity(self, image_encodings, text_encodings):
        scores = self.member_similarities(image_encodings, text_encodings)
        return tf.add_n([self.member_weights[m] * self.comparable_scores(m, s) for m, s in enumerate(scores)])

    def pair_similarity(self, image_encodings, text_encodings):
        """The combined score of aligned pairs [P, ...] x [P, ...] -> [P],
        from each member's `pair_similarity`."""
        images = tf.split(image_encodings, self.image_sizes, axis=-1)
        texts = tf.split(text_encodings, self.text_sizes, axis=-1)
        return tf.add_n([self.member_weights[m] * self.comparable_scores(m, tf.cast(member.pair_similarity(i, t), tf.float32))
                         for m, (member, i, t) in enumerate(zip(self.members, images, texts))])

    def fit_split(self, train_split, dev_split, writer, seed):
        """Loads each member's best weights from its run directory, then
        fits the combination's statistics and (unless fixed) weights on
        `dev_split`; the training split is not used. Returns a `Fit` with
        the fitted ensemble's dev scores."""
        restore_parts(self.members, self.parts)
        images, texts = self._encode(dev_split)
        blocks = [self.member_similarities(images[a : a + IMAGE_BLOCK], texts)
                  for a in range(0, len(images), IMAGE_BLOCK)]
        member_scores = [np.concatenate([block[m].numpy() for block in blocks]) for m in range(len(blocks[0]))]
        for index, (part, scores) in enumerate(zip(self.parts, member_scores)):
            self._fit_statistics(index, part.run.directory, scores)
        comparable = [self.comparable_scores(m, tf.constant(s)).numpy() for m, s in enumerate(member_scores)]
        own = [round(metrics.recall_sum(s, dev_split.caption_image), 2) for s in comparable]
        if self.config.weights:
            weights, grid_points = np.asarray(self.config.weights, np.float64), 0
        else:
            weights, grid_points = choose_weights(comparable, dev_split.caption_image, self.config.weight_step)
        self.member_weights.assign(weights.astype(np.float32))
        # The dev scores of the fitted model, in its own float32 arithmetic.
        fused = sum(w * s for w, s in zip(self.member_weights.numpy(), comparable))
        chosen = {
            "combination": self.config.combination,
            "weights": [round(float(w), 6) for w in weights],
            "weights_from": "model.weights" if self.config.weights else f"dev grid, step {self.config.weight_step:g}",
            "grid_points": grid_points,
            "dev_recall_sum": round(metrics.recall_sum(fused, dev_split.caption_image), 2),
            "member_dev_recall_sums": own,
            "members": [portable_path(member) for member in self.config.members],
        }
        return Fit(chosen, dev_scores=fused)

    def _encode(self, split):
        """The ensemble's encodings of a split's images and captions."""
        images = self.encode_image(tf.constant(split.images)).numpy()
        captions = np.asarray(split.captions, dtype=object)
        texts = np.concatenate([self.encode_text(self.vectorizer(tf.constant(captions[a : a + BATCH]))).numpy()
                                for a in progress.bar(range(0, len(captions), BATCH), desc="encoding dev captions",
                                                      unit="batch")])
        return images, texts

    def _fit_statistics(self, index, directory, scores):
        """The dev statistics of member `index`'s `scores` [n_images,
        n_captions]; constant scores are an `InputError` naming the run."""
        mean, deviation = float(np.mean(scores, dtype=np.float64)), float(np.std(scores, dtype=np.float64))
        if not np.isfinite([mean, deviation]).all() or deviation <= 1e-7 * max(1.0, abs(mean)):
            raise InputError(f"{directory}: its scores of the dev split are constant ({mean:.6g}) or not finite, "
                             "so they cannot be combined with the other members'; is the run trained?")
        self.center[index].assign(mean)
        self.scale[index].assign(deviation)
        if self.config.combination == "rank":
            levels = np.linspace(0.0, 1.0, self.config.quantiles)
            self.score_quantiles[index].assign(np.quantile(scores, levels).astype(np.float32))


def quantile_rank(scores, quantiles):
    """The empirical distribution function given by sorted `quantiles` (at
    equally spaced levels 0 .. 1) at `scores`: linear between neighbouring
    quantiles, as `numpy.interp(scores, quantiles, levels)` inside them, and
    continued linearly beyond the outermost two (so larger scores stay
    larger). Equal neighbouring quantiles are stepped over."""
    count = tf.shape(quantiles)[0]
    flat = tf.reshape(scores, [-1])
    upper = tf.clip_by_value(tf.searchsorted(quantiles, flat, side="right"), 1, count - 1)
    low, high = tf.gather(quantiles, upper - 1), tf.gather(quantiles, upper)
    fraction = (flat - low) / tf.maximum(high - low, 1e-12)
    levels = (tf.cast(upper - 1, tf.float32) + fraction) / tf.cast(count - 1, tf.float32)
    return tf.reshape(levels, tf.shape(scores))


def simplex_grid(members, step):
    """Every weight vector of `members` non-negative multiples of `step`
    summing to 1 (float [points, members])."""
    parts = round(1 / step)
    if not divides_one(step):
        raise InputError(f"model.weight_step: 1 / {step:g} is not a whole number; e.g. 0.1, 0.05 or 0.25")
    points = math.comb(parts + members - 1, members - 1)
    if points > MAX_GRID_POINTS:
        raise InputError(f"model.weight_step: {points:,} grid points for {members} members at step {step:g} "
                         f"(at most {MAX_GRID_POINTS:,}); take a larger step or fix model.weights")
    # Stars and bars: the positions of members - 1 bars among parts + members - 1 slots.
    grid = []
    for bars in itertools.combinations(range(parts + members - 1), members - 1):
        edges = (-1, *bars, parts + members - 1)
        grid.append([edges[k + 1] - edges[k] - 1 for k in range(members)])
    return np.asarray(grid, np.float64) / parts


def choose_weights(comparable, caption_image, step):
    """The grid point of the highest dev rsum of `sum_m w_m comparable[m]`,
    ties to the point nearest equal weights; returns (weights, points)."""
    grid = simplex_grid(len(comparable), step)
    stacked = np.stack(comparable)
    sums = [metrics.recall_sum(np.tensordot(w, stacked, axes=1), caption_image)
            for w in progress.bar(grid, desc="dev rsum over the weight grid", unit="point")]
    distance = np.linalg.norm(grid - 1.0 / len(comparable), axis=1)
    best = min(range(len(grid)), key=lambda k: (-sums[k], distance[k]))
    return grid[best], len(grid)


def build(config, members, image_dim):
    """The ensemble of its `members` (`models.members.TrainedRun`s, as
    `models.members.ensemble_members` read them from `config.members`);
    `image_dim` must be the sum of the dimensions of the kinds of features
    they read."""
    return Ensemble(config, *build_parts(members, image_dim))
