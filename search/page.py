"""A search's results as an HTML page of thumbnails (`query --html`)."""

import html
from pathlib import Path

from common.files import atomic_write

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:80em}"
    ".results{display:flex;flex-wrap:wrap;gap:.8em}figure{margin:0;width:180px;text-align:center}"
    "img{width:180px;height:180px;object-fit:cover}figcaption{font-size:80%;word-break:break-all}"
    "img.query{width:240px;height:240px}li{margin:.3em 0}.score{color:#888;font-size:80%}"
)


def write_page(path, index_path, query, hits, kind):
    """Writes (atomically) the page of one query's `hits` (`search.index.Hit`)
    in an index of `kind`: thumbnails of the images found for a text, or the
    query image and the captions found. Images are linked by absolute
    file URLs, so the page may be moved on the same machine."""
    if kind == "images":
        heading = f"<p class=\"query\">{html.escape(query)}</p>"
        results = "".join(
            f'<figure class="result" data-rank="{rank}" data-score="{hit.score:.6g}">'
            f'<img src="{html.escape(Path(hit.item).resolve().as_uri())}" alt="{html.escape(hit.id)}" '
            f'title="{html.escape(hit.id)}"><figcaption>{rank}. {html.escape(hit.id)} '
            f'<span class="score">{hit.score:.3f}</span></figcaption></figure>'
            for rank, hit in enumerate(hits, start=1))
        body = f'{heading}<div class="results">{results}</div>'
    else:
        heading = (f'<img class="query" src="{html.escape(Path(query).resolve().as_uri())}" '
                   f'alt="{html.escape(str(query))}">')
        results = "".join(
            f'<li class="result" data-rank="{rank}" data-score="{hit.score:.6g}">{html.escape(hit.item)} '
            f'<span class="score">line {html.escape(hit.id)}, {hit.score:.3f}</span></li>'
            for rank, hit in enumerate(hits, start=1))
        body = f"{heading}<ol>{results}</ol>"
    title = f"search of {index_path}"
    text = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>", body, "</body></html>", ""])
    atomic_write(path, lambda file: file.write(text.encode("utf-8")))
