import pytest
from nltk.tokenize import TreebankWordTokenizer

from data.tokenizer import tokenize_strings
from tests.helpers import SHARED_DATA


def flickr8k_captions():
    lines = (SHARED_DATA / "flickr8k_text" / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines]


def test_every_flickr8k_caption_splits_exactly_as_nltk_treebank():
    captions = flickr8k_captions()
    assert len(captions) > 40000
    treebank = TreebankWordTokenizer()
    ours = tokenize_strings(captions)
    differences = [(c, o) for c, o in zip(captions, ours) if o != treebank.tokenize(c.lower())]
    assert differences == []


@pytest.mark.parametrize("text", [
    'He said "hi" (to me)... don\'t, can\'t, it\'s, won\'t; I\'m sure they\'ll',
    "cannot gonna wanna go 'tis gimme lemme",
    "3,000 dogs, cats: a b;c $5 @home #1 50% R&B",
    "A dog.",
    "A dog .  ",
    '"quoted" start and \'\'double\'\' single',
    "Café naïve ÜNÏCODE words",
    "what?! yes--no [x] {y} <z>",
    "the dogs' toys",
])
def test_targeted_cases_match_nltk(text):
    assert tokenize_strings([text])[0] == TreebankWordTokenizer().tokenize(text.lower())


def test_lowercases():
    assert tokenize_strings(["A BLACK Dog"]) == [["a", "black", "dog"]]
