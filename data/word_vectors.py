"""Pretrained word vectors for the word embedding of a text encoder.

Three file formats are read (`load_word_vectors`), optionally gzipped, and
the bigfile folder format (`data.bigfile`) of Word2VisualVec's Flickr-tag
word2vec (`vec500flickr30m`):
- word2vec binary: a header line `<words> <dimension>`, then per word
  `<word> <dimension float32s>` (e.g. GoogleNews-vectors-negative300.bin);
- word2vec text: the same header, then `<word> <floats...>` lines;
- GloVe text: the word2vec text lines without the header line.
Or vectors are trained on the training captions (`train_word2vec`);
`for_model` picks one of these for a model config's `word_vectors`.
`embedding_matrix` turns either into the initial embedding of a vocabulary.
"""

import gzip
from pathlib import Path

import numpy as np
from gensim.models import KeyedVectors, Word2Vec

from common.errors import InputError
from common.files import check_file
from data.bigfile import BigFile, is_bigfile
from data.tokenizer import tokenize_strings

# Words without a vector start as a randomly initialised embedding does
# (uniformly from [-0.1, 0.1]).
RANDOM_INIT_SCALE = 0.1


def load_word_vectors(path):
    """Reads word vectors in word2vec binary, word2vec text or GloVe format,
    or a bigfile folder (ids = words).

    The format is detected from the content: a first line of two integers
    is the word2vec header; the word2vec file is text if its second line is
    a word and `dimension` numbers, binary otherwise.

    Args:
      path: the vector file (a `.gz` suffix means gzipped) or bigfile folder.

    Returns:
      `gensim.models.KeyedVectors`, with `source` set to the path for messages.
    """
    path = Path(path)
    if is_bigfile(path):
        return _bigfile_vectors(path)
    has_header, binary = _sniff_format(path)
    try:
        vectors = KeyedVectors.load_word2vec_format(str(path), binary=binary, no_header=not has_header)
    except (ValueError, EOFError, UnicodeDecodeError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{path}: not a word2vec or GloVe vector file ({reason})") from None
    finite = np.isfinite(vectors.vectors).all(axis=1)
    if not finite.all():
        raise InputError(f"{path}: the vector of {vectors.index_to_key[int(np.argmin(finite))]!r} holds NaN or inf")
    vectors.source = str(path)
    return vectors


def _bigfile_vectors(path):
    table = BigFile(path)
    vectors = KeyedVectors(table.dim)
    vectors.add_vectors(table.ids, table.read(table.ids))
    vectors.source = str(path)
    return vectors


def _sniff_format(path):
    """(has a word2vec header, is binary) from the first two lines of `path`;
    a header announcing more vectors than the file can hold is an error
    (gensim would allocate them all first)."""
    check_file(path)
    gzipped = path.suffix == ".gz"
    try:
        with (gzip.open if gzipped else open)(path, "rb") as file:
            first = file.readline(1000)
            second = file.readline(1 << 20)
    except (OSError, EOFError) as error:
        raise InputError(f"{path}: unreadable ({error})") from None
    if not first.strip():
        raise InputError(f"{path}: empty word vector file")
    header = first.split()
    if len(header) != 2 or not all(field.isdigit() for field in header):
        return False, False
    rows, dimension = map(int, header)
    binary = not _is_text_vector(second, dimension)
    # A binary vector takes 4 bytes a value, a text one at least 2 ("0 "),
    # and deflate compresses at most 1032:1.
    capacity = path.stat().st_size * (1032 if gzipped else 1)
    if rows * dimension * (4 if binary else 2) > capacity:
        raise InputError(f"{path}: its header announces {rows:,} vectors of {dimension} values, more than the "
                         f"file's {path.stat().st_size:,} bytes can hold; truncated or corrupt")
    return True, binary


def _is_text_vector(line, dimension):
    """Whether `line` (bytes) reads as `<word> <dimension numbers>`."""
    try:
        _, *values = line.decode("utf-8").split()
        numbers = [float(value) for value in values]
    except (UnicodeDecodeError, ValueError):  # ValueError also for a blank line
        return False
    return len(numbers) == dimension


def vector_rows(vectors, tokens, dim):
    """Where the vectors of `tokens` are: their rows in `vectors.vectors`.

    Args:
      vectors: `KeyedVectors` (from `load_word_vectors` or `train_word2vec`).
      tokens: a `Vocabulary`'s tokens (index = token id); `<pad>` and
        `<unk>` never get a vector.
      dim: the model's word vector size; must equal the vectors' size.

    Returns:
      int64 [len(tokens)]: the row of each token's vector, -1 for tokens
      without one. A token is looked up as is, then lowercased.
    """
    if vectors.vector_size != dim:
        source = getattr(vectors, "source", "the given vectors")
        raise InputError(
            f"word vectors in {source} have dimension {vectors.vector_size} but the model's word_dim is {dim} "
            f"(pass --set model.word_dim={vectors.vector_size})"
        )
    rows = np.full(len(tokens), -1, np.int64)
    for row, word in enumerate(tokens[2:], start=2):
        key = next((key for key in (word, word.lower()) if key in vectors.key_to_index), None)
        if key is not None:
            rows[row] = vectors.key_to_index[key]
    return rows


def lookup_vectors(vectors, tokens, dim):
    """The vectors of `tokens`, zeros for tokens without one.

    Args:
      vectors, tokens, dim: as `vector_rows`.

    Returns:
      (matrix float32 [len(tokens), dim], found bool [len(tokens)]). A
      token is looked up as is, then lowercased.
    """
    rows = vector_rows(vectors, tokens, dim)
    found = rows >= 0
    matrix = np.zeros((len(tokens), dim), np.float32)
    matrix[found] = vectors.vectors[rows[found]]
    return matrix, found


def embedding_matrix(vectors, vocabulary_tokens, dim, seed, init_scale=RANDOM_INIT_SCALE):
    """The initial word embedding of a vocabulary.

    Args:
      vectors, vocabulary_tokens, dim: as `lookup_vectors`.
      seed: seed of the random rows.
      init_scale: rows without a vector are drawn uniformly from
        [-init_scale, init_scale] (0.1: as VSE++ initialises every word
        embedding).

    Returns:
      (matrix, coverage). matrix: float32 [len(vocabulary_tokens), dim]; a
      word's row is its vector, `<pad>`'s row is zeros, every other row
      (`<unk>`, words without a vector) is random. coverage: the fraction of
      the words that have a vector.
    """
    found_matrix, found = lookup_vectors(vectors, vocabulary_tokens, dim)
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-init_scale, init_scale, found_matrix.shape).astype(np.float32)
    matrix[found] = found_matrix[found]
    matrix[0] = 0.0  # <pad>
    return matrix, found[2:].sum() / max(len(vocabulary_tokens) - 2, 1)


