"""The word vocabulary of a text model, saved as JSON next to its checkpoints."""

import collections
import json
from pathlib import Path

from data.errors import InputError
from data.readers import atomic_write
from data.tokenizer import tokenize_strings

PAD, UNK = "<pad>", "<unk>"


class Vocabulary:
    """Token list with `<pad>` = 0 and `<unk>` = 1, then words by frequency.

    Build it from the TRAIN split only: a vocabulary built on all splits (as
    VSE++'s released vocabularies were, their issue #29) leaks test words
    into the model.

    Attributes:
      tokens: list[str], index = token id.
    """

    def __init__(self, tokens):
        tokens = list(tokens)
        if tokens[:2] != [PAD, UNK]:
            raise ValueError(f"a vocabulary starts with {PAD!r}, {UNK!r}")
        if not all(isinstance(token, str) for token in tokens):
            raise ValueError("vocabulary tokens must be strings")
        if len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary has no duplicate tokens")
        self.tokens = tokens

    @classmethod
    def build(cls, captions, min_count=1, max_size=None):
        """Counts the tokens of `captions` (tokenised by
        `data.tokenizer.tokenize_strings`) and keeps those seen at least
        `min_count` times, most frequent first, ties alphabetically, at most
        `max_size` of them (not counting `<pad>` and `<unk>`)."""
        counts = collections.Counter(
            token for tokens in tokenize_strings(list(captions)) for token in tokens
        )
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls([PAD, UNK, *words[:max_size]])

    def __len__(self):
        return len(self.tokens)

    def save(self, path):
        """Writes the token list as JSON; a reader never sees half a file."""
        text = json.dumps({"tokens": self.tokens}, ensure_ascii=False)
        atomic_write(path, lambda file: file.write(text.encode("utf-8")))

    @classmethod
    def load(cls, path):
        """Reads a file written by `save`; raises InputError naming it if it
        is missing, unreadable or not a vocabulary."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: vocabulary file not found") from None
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{path}: cannot read the vocabulary file ({error})") from None
        try:
            tokens = json.loads(text)["tokens"]
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: not a vocabulary file: invalid JSON ({error})") from None
        except (KeyError, TypeError):
            raise InputError(f'{path}: not a vocabulary file: no "tokens" list') from None
        if not isinstance(tokens, list):
            raise InputError(f'{path}: not a vocabulary file: "tokens" is not a list')
        try:
            return cls(tokens)
        except ValueError as error:
            raise InputError(f"{path}: not a vocabulary file: {error}") from None
