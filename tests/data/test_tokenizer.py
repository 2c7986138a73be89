import re

import pytest
import tensorflow as tf
from nltk.tokenize import TreebankWordTokenizer

from data.tokenizer import tokenize, tokenize_strings
from tests.helpers import EMBEDDED_TEXT


def nltk_tokens(text):
    return TreebankWordTokenizer().tokenize(text.lower())


def test_every_flickr8k_caption_splits_exactly_as_nltk_treebank():
    lines = (EMBEDDED_TEXT / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()
    captions = [line.split("\t", 1)[1] for line in lines]
    assert len(captions) > 40000
    ours = tokenize_strings(captions)
    assert [c for c, tokens in zip(captions, ours) if tokens != nltk_tokens(c)] == []


def test_every_flickr8k_caption_splits_as_word2visualvecs_clean_str():
    # The public Word2VisualVec code: every character outside [A-Za-z0-9]
    # becomes a space, then lowercase and split.
    lines = (EMBEDDED_TEXT / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()
    captions = [line.split("\t", 1)[1] for line in lines] + ["Café, white-footed DOG!", "naïve\u00a0x²"]
    ours = tokenize_strings(captions, "alnum")
    expected = [re.sub(r"[^A-Za-z0-9]", " ", c).strip().lower().split() for c in captions]
    assert [c for c, got, want in zip(captions, ours, expected) if got != want] == []
    assert ours[-2:] == [["caf", "white", "footed", "dog"], ["na", "ve", "x"]]


@pytest.mark.parametrize("text, expected", [
    ("A dog runs.", ["a", "dog", "runs", "."]),
    ("Don't, can't; it's fine", ["do", "n't", ",", "ca", "n't", ";", "it", "'s", "fine"]),
    ('He said "hi" to me', ["he", "said", "``", "hi", "''", "to", "me"]),
    ("3,000 dogs, 2 cats: 1:30", ["3,000", "dogs", ",", "2", "cats", ":", "1:30"]),
    ("Wait... a dog (black) runs.", ["wait", "...", "a", "dog", "(", "black", ")", "runs", "."]),
    ("U.S. dogs run. Fast.", ["u.s.", "dogs", "run.", "fast", "."]),
    ("Café NAÏVE", ["café", "naïve"]),
    ("a\u00a0dog\u3000runs", ["a", "dog", "runs"]),
    ("", []),
])
def test_targeted_cases(text, expected):
    assert nltk_tokens(text) == expected
    assert tokenize_strings([text]) == [expected]


@pytest.mark.parametrize("text", [
    'He said "hi" (to me)... don\'t, can\'t, it\'s, won\'t; I\'m sure they\'ll',
    "cannot gonna wanna go 'tis gimme lemme gotta d'ye more'n 'twas",
    "a b;c $5 @home #1 50% R&B x--y",
    '"quoted" start and \'\'double\'\' single, `back` quotes',
    "what?! yes [x] {y} <z>",
    "the dogs' toys' 'quoted'",
    "tab\tnew\nline. ",
    "Ελληνικά ΛΌΓΟΣ, 中文。 émoji 🐕.",
    "٣,٤ and 3,4",
])
def test_matches_nltk(text):
    assert tokenize_strings([text]) == [nltk_tokens(text)]


def test_known_difference_contraction_next_to_non_ascii_letter():
    # RE2's `\b` is ASCII-only (see the module docstring).
    assert nltk_tokens("écannot") == ["écannot"]
    assert tokenize_strings(["écannot"]) == [["é", "can", "not"]]


def test_batches_are_independent():
    texts = ["A dog.", "Two cats, one mouse", "x"]
    assert tokenize_strings(texts, batch_size=2) == [nltk_tokens(t) for t in texts]


def test_runs_in_tf_function_and_tf_data():
    texts = tf.constant(["A dog runs.", "Don't"])
    expected = [[b"a", b"dog", b"runs", b"."], [b"do", b"n't"]]
    traced = tf.function(tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert traced(texts).to_list() == expected
    batch = next(iter(tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tokenize)))
    assert batch.to_list() == expected