def train_word2vec(tokenized_captions, dim, seed, epochs=5):
    """Trains skip-gram word2vec on tokenised captions, the same for the same inputs.

    Skip-gram, as the papers that train or use word2vec (Klein et al. 2015,
    Ma et al. 2015, Dong et al. 2018); gensim's defaults otherwise (window 5,
    5 negative samples), except `min_count=1`: every training word gets a
    vector.

    Args:
      tokenized_captions: list of token lists (the training captions).
      dim: vector size.
      seed: random seed.
      epochs: passes over the captions.

    Returns:
      `KeyedVectors`.
    """
    model = Word2Vec(
        sentences=tokenized_captions,
        vector_size=dim,
        sg=1,
        min_count=1,
        epochs=epochs,
        seed=seed,
        # One worker: several make the result depend on thread scheduling.
        workers=1,
    )
    vectors = model.wv
    vectors.source = "word2vec trained on the training captions"
    return vectors


def for_model(source, train_captions, tokenizer, dim, seed):
    """The word vectors a model config asks for (`ModelConfig.word_vectors`).

    Args:
      source: None (no pretrained vectors), "word2vec" (skip-gram trained
        on `train_captions`, see `train_word2vec`) or a file or folder
        (see `load_word_vectors`).
      train_captions: the training captions, raw strings.
      tokenizer: a name of `data.tokenizer.TOKENIZERS`.
      dim: the vector size of trained vectors.
      seed: seeds the training.

    Returns:
      `KeyedVectors`, or None.
    """
    if source is None:
        return None
    if source == "word2vec":
        return train_word2vec(tokenize_strings(train_captions, tokenizer), dim, seed)
    return load_word_vectors(source)
