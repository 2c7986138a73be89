import html.parser
import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import EMBEDDED_IMAGES as IMAGES
from tests.helpers import EMBEDDED_TEXT
from tools import show_retrievals


class _Page(html.parser.HTMLParser):
    """Collects the queries, results, image sources and placeholders of a page."""

    def __init__(self):
        super().__init__()
        self.queries = []  # (kind, query index, [(result index, match)])
        self.sources = []
        self.pictures = []  # ("img" or "placeholder", "query" or "thumbnail", image id), in page order
        self.placeholder_texts = []
        self.texts = {}
        self._result = None
        self._placeholder = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        css = attrs.get("class", "").split()
        if tag == "section":
            kind = css[0]
            self.queries.append((kind, int(attrs["data-image" if kind == "image-query" else "data-caption"]), []))
        elif "result" in css:
            index = int(attrs["data-caption"] if tag == "li" else attrs["data-image"])
            self.queries[-1][2].append((index, int(attrs["data-match"])))
            self._result = index if tag == "li" else None
            if tag == "li":  # a caption's text (image results share the index space)
                self.texts[index] = ""
        if tag == "img":
            self.sources.append(attrs["src"])
            self.pictures.append(("img", css[0], attrs["alt"]))
        if tag == "div" and "not-found" in css:
            self.pictures.append(("placeholder", css[0], attrs["title"]))
            self.placeholder_texts.append("")
            self._placeholder = True

    def handle_data(self, data):
        if self._result is not None:
            self.texts[self._result] += data
        if self._placeholder:
            self.placeholder_texts[-1] += data

    def handle_endtag(self, tag):
        if tag == "li":
            self._result = None
        if tag == "div":
            self._placeholder = False


def parse(path):
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.mark.parametrize("source", ["--model-dir", "--saved-model"])
def test_page_shows_the_models_top_k_with_existing_images(trained, sample_data, source, tmp_path, capsys):
    from data import splits
    from engine import scoring

    model = str(trained if source == "--model-dir" else trained / "saved_model")
    out = tmp_path / "page.html"
    argv = [source, model, "--data", str(sample_data), "--images", str(IMAGES), "--queries", "3", "--k", "4",
            "--out", str(out), "--json"]
    assert show_retrievals.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    page = parse(out)

    split = splits.load_split(sample_data, "test", "ims")
    scorer = scoring.CheckpointScorer.from_model_dir(trained)
    sims = scorer.similarity(scorer.encode_images(split.images), scorer.encode_texts(split.captions))
    kinds = [kind for kind, _, _ in page.queries]
    assert kinds == ["image-query"] * 3 + ["caption-query"] * 3
    matches = {"image-query": 0, "caption-query": 0}
    for kind, query, results in page.queries:
        scores = sims[query] if kind == "image-query" else sims[:, query]
        shown = [index for index, _ in results]
        assert len(shown) == 4
        # The top 4 by the model's own scores (ties aside: the scores shown are those of the ranks).
        np.testing.assert_allclose(np.sort(scores[shown])[::-1], np.sort(scores)[::-1][:4], rtol=1e-4, atol=1e-6)
        owner = [split.caption_image[i] == query for i in shown] if kind == "image-query" else \
            [i == split.caption_image[query] for i in shown]
        assert [bool(m) for _, m in results] == owner
        matches[kind] += any(owner)
        if kind == "image-query":
            assert all(page.texts[i].replace("✓ ", "").startswith(split.captions[i]) for i in shown)
    assert (summary["image_queries_with_a_match"], summary["caption_queries_with_a_match"]) == (
        matches["image-query"], matches["caption-query"])
    # 3 query images and 3 x 4 result thumbnails, each copied next to the page.
    assert len(page.sources) == 15
    for src in page.sources:
        assert (out.parent / src).is_file() and (IMAGES / src.split("/")[-1]).is_file()


