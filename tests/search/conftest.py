"""Fixtures of the search tests: hand-built exports (`hand_exports`), a
folder of images to index, and Apache Beam where its tests need it."""

import os
import shutil

import pytest

from tests.helpers import EMBEDDED_IMAGES
from tests.search.hand_exports import HandExport, png_bytes, save


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    """{name: SavedModel path}: cosine, dot, pairwise, cosine-other (other
    weights), text-only (no encode_image_bytes)."""
    root = tmp_path_factory.mktemp("exports")
    return {
        "cosine": save(HandExport("cosine"), root / "cosine"),
        "dot": save(HandExport("dot"), root / "dot"),
        "pairwise": save(HandExport("pairwise"), root / "pairwise"),
        "cosine-other": save(HandExport("cosine", seed=1), root / "cosine-other"),
        "text-only": save(HandExport("cosine", images=False), root / "text-only"),
    }


@pytest.fixture(scope="session")
def photos(tmp_path_factory):
    """A folder of 11 images: the 8 embedded Flickr8k JPEGs (4 in `a/`, 4 in
    `b/c/`), 3 PNGs (one `.PNG`), and files that must be left out or
    skipped: a text file, a `.jpg` that is no image, an empty `.jpeg`."""
    root = tmp_path_factory.mktemp("photos") / "photos"
    jpegs = sorted(EMBEDDED_IMAGES.glob("*.jpg"))
    for k, jpeg in enumerate(jpegs):
        folder = root / ("a" if k < 4 else "b/c")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(jpeg, folder / jpeg.name)
    for k, name in enumerate(["p0.png", "p1.png", "b/P2.PNG"]):
        (root / name).write_bytes(png_bytes(k))
    (root / "notes.txt").write_text("not an image")
    (root / "a" / "broken.jpg").write_bytes(b"this is not a JPEG")
    (root / "empty.jpeg").write_bytes(b"")
    return root


@pytest.fixture
def interrupt_second_batch(monkeypatch):
    """Makes indexing raise KeyboardInterrupt at its second batch of items
    (as Ctrl-C would); returns the real `build.Source.encode`, to put back."""
    from search import build  # imported here: the other fixtures need no search code

    real_encode = build.Source.encode
    calls = []

    def encode(source, ids):
        calls.append(ids)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_encode(source, ids)

    monkeypatch.setattr(build.Source, "encode", encode)
    return real_encode


@pytest.fixture
def needs_beam():
    """Skips the calling test without Apache Beam (requirements-beam.txt's
    environment of its own), fails it there under ZOO_REQUIRE_BEAM=1 (CI's
    Beam environment)."""
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        reason = "needs Apache Beam, in its own environment: pip install -r requirements-beam.txt"
        if os.environ.get("ZOO_REQUIRE_BEAM") == "1":
            pytest.fail(f"ZOO_REQUIRE_BEAM=1: {reason}")
        pytest.skip(reason)
