"""`common.wording`: counted nouns and lengths of time."""

import pytest

from common.wording import counted, duration


@pytest.mark.parametrize("number, noun, options, text", [
    (1, "epoch", {}, "1 epoch"),
    (0, "epoch", {}, "0 epochs"),
    (2, "epoch", {}, "2 epochs"),
    (1234, "step", {"spec": ","}, "1,234 steps"),
    (1, "step", {"spec": ","}, "1 step"),
    (1.0, "core", {"spec": "g"}, "1 core"),
    (2.5, "core", {"spec": "g"}, "2.5 cores"),
    (1, "query", {"plural": "queries"}, "1 query"),
    (3, "query", {"plural": "queries"}, "3 queries"),
])
def test_the_noun_is_plural_unless_the_number_is_one(number, noun, options, text):
    assert counted(number, noun, **options) == text


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (89, "89 s"), (90, "2 min"), (5399, "90 min"), (5400, "1.5 h")])
def test_durations_read_as_seconds_minutes_or_hours(seconds, text):
    assert duration(seconds) == text