def test_without_images_the_page_names_them(trained, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert show_retrievals.main(["--model-dir", str(trained), "--queries", "2", "--k", "3", "--out", str(out)]) == 0
    page = parse(out)
    assert page.sources == [] and len(page.queries) == 4 and not (tmp_path / "page_files").exists()
    # Without --json, the summary is a sentence.
    matches = [sum(match for _, match in results) > 0 for _, _, results in page.queries]
    assert capsys.readouterr().out == (f"wrote {out}: {sum(matches[:2])} of 2 image queries have one of their captions "
                                       f"in their top 3, {sum(matches[2:])} of 2 caption queries their image\n")


@pytest.mark.parametrize("argv, message", [
    (["--images", "/nonexistent"], "not a directory"),
    (["--images", str(EMBEDDED_TEXT)], "none of the split's 1000 images is there (e.g. no file '"),
    (["--out", "/nonexistent/page.html"], "does not exist"),
])
def test_bad_arguments_are_one_line_errors(trained, argv, message, tmp_path, capsys):
    args = ["--model-dir", str(trained), "--out", str(tmp_path / "page.html"), *argv]
    assert show_retrievals.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert not (tmp_path / "page.html").exists()


def query_rows(page):
    """(image query rows, caption query rows) of a parsed page."""
    return ([query for kind, query, _ in page.queries if kind == "image-query"],
            [query for kind, query, _ in page.queries if kind == "caption-query"])


def test_a_folder_with_some_of_the_images_shows_them_and_placeholders(trained, sample_data, tmp_path, capsys):
    """3 of the 8 images in the folder: exit 0, pictures of those 3, a placeholder naming each other shown image,
    and all queries among those with a picture."""
    from data import splits

    split = splits.load_split(sample_data, "test", "ims")
    images = tmp_path / "some"
    images.mkdir()
    kept = split.image_ids[2:5]
    for name in kept:
        (images / name).write_bytes((IMAGES / name).read_bytes())
    out = tmp_path / "page.html"
    argv = ["--model-dir", str(trained), "--data", str(sample_data), "--images", str(images), "--queries", "3",
            "--k", "8", "--out", str(out)]
    assert show_retrievals.main(argv) == 0
    assert f"3 of 8 test images found in {images}; the others are shown as placeholders" in \
        capsys.readouterr().err.splitlines()
    page = parse(out)

    image_queries, caption_queries = query_rows(page)
    assert image_queries == [2, 3, 4]
    assert len(caption_queries) == 3 and all(split.caption_image[query] in (2, 3, 4) for query in caption_queries)
    # 3 query pictures, then 8 results (the whole split) for each caption query: 3 pictures and 5 placeholders.
    assert [(shape, css) for shape, css, _ in page.pictures[:3]] == [("img", "query")] * 3
    assert sorted(page.pictures[3:]) == sorted([("img", "thumbnail", name) for name in kept] * 3 + [
        ("placeholder", "thumbnail", name) for name in split.image_ids if name not in kept] * 3)
    assert all(text.endswith(f"not in {images}") for text in page.placeholder_texts)
    for src in page.sources:
        assert (out.parent / src).read_bytes() == (images / src.split("/")[-1]).read_bytes()
    assert sorted(p.name for p in (tmp_path / "page_files").iterdir()) == sorted(kept)


def test_the_embedded_sample_gives_every_query_a_picture(trained, tmp_path, capsys):
    """The 8 embedded JPEGs of the 1000 test images (rows 0-7): the 8 image queries are those pictures,
    and the 8 caption queries are captions of them."""
    from data.embedded import EMBEDDED_DATA

    out = tmp_path / "page.html"
    argv = ["--model-dir", str(trained), "--data", EMBEDDED_DATA, "--images", str(IMAGES), "--out", str(out)]
    assert show_retrievals.main(argv) == 0
    assert f"8 of 1000 test images found in {IMAGES}; the others are shown as placeholders" in \
        capsys.readouterr().err.splitlines()
    page = parse(out)
    image_queries, caption_queries = query_rows(page)
    assert image_queries == list(range(8)) and len(caption_queries) == 8
    assert all(query // 5 < 8 for query in caption_queries)  # 5 captions an image, in image order
    ids = (Path(EMBEDDED_DATA) / "test_ids.txt").read_text().split()
    assert [picture for picture in page.pictures if picture[1] == "query"] == [("img", "query", name) for name in ids[:8]]
    assert all(name in ids[:8] for shape, _, name in page.pictures if shape == "img")
    assert all(name not in ids[:8] for shape, _, name in page.pictures if shape == "placeholder")


def test_choose_queries_draws_the_preferred_first():
    preferred = np.zeros(100, bool)
    preferred[[3, 50, 97]] = True
    rng = np.random.default_rng(0)
    two = show_retrievals.choose_queries(rng, preferred, 2)
    assert len(two) == 2 and set(two) <= {3, 50, 97} and two == sorted(two)
    five = show_retrievals.choose_queries(rng, preferred, 5)
    assert len(set(five)) == 5 and {3, 50, 97} <= set(five) and five == sorted(five)
    assert show_retrievals.choose_queries(rng, preferred, 200) == list(range(100))
    # With every item preferred, the draw of the whole range as before: a seed keeps its queries.
    assert show_retrievals.choose_queries(np.random.default_rng(7), np.ones(100, bool), 8) == \
        sorted(np.random.default_rng(7).choice(100, 8, replace=False).tolist())


@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "argument --seed: must be at least 0; got -1"),
    (["--queries", "0"], "argument --queries: must be at least 1; got 0"),
    (["--k", "-3"], "argument --k: must be at least 1; got -3"),
    (["--k", "five"], "argument --k: expected an integer; got 'five'"),
])
def test_bad_numbers_are_usage_errors(argv, message, tmp_path, capsys):
    """Range-checked by argparse: exit 2 with its one-line error, before any model is loaded."""
    with pytest.raises(SystemExit) as stop:
        show_retrievals.main(["--model-dir", str(tmp_path / "no-model"), "--out", str(tmp_path / "page.html"), *argv])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("layout", ["precomp", "collections"])
