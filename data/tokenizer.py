"""Word tokenisation in TensorFlow string ops, in-graph.

Two tokenizers (`TOKENIZERS`), chosen by a model's `tokenizer` setting:
- "treebank" (`tokenize`): NLTK's Treebank rules, described below; the
  tokenizer of VSE++ and of most papers of the zoo.
- "alnum" (`tokenize_alnum`): every character outside [A-Za-z0-9] becomes
  a space, then lowercase and split on spaces, so punctuation disappears
  and "white-footed" is "white", "footed" (Word2VisualVec's `clean_str`).

The papers tokenised captions with NLTK. A SavedModel cannot call NLTK, so
this module re-expresses `nltk.tokenize.TreebankWordTokenizer().tokenize(text)`
(NLTK 3.10.4, `convert_parentheses=False`) as the same sequence of regular
expression rewrites, as `tf.strings.regex_replace` calls, applied after
`tf.strings.lower`. The same function tokenises the training captions
(through the model's `TextVectorizer`, and `tokenize_strings` for
vocabularies and word2vec) and runs inside the exported graph, so there is no
train/serve skew. `tests/data/test_tokenizer.py` checks that every Flickr8k
caption is split exactly as `TreebankWordTokenizer().tokenize(caption.lower())`
splits it; there are no differences on ASCII text.

Known differences, none of which occurs in Flickr8k, Flickr30k or COCO
captions (all would at worst change one rare token):
- RE2 (TensorFlow) has no Unicode `\\b`: the contraction rules (`cannot`,
  `gonna`, `'tis`, ...) treat a non-ASCII letter next to the word as a word
  boundary, so "écannot" becomes "é can not" where NLTK keeps "écannot".
- Unicode tables differ in version: digits added to Unicode after RE2's
  tables (a comma before one splits off here but not in NLTK), and about 40
  capital letters added in Unicode 14 that `tf.strings.lower` keeps.
- Invalid UTF-8 bytes become U+FFFD when lowercasing (Python strings cannot
  hold them at all).
"""

import tensorflow as tf

# Unicode White_Space: what `\s` matches in the `regex` module that NLTK
# 3.10 compiles its Treebank rules with. RE2's `\s` is ASCII-only.
_WHITE_SPACE = r"[\t-\r \x85\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
# What Python's `str.split()` and the stdlib `re`'s `\s` split on: the above
# plus the ASCII information separators U+001C..U+001F.
_PYTHON_SPACE = r"[\t-\r\x1c-\x1f \x85\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"

# (pattern, rewrite) pairs in RE2 syntax, in NLTK's order. RE2 has no
# lookarounds and no `(?#...)` comments; `\0` is the whole match (Python's
# `\g<0>`); `\p{Nd}` is Python's Unicode `\d`.
_BEFORE_PADDING = (
    # Starting quotes: a leading `"`, and `"`/`''` after an opening
    # character, become ``.
    (r'^"', r"``"),
    (r"(``)", r" \1 "),
    (r"([ \(\[{<])(\"|'{2})", r"\1 `` "),
    # Punctuation. Commas and colons split off unless a digit follows
    # (3,000 stays one token); only the final period of the text splits off.
    (r"([:,])([^\p{Nd}])", r" \1 \2"),
    (r"([:,])$", r" \1 "),
    (r"\.\.\.", r" ... "),
    (r"[;@#$%&]", r" \0 "),
    (r"([^\.])(\.)([\]\)}>\"']*)" + _WHITE_SPACE + r"*$", r"\1 \2\3 "),
    (r"[?!]", r" \0 "),
    (r"([^'])' ", r"\1 ' "),
    # Parentheses and brackets, then double dashes.
    (r"[\]\[\(\)\{\}<>]", r" \0 "),
    (r"--", r" -- "),
)
_AFTER_PADDING = (
    # Ending quotes and clitics ('s, 'll, n't, ...), which need a space after.
    (r"''", r" '' "),
    (r'"', r" '' "),
    (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
    # Robert MacIntyre's contractions (NLTK's CONTRACTIONS2 and 3).
    (r"(?i)\b(can)(not)\b", r" \1 \2 "),
    (r"(?i)\b(d)('ye)\b", r" \1 \2 "),
    (r"(?i)\b(gim)(me)\b", r" \1 \2 "),
    (r"(?i)\b(gon)(na)\b", r" \1 \2 "),
    (r"(?i)\b(got)(ta)\b", r" \1 \2 "),
    (r"(?i)\b(lem)(me)\b", r" \1 \2 "),
    (r"(?i)\b(more)('n)\b", r" \1 \2 "),
    # NLTK's lookahead `(?=\s)`: match the space and write it back.
    (r"(?i)\b(wan)(na)(" + _PYTHON_SPACE + ")", r" \1 \2 \3"),
    (r"(?i) ('t)(is)\b", r" \1 \2 "),
    (r"(?i) ('t)(was)\b", r" \1 \2 "),
)


def tokenize(texts):
    """Lowercases and tokenises a batch of strings.

    Args:
      texts: tf.string [B] (UTF-8).

    Returns:
      tf.RaggedTensor of tf.string tokens, [B, (tokens)].
    """
    texts = tf.strings.lower(tf.convert_to_tensor(texts, tf.string), encoding="utf-8")
    for pattern, rewrite in _BEFORE_PADDING:
        texts = tf.strings.regex_replace(texts, pattern, rewrite)
    # NLTK pads the text with a space on each side before the ending quotes.
    texts = tf.strings.join([" ", texts, " "])
    for pattern, rewrite in _AFTER_PADDING:
        texts = tf.strings.regex_replace(texts, pattern, rewrite)
    # `tf.strings.split` splits on ASCII whitespace only; Python's on more.
    return tf.strings.split(tf.strings.regex_replace(texts, _PYTHON_SPACE, " "))


def tokenize_alnum(texts):
    """Word2VisualVec's tokenisation of a batch of strings: every character
    outside [A-Za-z0-9] (one Unicode character, not one byte) becomes a
    space, then ASCII lowercasing and splitting on spaces.

    Args:
      texts: tf.string [B] (UTF-8).

    Returns:
      tf.RaggedTensor of tf.string tokens, [B, (tokens)].
    """
    texts = tf.strings.regex_replace(tf.convert_to_tensor(texts, tf.string), r"[^A-Za-z0-9]", " ")
    return tf.strings.split(tf.strings.lower(texts))


TOKENIZERS = {"treebank": tokenize, "alnum": tokenize_alnum}


def tokenize_strings(texts, tokenizer="treebank", batch_size=8192):
    """A tokenizer of `TOKENIZERS` for Python strings: list[str] -> list[list[str]].

    Runs the same TensorFlow ops, in batches of `batch_size` (used to build
    vocabularies and to train word2vec), so the words counted are the words
    the model sees.
    """
    function = TOKENIZERS[tokenizer]
    tokens = []
    for start in range(0, len(texts), batch_size):
        ragged = function(tf.constant(list(texts[start : start + batch_size]), tf.string))
        tokens.extend([[token.decode("utf-8") for token in row] for row in ragged.to_list()])
    return tokens
