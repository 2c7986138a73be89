"""Tests of `search.page`: the HTML page of a query's results, parsed back
with the standard library's parser: the hits in rank order with their
scores, images linked by absolute file URLs, every name escaped. (The page
shown in a browser: tests/search/test_main.py.)"""

import types
from html.parser import HTMLParser

from search.page import write_page


class Elements(HTMLParser):
    """The page's start tags with their attributes, and its text."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def hit(item, id, score):
    return types.SimpleNamespace(item=item, id=id, score=score)


def test_an_image_search_page_shows_the_hits_in_rank_order(tmp_path):
    (tmp_path / "a").mkdir()
    hits = [hit(str(tmp_path / "a" / "dog <1>.jpg"), 'a/dog <1>.jpg', 0.91234567),
            hit(str(tmp_path / "b&c.png"), "b&c.png", -0.5)]
    page = tmp_path / "page.html"
    write_page(page, "photos.index", 'a dog & "a cat" <b>', hits, "images")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<b>" not in text  # the query is escaped, not markup
    parsed = Elements(text)
    figures = [attrs for tag, attrs in parsed.tags if tag == "figure"]
    assert [(f["data-rank"], f["data-score"]) for f in figures] == [("1", "0.912346"), ("2", "-0.5")]
    images = [attrs for tag, attrs in parsed.tags if tag == "img"]
    assert [image["src"] for image in images] == [(tmp_path / "a" / "dog <1>.jpg").as_uri(),
                                                  (tmp_path / "b&c.png").as_uri()]
    assert [image["alt"] for image in images] == ["a/dog <1>.jpg", "b&c.png"]
    words = " ".join(" ".join(parsed.text).split())
    assert 'a dog & "a cat" <b>' in words and "search of photos.index" in words
    assert "1. a/dog <1>.jpg 0.912" in words and "2. b&c.png -0.500" in words


def test_a_caption_search_page_shows_the_query_image_and_the_captions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "page.html"
    write_page(page, "captions.index", "query.jpg", [hit("a <dog> runs", "12", 0.5), hit("two cats", "3", 0.25)],
               "captions")
    parsed = Elements(page.read_text(encoding="utf-8"))
    [query] = [attrs for tag, attrs in parsed.tags if tag == "img"]
    assert query["src"] == (tmp_path / "query.jpg").as_uri()  # relative to the folder it was run from
    items = [attrs for tag, attrs in parsed.tags if tag == "li"]
    assert [(item["data-rank"], item["data-score"]) for item in items] == [("1", "0.5"), ("2", "0.25")]
    words = " ".join(" ".join(parsed.text).split())
    assert "a <dog> runs line 12, 0.500" in words and "two cats line 3, 0.250" in words


def test_the_page_replaces_an_old_one_whole(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("old")
    write_page(page, "i", "q", [], "images")
    assert "old" not in page.read_text() and sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