def test_ids_with_a_folder_or_without_extension_show_their_images(trained, unusual_ids, layout, tmp_path, capsys):
    """`pics/x.jpg` (a folder) and `pics/x` (a collection item, no extension) both find images/pics/x.jpg."""
    from data import splits

    split = splits.load_split(unusual_ids[layout], "test")
    expected = "pics/" + (unusual_ids["ids"][0] if layout == "precomp" else unusual_ids["ids"][0][: -len(".jpg")])
    assert split.image_ids[0] == expected
    out = tmp_path / "page.html"
    argv = ["--model-dir", str(trained), "--data", str(unusual_ids[layout]), "--images", str(unusual_ids["images"]),
            "--queries", "2", "--k", "3", "--out", str(out)]
    assert show_retrievals.main(argv) == 0
    page = parse(out)
    assert len(page.sources) == 2 + 2 * 3
    for src in page.sources:
        assert src.startswith("page_files/pics/") and src.endswith(".jpg")
        name = src.split("/")[-1]
        assert (out.parent / src).read_bytes() == (IMAGES / name).read_bytes()


def test_a_two_stage_run_shows_its_two_stage_ranking(trained_rerank, trained, trained_mcnn_ens, short_test_data, k=3):
    """Against a NumPy re-ranking of each stage's own matrix: the first stage's 3 best by the second stage's
    scores, then the rest in the first stage's order at min(listed) - 1 - j (lists of 3 hold no near-ties:
    tests/models/test_rerank.py)."""
    from data import splits
    from engine import evaluation
    from engine.scoring import CheckpointScorer

    # The first 50 test images: their 250 captions are one batch of each scorer's text encoder (one trace of it).
    split = splits.load_split(short_test_data, "test", "ims").first_images(50)

    def matrix(model_dir):
        scorer = CheckpointScorer.from_model_dir(model_dir)
        return evaluation.score_matrix(scorer.similarity, *evaluation.encode_split(scorer, split))

    first, second = matrix(trained), matrix(trained_mcnn_ens)
    image_queries, caption_queries = [0, 7, 42], [3, 125, 249]
    i2t, t2i = show_retrievals.retrieve(CheckpointScorer.from_model_dir(trained_rerank, [f"model.k={k}"]), split,
                                        image_queries, caption_queries, 5)
    for got, first_rows, second_rows in ((i2t, first[image_queries], second[image_queries]),
                                         (t2i, first[:, caption_queries].T, second[:, caption_queries].T)):
        for results, first_row, second_row in zip(got, first_rows, second_rows):
            order = np.argsort(-first_row, kind="stable")
            listed = order[:k][np.argsort(-second_row[order[:k]], kind="stable")]
            expected = [*((j, second_row[j]) for j in listed),
                        *((j, second_row[listed].min() - 1.0 - n) for n, j in enumerate(order[k:5]))]
            assert [j for j, _ in results] == [j for j, _ in expected]
            np.testing.assert_allclose([score for _, score in results], [score for _, score in expected],
                                       rtol=1e-5, atol=1e-5)
