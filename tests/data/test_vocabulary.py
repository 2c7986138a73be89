import json

import pytest

from common.errors import InputError
from data.vocabulary import Vocabulary

CAPTIONS = ["A dog runs.", "a dog sits", "A cat runs", "zebra"]


def test_specials_then_words_by_count_then_alphabetically():
    vocabulary = Vocabulary.build(CAPTIONS)
    assert vocabulary.tokens == ["<pad>", "<unk>", "a", "dog", "runs", ".", "cat", "sits", "zebra"]
    assert len(vocabulary) == 9


def test_min_count_and_max_size():
    assert Vocabulary.build(CAPTIONS, min_count=2).tokens == ["<pad>", "<unk>", "a", "dog", "runs"]
    assert Vocabulary.build(CAPTIONS, max_size=1).tokens == ["<pad>", "<unk>", "a"]
    assert Vocabulary.build(CAPTIONS, min_count=2, max_size=10).tokens == ["<pad>", "<unk>", "a", "dog", "runs"]


def test_special_tokens_in_captions_do_not_collide():
    # The tokenizer splits "<pad>" into "<", "pad", ">".
    assert Vocabulary.build(["<pad> <unk>"]).tokens == ["<pad>", "<unk>", "<", ">", "pad", "unk"]


def test_constructor_rejects_bad_token_lists():
    for tokens in (["a", "b"], ["<pad>", "<unk>", "a", "a"], ["<pad>", "<unk>", 3]):
        with pytest.raises(ValueError):
            Vocabulary(tokens)


def test_json_round_trip_leaves_no_partial_file(tmp_path):
    vocabulary = Vocabulary.build(CAPTIONS + ["Café"])
    vocabulary.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json").tokens == vocabulary.tokens
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]
    vocabulary.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json").tokens == vocabulary.tokens


@pytest.mark.parametrize("content, message", [
    (None, "vocab.json: file not found"),
    (b"{oops", "vocab.json: not a vocabulary file: invalid JSON"),
    (b"\xff\xfe", "vocab.json: unreadable"),
    (b"[1, 2]", 'vocab.json: not a vocabulary file: no "tokens" list'),
    (b'{"words": []}', 'vocab.json: not a vocabulary file: no "tokens" list'),
    (b'{"tokens": "abc"}', 'vocab.json: not a vocabulary file: "tokens" is not a list'),
    (json.dumps({"tokens": ["a", "b"]}).encode(), "vocab.json: not a vocabulary file: a vocabulary starts with"),
])
def test_bad_files_raise_one_line_input_errors(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message) as error:
        Vocabulary.load(path)
    assert "\n" not in str(error.value)


def test_counts_extra_words_and_another_tokenizer(tmp_path):
    vocabulary = Vocabulary.build(CAPTIONS, min_count=2, tokenizer="alnum", extra_words=["zebra", "dog", "okapi"])
    # The kept training words, then the extra words not already kept, each
    # with its training count (0 when never seen).
    assert vocabulary.tokens[2:] == ["a", "dog", "runs", "zebra", "okapi"]
    counts = dict(zip(vocabulary.tokens, vocabulary.counts))
    assert counts["<pad>"] == 0 and counts["zebra"] == 1 and counts["okapi"] == 0 and counts["dog"] >= 2
    vocabulary.save(tmp_path / "vocab.json")
    loaded = Vocabulary.load(tmp_path / "vocab.json")
    assert (loaded.tokens, loaded.counts) == (vocabulary.tokens, vocabulary.counts)
    with pytest.raises(ValueError, match="counts"):
        Vocabulary(vocabulary.tokens, vocabulary.counts[:-1])
