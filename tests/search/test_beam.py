"""`python -m search.beam`: the Apache Beam pipeline (DirectRunner, 2
worker processes) builds the index the single-process build builds: the
same ids, the same skipped files, the same encodings to float tolerance.

Apache Beam lives in an environment of its own (requirements-beam.txt):
where it is not installed these tests are skipped, unless
ZOO_REQUIRE_BEAM=1 (CI's Beam environment), which fails them instead
(`needs_beam`, tests/search/conftest.py).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from search import Index, beam
from search.model import SearchModel
from tests.helpers import REPO, shared_data

DIRECT_2_WORKERS = ["--runner", "DirectRunner", "--direct_num_workers", "2", "--direct_running_mode",
                    "multi_processing"]


def beam_index(saved_model, images, out, *options):
    """Runs the command as a user would, in a process of its own (the
    workers import the repository's code from PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-m", "search.beam", "--saved-model", str(saved_model), "--images",
                           str(images), "--out", str(out), *options, *DIRECT_2_WORKERS],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def shard_contents(folder):
    """{id: encoding} and the sorted skipped paths of an index, read from
    its shard files with NumPy alone."""
    encodings, skipped = {}, []
    for path in sorted(folder.glob("shard-*.npz")):
        with np.load(path) as shard:
            encodings.update(zip(shard["ids"].tolist(), shard["encodings"]))
            skipped += shard["skipped"].tolist()
    return encodings, sorted(skipped)


def assert_same_index(beam_built, single, atol):
    beam_encodings, beam_skipped = shard_contents(beam_built)
    single_encodings, single_skipped = shard_contents(single)
    assert sorted(beam_encodings) == sorted(single_encodings)
    assert beam_skipped == single_skipped
    ids = sorted(single_encodings)
    np.testing.assert_allclose(np.stack([beam_encodings[i] for i in ids]), np.stack([single_encodings[i] for i in ids]),
                               rtol=1e-5, atol=atol)


def test_without_apache_beam_the_command_says_how_to_install_it(exports, photos, tmp_path, capsys):
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Apache Beam is installed")
    assert beam.main(["--saved-model", str(exports["cosine"]), "--images", str(photos), "--out",
                      str(tmp_path / "i")]) == 2
    assert capsys.readouterr().err.strip() == ("error: python -m search.beam needs Apache Beam (No module named "
                                               "'apache_beam'): pip install -r requirements-beam.txt")


def test_the_beam_command_checks_its_inputs_before_the_pipeline(needs_beam, exports, photos, tmp_path, capsys):
    argv = ["--saved-model", str(exports["text-only"]), "--images", str(photos), "--out", str(tmp_path / "i")]
    assert beam.main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --images: the SavedModel {exports['text-only']} takes precomputed image features only (it has no "
        "encode_image_bytes signature); export a run whose features have a known backbone to index or query with "
        "images")
    (tmp_path / "file").write_text("mine")
    assert beam.main([*argv[:4], "--out", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err.strip() == f"error: --out {tmp_path / 'file'}: exists and is not an index (a file)"
    assert not (tmp_path / "i.partial").exists()


def test_the_beam_index_of_a_folder_equals_the_single_process_one(needs_beam, exports, photos, tmp_path):
    done = beam_index(exports["cosine"], photos, tmp_path / "beam.index", "--shard-items", "3")
    assert done.stdout == f"{tmp_path / 'beam.index'}: 11 images, 2 skipped (listed in index.json)\n"
    assert len(list((tmp_path / "beam.index").glob("shard-*.npz"))) > 1
    single = Index.build(exports["cosine"], tmp_path / "single.index", images=photos)
    assert_same_index(tmp_path / "beam.index", single.folder, atol=1e-6)
    beam = Index.open(tmp_path / "beam.index")
    assert sorted(beam.manifest["skipped"]) == sorted(single.manifest["skipped"])
    queries = ["a dog runs on the beach", "two children"]
    for got, expected in zip(beam.search(queries, k=5), single.search(queries, k=5)):
        assert [hit.id for hit in got] == [hit.id for hit in expected]


@pytest.fixture
def image_export(trained):
    """The tiny `gru` run's export, whose image signature runs the
    EfficientNet-Lite0 backbone."""
    export = trained / "saved_model"
    assert SearchModel(export).takes_images
    return export


def test_the_beam_index_of_the_1000_flickr8k_test_jpegs_equals_the_single_process_one(needs_beam, image_export,
                                                                                       tmp_path):
    images = shared_data("flickr8k_images_test")
    beam_index(image_export, images, tmp_path / "beam.index")
    single = Index.build(image_export, tmp_path / "single.index", images=images)
    assert len(single) == 1000
    assert_same_index(tmp_path / "beam.index", single.folder, atol=1e-5)
