"""Fisher vectors of word vectors + regularised CCA (Klein et al. 2015),
fitted in closed form.

    caption -> words with a vector -> unit L2 -> ICA (D -> D) -> unit L2
            -> Mean Vec, or the Fisher vector under a K = 30 GMM, LMM or
               HGLMM (Secs. 3-4), power + L2 normalised (Sec. 5)
    (sentence, image) training pairs -> regularised CCA (eta on dev)
    score   = cos(r * W_x^T (s - mu_x), r * W_y^T (y - mu_y))

Registered rows of Table 1 (`encoding`): `fv-mean` (Mean Vec), `fv-gmm`,
`fv-lmm`, `fv-hglmm` and `fv-gmm-hglmm` (the two Fisher vectors, each
normalised, concatenated).

No gradient descent: `fit_split` fits ICA and the mixtures on the word
vectors (one per vocabulary word, no captions: the paper's "unsupervised
... on the corpus of word2vec vectors"), encodes the training captions,
fits the CCA and chooses its ridge on dev rsum. Everything the SavedModel
needs is in non-trainable weights: raw strings in, the in-graph tokenizer,
a table of the preprocessed word vectors, the Fisher vector layer and the
CCA projections.

Readings where the paper is silent, from the authors' released code:
- ICA: FastICA (deflation, cube nonlinearity) fitted on (a seeded sample of
  at most `ica_sample` of) the word vectors, applied without centring,
  keeping the dimension; vectors are unit-normalised before and after.
- Mixtures: K = 30; the GMM by scikit-learn (means drawn from the data, at
  most 100 iterations, variances floored at 1e-5); the LMM (at most 10
  iterations) and HGLMM (10) by `mixtures.fit_mixture`.
- Words without a vector are dropped (not UNK), and so are punctuation and
  "'s" (the authors split them off; GloVe has vectors for them, GoogleNews
  does not). A caption without any known word encodes as zeros.
- CCA: centred, ridge eta * lambda_max per view, all directions, scaled by
  the canonical correlations (`cca_weight_power` 1), cosine; eta from
  `cca_etas` by dev rsum ("selected ... based on the validation data").

Memory at the paper's scale (GoogleNews: 3M words x 300): the word vectors
are never held whole beside the table. `set_word_vectors` keeps where
each vocabulary word's vector is in the vector file (`WordVectors`, which
reads vectors from the file when asked); the fit reads the seeded
sample from it (ICA and the mixtures see the sample only, in float64, as
FastICA and scikit-learn's GMM fit it; the EM holds it in float32, see
`mixtures`), then writes the float32 word table into its weight block by
block (each block read from the file), unit-normalised and ICA-projected
in float64 within a block.
"""

import string
import warnings

import numpy as np
import tensorflow as tf
from keras import ops

from common import metrics, progress
from common.errors import InputError
from data.tokenizer import tokenize_strings
from data.vocabulary import Vocabulary
from layers.canonical_projection import CanonicalProjection
from layers.cosine_similarity import CosineSimilarity
from layers.fisher_vector import FisherVector
from layers.text_vectorizer import TextVectorizer
from models.base import Fit, FittedModel
from models.fisher_vectors import cca, mixtures
from models.fisher_vectors.config import ENCODINGS

DROPPED_TOKENS = ("'s",)
# Vocabulary rows per block of the word table's projection.
TABLE_BLOCK = 8192


def fv_vocabulary(config, train_captions, word_vectors=None):
    """`<pad>`, `<unk>`, then the words of the vector file that the
    tokenizer can produce, without punctuation and "'s"."""
    if word_vectors is None:
        raise InputError("model.word_vectors: the Fisher-vector models need a word vector file "
                         "(the paper: GoogleNews-vectors-negative300.bin)")
    words = list(word_vectors.index_to_key[: config.max_vector_words])
    keep = [
        word for word, tokens in zip(words, tokenize_strings(words, config.tokenizer))
        if tokens == [word] and word not in DROPPED_TOKENS and not all(c in string.punctuation for c in word)
    ]
    return Vocabulary(["<pad>", "<unk>", *keep])


