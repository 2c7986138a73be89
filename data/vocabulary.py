"""The word vocabulary of a text model, saved as JSON next to its checkpoints."""

import collections
import json
import os
import tempfile
from pathlib import Path

from data.errors import InputError
from data.tokenizer import tokenize_strings

PAD, UNK = "<pad>", "<unk>"


class Vocabulary:
    """Token list with `<pad>` = 0 and `<unk>` = 1, then words by frequency.

    Build it from the TRAINING captions only: a vocabulary built on all
    splits (as VSE++'s released vocabularies were, their issue #29) leaks
    test words into the model.

    Attributes:
      tokens: list[str], index = token id.
    """

    def __init__(self, tokens):
        if list(tokens[:2]) != [PAD, UNK] or len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary starts with <pad>, <unk> and has no duplicates")
        self.tokens = list(tokens)

    @classmethod
    def build(cls, captions, min_count=1, max_size=None):
        """Words seen at least `min_count` times, most frequent first (ties
        alphabetically), at most `max_size` of them (not counting specials)."""
        counts = collections.Counter(
            token for tokens in tokenize_strings(list(captions)) for token in tokens
        )
        words = sorted(
            (w for w, c in counts.items() if c >= min_count and w not in (PAD, UNK)),
            key=lambda w: (-counts[w], w),
        )
        return cls([PAD, UNK, *words[:max_size]])

    def __len__(self):
        return len(self.tokens)

    def save(self, path):
        """Writes the token list as JSON, atomically."""
        path = Path(path)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump({"tokens": self.tokens}, file, ensure_ascii=False)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        try:
            tokens = json.loads(Path(path).read_text(encoding="utf-8"))["tokens"]
            return cls(tokens)
        except FileNotFoundError:
            raise InputError(f"{path}: vocabulary file not found") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise InputError(f"{path}: not a vocabulary file ({error})") from None
