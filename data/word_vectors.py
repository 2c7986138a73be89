"""Pretrained word vectors for initialising a model's word embedding.

Any file gensim's `KeyedVectors` reads: word2vec binary (`.bin`), word2vec
text (a "<count> <dim>" header line), or GloVe text (no header). Or, with no
file, a word2vec model trained on the training captions.
"""

from pathlib import Path

import numpy as np

from data.errors import InputError


def load_word_vectors(path):
    """Reads a word-vector file; returns gensim `KeyedVectors`."""
    from gensim.models import KeyedVectors

    path = Path(path)
    try:
        binary = path.suffix == ".bin"
        no_header = False
        if not binary:
            with open(path, encoding="utf-8") as file:
                first = file.readline().split()
            no_header = not (len(first) == 2 and all(part.isdigit() for part in first))
        vectors = KeyedVectors.load_word2vec_format(str(path), binary=binary, no_header=no_header)
    except FileNotFoundError:
        raise InputError(f"{path}: word-vector file not found") from None
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as error:
        raise InputError(f"{path}: not a word2vec/GloVe file ({str(error).splitlines()[0]})") from None
    vectors.source = str(path)
    return vectors


def embedding_matrix(vectors, vocabulary_tokens, dim, seed):
    """A [len(tokens), dim] float32 embedding matrix from word vectors.

    Known words take their vector (tokens are lowercase, as are GloVe's
    words; a cased file such as GoogleNews word2vec covers fewer); the others
    are drawn uniformly from [-0.1, 0.1] (VSE++'s initialisation); row 0,
    `<pad>`, is zero.

    Returns:
      (matrix, coverage): coverage is the fraction of the words (not the
      two special tokens) found in `vectors`.
    """
    source = getattr(vectors, "source", "the word vectors")
    if vectors.vector_size != dim:
        raise InputError(
            f"word vectors in {source} have dimension {vectors.vector_size} but the model's word_dim is {dim} "
            f"(pass --set model.word_dim={vectors.vector_size})"
        )
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-0.1, 0.1, size=(len(vocabulary_tokens), dim)).astype(np.float32)
    matrix[0] = 0.0
    found = 0
    for index, token in enumerate(vocabulary_tokens[2:], start=2):
        if token in vectors.key_to_index:
            matrix[index] = vectors[token]
            found += 1
    return matrix, found / max(1, len(vocabulary_tokens) - 2)


def train_word2vec(tokenized_captions, dim, seed, epochs=5):
    """Word2vec (skip-gram) trained on tokenised captions, deterministically."""
    from gensim.models import Word2Vec

    model = Word2Vec(
        sentences=tokenized_captions, vector_size=dim, min_count=1, sg=1, seed=seed, workers=1, epochs=epochs
    )
    model.wv.source = "word2vec trained on the training captions"
    return model.wv