class FisherVectorModel(FittedModel):
    """Sentence encoding + CCA, fitted by `fit_split`."""

    def __init__(self, config, vocabulary, image_dim, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.vectorizer = TextVectorizer(vocabulary.tokens, tokenizer=config.tokenizer)
        self.word_table = self.add_weight(
            name="word_table", shape=(len(vocabulary), config.word_dim), trainable=False, initializer="zeros"
        )
        policies = ENCODINGS[config.encoding]
        for i, _ in enumerate(policies):
            setattr(self, f"fisher_vector_{i}", FisherVector(config.num_components, config.word_dim, name=f"fv{i}"))
        self.policies = policies
        self.sentence_dim = len(policies) * 2 * config.num_components * config.word_dim or config.word_dim
        canonical_dim = min(self.sentence_dim, image_dim)
        self.text_projection = CanonicalProjection(self.sentence_dim, canonical_dim, config.cca_weight_power,
                                                   name="text_cca")
        self.image_projection = CanonicalProjection(image_dim, canonical_dim, config.cca_weight_power, name="image_cca")
        self.similarity_layer = CosineSimilarity()
        self._word_vectors = None

    def sentence_vector(self, token_ids):
        """Mean Vec (unit) or the (concatenated) Fisher vector(s): [B, S]."""
        mask = token_ids > 1  # padding, and words without a vector, are dropped
        words = ops.take(self.word_table, token_ids, axis=0)
        if not self.policies:
            mean = ops.sum(words * ops.cast(mask, "float32")[..., None], axis=1)
            return mean / ops.maximum(ops.norm(mean, axis=-1, keepdims=True), 1e-12)
        return ops.concatenate(
            [getattr(self, f"fisher_vector_{i}")(words, mask) for i in range(len(self.policies))], axis=-1
        )

    def encode_text(self, token_ids, training=False):
        return self.text_projection(self.sentence_vector(token_ids))

    def encode_image(self, image_features, training=False):
        return self.image_projection(ops.cast(image_features, "float32"))

    def similarity(self, image_encodings, text_encodings):
        return self.similarity_layer(image_encodings, text_encodings)

    def pair_similarity(self, image_encodings, text_encodings):
        return self.similarity_layer.pairs(image_encodings, text_encodings)

    def set_word_vectors(self, vectors, seed):
        from data import word_vectors  # gensim is slow to import; only here.

        rows = word_vectors.vector_rows(vectors, self.vectorizer.vocabulary, self.config.word_dim)
        self._word_vectors = (vectors, rows)  # read by the fit, a block at a time
        return f"{int(np.sum(rows >= 0))} of {len(rows)} vocabulary words have a vector"

    def fit_split(self, train_split, dev_split, writer, seed=0):
        """ICA and mixtures on the word vectors, CCA on the training pairs,
        its ridge by dev rsum; returns a `Fit` with the chosen ridge's dev
        scores."""
        sample = self.fit_word_table(seed)
        summary = self.fit_mixtures(sample, seed, writer)
        empty = 0

        def training_pairs():  # streamed: the paper's sentence vectors of every caption would not fit
            nonlocal empty
            for rows, sentences in self.sentence_blocks(train_split.captions):
                empty += int(np.sum(~sentences.any(axis=1)))
                yield sentences, train_split.images[train_split.caption_image[rows]]

        solver = cca.RegularisedCCA.from_blocks(training_pairs())
        dev_sentences = self.sentence_vectors(dev_split.captions)
        best = None
        etas = self.config.cca_etas
        for step, eta in progress.bar(enumerate(etas), total=len(etas), desc="CCA ridge by dev rsum", unit="eta"):
            projection = solver.solve(eta)
            power = self.config.cca_weight_power
            text = _unit(projection.project_x(dev_sentences, power))
            image = _unit(projection.project_y(dev_split.images, power))
            scores = image @ text.T
            rsum = metrics.retrieval_metrics(scores, dev_split.caption_image)["rsum"]
            with writer.as_default(step=step):
                tf.summary.scalar("cca/eta", eta)
                tf.summary.scalar("cca/dev_rsum", rsum)
            if best is None or rsum > best[0]:
                best = (rsum, projection, scores)
        rsum, projection, scores = best
        self.text_projection.set_projection(projection.mean_x, projection.w_x, projection.correlations)
        self.image_projection.set_projection(projection.mean_y, projection.w_y, projection.correlations)
        summary.update(cca_eta=float(projection.eta), cca_dev_rsum=float(rsum), training_captions_without_known_word=empty)
        return Fit(summary, dev_scores=scores)

    def fit_word_table(self, seed):
        """Fits ICA on a seeded sample of the vocabulary's vectors (at most
        `ica_sample`) and writes the word table: every vector unit, ICA
        projected, unit. Returns the sample so projected, float64 [n, D]."""
        if self._word_vectors is None:
            raise InputError("model.word_vectors: no word vectors were set before fitting")
        vectors, rows = self._word_vectors
        self._word_vectors = None  # the vector file's words can go once the table is written
        found = np.flatnonzero(rows >= 0)
        picked = found[np.random.default_rng(seed).permutation(len(found))[: self.config.ica_sample]]
        raw_sample = vectors.take(rows[picked])
        unmixing = None
        if self.config.ica:
            from sklearn.decomposition import FastICA

            ica = FastICA(algorithm="deflation", fun="cube", whiten="unit-variance", random_state=seed, max_iter=1000)
            unmixing = ica.fit(_unit(raw_sample.astype(np.float64))).components_
        # The table's weight, written in place block by block (assigning it
        # whole would hold two more copies of it).
        table = self.word_table.value
        for start in range(0, len(rows), TABLE_BLOCK):
            block_rows = rows[start : start + TABLE_BLOCK]
            block = np.zeros((len(block_rows), self.config.word_dim), np.float32)
            has_vector = block_rows >= 0
            block[has_vector] = _projected(vectors.take(block_rows[has_vector]), unmixing)
            table.scatter_update(tf.IndexedSlices(block, tf.range(start, start + len(block_rows))))
        # Sparse writes leave a variable copying itself whole at every read
        # (TensorFlow's copy-on-read mode); a read without a copy ends that.
        table.read_value_no_copy()
        return _projected(raw_sample, unmixing)

    def fit_mixtures(self, sample, seed, writer):
        """Fits the encoding's mixture(s) on `sample` and sets them; returns
        what the fit chose."""
        summary = {}
        for i, policy in enumerate(self.policies):
            mixture = _fit_mixture(sample, self.config, policy, seed, writer, f"em/{policy}_log_likelihood_per_word")
            getattr(self, f"fisher_vector_{i}").set_mixture(mixture)
            if policy == "hybrid":
                summary["hglmm_laplacian_fraction"] = float(mixture.laplacian.mean())
        return summary

    def sentence_blocks(self, captions, batch_size=256):
        """Yields (rows, their sentence vectors float32 [n, S]) over
        `captions` (raw strings), a batch at a time."""
        encode = tf.function(lambda texts: self.sentence_vector(self.vectorizer(texts)),
                             input_signature=[tf.TensorSpec([None], tf.string)])  # one trace for every batch
        for start in progress.bar(range(0, len(captions), batch_size), desc="Fisher vectors of captions", unit="batch"):
            rows = slice(start, start + batch_size)
            yield rows, encode(tf.constant(captions[rows])).numpy()

    def sentence_vectors(self, captions):
        """The sentence vectors of `captions` (raw strings), float32 [N, S]."""
        result = np.empty((len(captions), self.sentence_dim), np.float32)
        for rows, sentences in self.sentence_blocks(captions):
            result[rows] = sentences
        return result


def _fit_mixture(sample, config, policy, seed, writer, tag):
    """The mixture of one policy, its log-likelihood per word logged per
    iteration."""
    bar = progress.bar(total=config.em_iterations if policy != "gaussian" else 100, desc=f"EM ({policy})",
                       unit="iteration")

    def log(iteration, mixture, log_likelihood):
        bar.update(1)
        with writer.as_default(step=iteration):
            tf.summary.scalar(tag, log_likelihood / len(sample))

    with bar:
        if policy != "gaussian":
            return mixtures.fit_mixture(sample, config.num_components, policy, config.em_iterations,
                                        tolerance=0.01 if policy == "laplacian" else None, seed=seed, callback=log)
        return _fit_gmm(sample, config, seed, log)


def _fit_gmm(sample, config, seed, log):
    """The GMM by scikit-learn: at most 100 EM iterations, warm-started one
    at a time so that `log` sees each."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    gmm = GaussianMixture(config.num_components, covariance_type="diag", init_params="random_from_data",
                          reg_covar=mixtures.MIN_VARIANCE, max_iter=1, warm_start=True, random_state=seed)
    previous = -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for iteration in range(100):  # one EM iteration per call (warm start), to log each
            gmm.fit(sample)
            log_likelihood = float(np.sum(gmm.score_samples(sample)))
            log(iteration, None, log_likelihood)
            if abs(log_likelihood - previous) < 1e-3 * len(sample):  # scikit-learn's tol, per sample
                break
            previous = log_likelihood
    return mixtures.Mixture(gmm.weights_, gmm.means_, np.sqrt(gmm.covariances_),
                            np.zeros_like(gmm.means_, dtype=bool))


def _projected(raw, unmixing):
    """Word vectors as the encodings see them, float64: unit, then with ICA
    (`unmixing`, or None) projected and unit again."""
    vectors = _unit(raw.astype(np.float64))
    return vectors if unmixing is None else _unit(vectors @ unmixing.T)


def _unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
