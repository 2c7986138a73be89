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
from gensim.models import Word2Vec

from common.errors import InputError
from common.files import check_file
from data.bigfile import BigFile, is_bigfile
from data.tokenizer import tokenize_strings

# Words without a vector start as a randomly initialised embedding does
# (uniformly from [-0.1, 0.1]).
RANDOM_INIT_SCALE = 0.1
# Bytes read at a time when a binary word2vec file is scanned.
SCAN_CHUNK = 1 << 24


class WordVectors:
    """Words and their vectors, the vectors read when asked for.

    A word2vec or GloVe file is scanned once when opened (`load_word_vectors`:
    its words, where each vector starts, every vector checked) and its
    vectors are read again from the file by `take`, so that a model copying
    them into its own table never holds the file's 3.6 GB (GoogleNews)
    beside it. Vectors trained or held in memory are read from their array.

    Attributes:
      index_to_key: the words, in file order.
      key_to_index: word -> its row (the first, for a word listed twice).
      vector_size: the dimension D.
      source: where the vectors come from, for messages.
    """

    def __init__(self, keys, vector_size, source, read):
        self.index_to_key = keys
        self.key_to_index = {}
        for row, key in enumerate(keys):
            self.key_to_index.setdefault(key, row)
        self.vector_size = vector_size
        self.source = source
        self._read = read

    @classmethod
    def in_memory(cls, keys, matrix, source):
        """Vectors held in a float [len(keys), D] array."""
        matrix = np.asarray(matrix, np.float32)
        return cls(list(keys), matrix.shape[1], source, lambda rows: matrix[rows])

    def __len__(self):
        return len(self.index_to_key)

    def __getitem__(self, word):
        return self.take([self.key_to_index[word]])[0]

    def take(self, rows):
        """The vectors of `rows` (ints, any order): float32 [len(rows), D]."""
        return self._read(np.asarray(rows, np.int64).reshape(-1))


