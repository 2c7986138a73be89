"""Word tokenisation in TensorFlow string ops: NLTK's Treebank rules, in-graph.

The papers tokenised captions with NLTK. A SavedModel cannot call NLTK, so
this module re-expresses `nltk.tokenize.TreebankWordTokenizer.tokenize`
(NLTK 3.10, `convert_parentheses=False`) as a fixed sequence of
`tf.strings.regex_replace` rewrites, applied after lowercasing. The same
function tokenises the training captions (through the model's
`TextVectorizer`) and runs inside the exported graph, so there is no
train/serve skew. `tests/data/test_tokenizer.py` checks that it splits every
Flickr8k caption exactly as NLTK does.

Known differences, none of which occurs in Flickr8k/Flickr30k/COCO captions:
- RE2 (TensorFlow) classes `\\d`, `\\s`, `\\b` are ASCII-only, Python's are
  Unicode: a comma before a non-ASCII digit, or a contraction next to a
  non-ASCII letter, may split differently.
- Whitespace splitting uses ASCII whitespace; Python's `str.split` also
  splits on Unicode spaces such as U+00A0.
"""

import tensorflow as tf

# (pattern, rewrite) pairs, in NLTK's order. RE2 has no lookahead and no
# `(?#...)` comments; `\0` is the whole match (Python's `\g<0>`).
_RULES = (
    # Starting quotes.
    (r'^"', r"``"),
    (r"(``)", r" \1 "),
    (r"([ \(\[{<])(\"|'{2})", r"\1 `` "),
    # Punctuation.
    (r"([:,])([^\d])", r" \1 \2"),
    (r"([:,])$", r" \1 "),
    (r"\.\.\.", r" ... "),
    (r"[;@#$%&]", r" \0 "),
    (r"([^\.])(\.)([\]\)}>\"']*)\s*$", r"\1 \2\3 "),  # the final period
    (r"[?!]", r" \0 "),
    (r"([^'])' ", r"\1 ' "),
    # Parentheses and brackets, double dashes.
    (r"[\]\[\(\)\{\}<>]", r" \0 "),
    (r"--", r" -- "),
    # Ending quotes (NLTK pads the text with a space on each side first).
    (r"^(.*)$", r" \1 "),
    (r"''", r" '' "),
    (r'"', r" '' "),
    (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
    # Contractions (Robert MacIntyre's lists in NLTK).
    (r"(?i)\b(can)(not)\b", r" \1 \2 "),
    (r"(?i)\b(d)('ye)\b", r" \1 \2 "),
    (r"(?i)\b(gim)(me)\b", r" \1 \2 "),
    (r"(?i)\b(gon)(na)\b", r" \1 \2 "),
    (r"(?i)\b(got)(ta)\b", r" \1 \2 "),
    (r"(?i)\b(lem)(me)\b", r" \1 \2 "),
    (r"(?i)\b(more)('n)\b", r" \1 \2 "),
    # NLTK's `(?=\s)` lookahead: consume the space and put it back.
    (r"(?i)\b(wan)(na)(\s)", r" \1 \2 \3"),
    (r"(?i) ('t)(is)\b", r" \1 \2 "),
    (r"(?i) ('t)(was)\b", r" \1 \2 "),
)


def tokenize(texts):
    """Lowercases and tokenises a batch of strings.

    Args:
      texts: tf.string [B].

    Returns:
      tf.RaggedTensor of tf.string tokens, [B, (tokens)].
    """
    texts = tf.strings.lower(tf.convert_to_tensor(texts, tf.string), encoding="utf-8")
    # `^` and `$` must anchor at the ends of the caption, as in Python with
    # no newline in the text; (?s) lets `.` cross any newline inside it.
    for pattern, rewrite in _RULES:
        texts = tf.strings.regex_replace(texts, "(?s)" + pattern, rewrite)
    return tf.strings.split(texts)


def tokenize_strings(texts, batch_size=8192):
    """`tokenize` for Python strings: list[str] -> list[list[str]].

    Runs the same TensorFlow ops (used to build vocabularies and to train
    word2vec), so the words counted are the words the model sees.
    """
    tokens = []
    for start in range(0, len(texts), batch_size):
        ragged = tokenize(tf.constant(list(texts[start : start + batch_size]), tf.string))
        tokens.extend([[t.decode("utf-8") for t in row] for row in ragged.to_list()])
    return tokens
