import pytest

from data.errors import InputError
from data.vocabulary import Vocabulary

CAPTIONS = ["A dog runs.", "a dog sits", "A cat runs", "zebra"]


def test_specials_then_words_by_count_then_alphabetically():
    vocabulary = Vocabulary.build(CAPTIONS)
    assert vocabulary.tokens == ["<pad>", "<unk>", "a", "dog", "runs", ".", "cat", "sits", "zebra"]
    assert len(vocabulary) == 9


def test_min_count_and_max_size():
    assert Vocabulary.build(CAPTIONS, min_count=2).tokens == ["<pad>", "<unk>", "a", "dog", "runs"]
    assert Vocabulary.build(CAPTIONS, max_size=1).tokens == ["<pad>", "<unk>", "a"]


def test_json_round_trip_and_bad_files(tmp_path):
    vocabulary = Vocabulary.build(CAPTIONS)
    vocabulary.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json").tokens == vocabulary.tokens
    with pytest.raises(InputError, match="not found"):
        Vocabulary.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(InputError, match="bad.json: not a vocabulary file"):
        Vocabulary.load(tmp_path / "bad.json")
    (tmp_path / "nospecials.json").write_text('{"tokens": ["a", "b"]}')
    with pytest.raises(InputError, match="nospecials.json"):
        Vocabulary.load(tmp_path / "nospecials.json")
