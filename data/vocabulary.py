"""The word vocabulary of a text model, saved as JSON next to its checkpoints."""

import collections
import json

from common.errors import InputError
from common.files import atomic_write, read_text

PAD, UNK = "<pad>", "<unk>"


class Vocabulary:
    """Token list with `<pad>` = 0 and `<unk>` = 1, then words by frequency.

    Build it from the TRAIN split only: a vocabulary built on all splits (as
    VSE++'s released vocabularies were, their issue #29) leaks test words
    into the model.

    Attributes:
      tokens: list[str], index = token id.
      counts: list[int], index = token id: how often each token occurs in
        the training captions (0 for `<pad>`, `<unk>` and words that came
        from elsewhere, such as a word-vector file); None when unknown
        (a plain token list).
    """

    def __init__(self, tokens, counts=None):
        tokens = list(tokens)
        if tokens[:2] != [PAD, UNK]:
            raise ValueError(f"a vocabulary starts with {PAD!r}, {UNK!r}")
        if not all(isinstance(token, str) for token in tokens):
            raise ValueError("vocabulary tokens must be strings")
        if len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary has no duplicate tokens")
        if counts is not None:
            counts = list(counts)
            if len(counts) != len(tokens) or not all(isinstance(c, int) and c >= 0 for c in counts):
                raise ValueError("a vocabulary's counts are one non-negative integer per token")
        self.tokens = tokens
        self.counts = counts

    @classmethod
    def build(cls, captions, min_count=1, max_size=None, tokenizer="treebank", extra_words=()):
        """Counts the tokens of `captions` (tokenised by
        `data.tokenizer.tokenize_strings` with `tokenizer`) and keeps those
        seen at least `min_count` times, most frequent first, ties
        alphabetically, at most `max_size` of them (not counting `<pad>` and
        `<unk>`); then appends `extra_words` not already kept, in their
        order (e.g. the words of a word-vector file, for a model that uses
        their vectors as they are), with their training counts."""
        # Imported here: reading a saved vocabulary (a composite model's
        # members, checked before TensorFlow loads) needs no tokenizer.
        from data.tokenizer import tokenize_strings

        counts = collections.Counter(
            token for tokens in tokenize_strings(list(captions), tokenizer) for token in tokens
        )
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        tokens = [PAD, UNK, *words[:max_size]]
        kept = set(tokens)
        for word in extra_words:
            if word not in kept:
                tokens.append(word)
                kept.add(word)
        return cls(tokens, [counts.get(token, 0) if i >= 2 else 0 for i, token in enumerate(tokens)])

    def __len__(self):
        return len(self.tokens)

    def save(self, path):
        """Writes the tokens (and counts) as JSON; a reader never sees half a file."""
        text = json.dumps({"tokens": self.tokens, "counts": self.counts}, ensure_ascii=False)
        atomic_write(path, lambda file: file.write(text.encode("utf-8")))

    @classmethod
    def load(cls, path):
        """Reads a file written by `save`; raises InputError naming it if it
        is missing, unreadable or not a vocabulary."""
        text = read_text(path)
        try:
            content = json.loads(text)
            tokens = content["tokens"]
            counts = content.get("counts")
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: not a vocabulary file: invalid JSON ({error})") from None
        except (KeyError, TypeError, AttributeError):
            raise InputError(f'{path}: not a vocabulary file: no "tokens" list') from None
        if not isinstance(tokens, list):
            raise InputError(f'{path}: not a vocabulary file: "tokens" is not a list')
        try:
            return cls(tokens, counts)
        except ValueError as error:
            raise InputError(f"{path}: not a vocabulary file: {error}") from None