def load_word_vectors(path):
    """Opens word vectors in word2vec binary, word2vec text or GloVe format,
    or a bigfile folder (ids = words).

    The format is detected from the content: a first line of two integers
    is the word2vec header; the word2vec file is text if its second line is
    a word and `dimension` numbers, binary otherwise. The file is read
    through once here, every vector checked (a malformed line, a missing
    vector or a NaN is an error now, not when the vectors are used); only
    the words and the vectors' positions are kept, and `WordVectors.take`
    reads vectors again from the file.

    Args:
      path: the vector file (a `.gz` suffix means gzipped) or bigfile folder.

    Returns:
      `WordVectors`, with `source` the path.
    """
    path = Path(path)
    if is_bigfile(path):
        table = BigFile(path)
        return WordVectors.in_memory(table.ids, table.read(table.ids), str(path))
    has_header, binary = _sniff_format(path)
    try:
        with _open(path) as file:
            keys, offsets, dim = (_scan_binary if binary else _scan_text)(file, has_header)
    except (ValueError, EOFError, UnicodeDecodeError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{path}: not a word2vec or GloVe vector file ({reason})") from None
    except _NotFinite as error:
        raise InputError(f"{path}: the vector of {error.args[0]!r} holds NaN or inf") from None
    if not keys:
        raise InputError(f"{path}: not a word2vec or GloVe vector file (no vectors)")
    return WordVectors(keys, dim, str(path), _FileRows(path, offsets, dim, binary).read)


class _NotFinite(Exception):
    """A vector holding NaN or inf; args[0] is its word."""


def _open(path):
    return (gzip.open if path.suffix == ".gz" else open)(path, "rb")


def _scan_binary(file, has_header):
    """(words, where each vector starts, D) of a binary word2vec file: the
    header, then per word `<word> <D little-endian float32s>`, each record
    possibly preceded by a newline."""
    rows, dim = map(int, file.readline().split())
    record = 4 * dim
    keys, offsets = [], np.empty(rows, np.int64)
    buffer, buffer_start, position = b"", file.tell(), 0
    for row in range(rows):
        space = buffer.find(b" ", position)
        while space < 0 or space + 1 + record > len(buffer):
            more = file.read(SCAN_CHUNK)
            if not more:
                raise EOFError(f"the file ends within vector {row + 1:,} of the {rows:,} its header announces")
            buffer, buffer_start, position = buffer[position:] + more, buffer_start + position, 0
            space = buffer.find(b" ")
        key = buffer[position:space].lstrip(b"\n").decode("utf-8")
        if not np.isfinite(np.frombuffer(buffer, "<f4", dim, space + 1)).all():
            raise _NotFinite(key)
        keys.append(key)
        offsets[row] = buffer_start + space + 1
        position = space + 1 + record
    return keys, offsets, dim


def _scan_text(file, has_header):
    """(words, where each line starts, D) of a word2vec text file (after
    its header) or a GloVe file: `<word> <D numbers>` lines."""
    rows, dim = map(int, file.readline().split()) if has_header else (None, None)
    keys, offsets = [], []
    offset = file.tell()
    for line in file:
        if line.strip():
            key, vector = _parse_text(line, dim)
            dim = len(vector)
            if not np.isfinite(vector).all():
                raise _NotFinite(key)
            keys.append(key)
            offsets.append(offset)
            if len(keys) == rows:
                break
        offset += len(line)
    if rows is not None and len(keys) < rows:
        raise EOFError(f"{len(keys):,} vectors, but its header announces {rows:,}")
    return keys, np.array(offsets, np.int64), dim


def _parse_text(line, dim):
    """(word, float32 vector) of a text line; ValueError unless it holds
    `dim` numbers (any number for dim None, the first GloVe line)."""
    key, *values = _fields(line)
    if not values or (dim is not None and len(values) != dim):
        raise ValueError(f"the line of {key!r} has {len(values)} numbers, not {dim}")
    return key, np.array(values, np.float32)


def _fields(line):
    """The word (str), then the values (bytes), of a text line split on
    ASCII whitespace, as word2vec's tools and gensim split it: a word may
    hold other Unicode spaces, such as U+00A0 (no-break space), which
    `str.split` would split on."""
    key, *values = line.split()
    return key.decode("utf-8"), *values


class _FileRows:
    """Reads rows of a scanned vector file: in file order, each from its
    offset (a gzipped file is read forward from the last position, so
    rows asked for in file order cost one pass)."""

    def __init__(self, path, offsets, dim, binary):
        self.path, self.offsets, self.dim, self.binary = path, offsets, dim, binary
        self._file = None

    def read(self, rows):
        result = np.empty((len(rows), self.dim), np.float32)
        order = np.argsort(self.offsets[rows], kind="stable")
        if self._file is None:
            self._file = _open(self.path)
        for i in order:
            self._file.seek(self.offsets[rows[i]])
            if self.binary:
                result[i] = np.frombuffer(self._file.read(4 * self.dim), "<f4")
            else:
                result[i] = _parse_text(self._file.readline(), self.dim)[1]
        return result

    def __del__(self):
        if self._file is not None:
            self._file.close()


def _sniff_format(path):
    """(has a word2vec header, is binary) from the first two lines of `path`;
    a header announcing more vectors than the file can hold is an error
    (the scan would allocate a position for each first)."""
    check_file(path)
    gzipped = path.suffix == ".gz"
    try:
        with _open(path) as file:
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
        _, *values = _fields(line)
        numbers = [float(value) for value in values]
    except (UnicodeDecodeError, ValueError):  # ValueError also for a blank line
        return False
    return len(numbers) == dimension


def vector_rows(vectors, tokens, dim):
    """Where the vectors of `tokens` are: their rows in `vectors`.

    Args:
      vectors: `WordVectors` (from `load_word_vectors` or `train_word2vec`).
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
    matrix[found] = vectors.take(rows[found])
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
      `WordVectors`.
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
    return WordVectors.in_memory(model.wv.index_to_key, model.wv.vectors, "word2vec trained on the training captions")


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
      `WordVectors`, or None.
    """
    if source is None:
        return None
    if source == "word2vec":
        return train_word2vec(tokenize_strings(train_captions, tokenizer), dim, seed)
    return load_word_vectors(source)
