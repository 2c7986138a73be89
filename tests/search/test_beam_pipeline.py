"""Tests of `search.beam_pipeline`'s parts, outside a pipeline: the model
handler encoding a batch of image paths (the unreadable and undecodable
ones as their reasons), the shard of a path (a hash every process
computes alike), and a group written as its shard. (The pipeline on the
DirectRunner: tests/search/test_beam.py.) They need Apache Beam
(`needs_beam`)."""

import importlib

import numpy as np
import pytest

from search import store
from search.model import SearchModel


@pytest.fixture
def beam_pipeline(needs_beam):
    return importlib.import_module("search.beam_pipeline")


def test_the_shard_of_a_path_is_its_crc32_modulo_the_shards(beam_pipeline):
    # 0xCBF43926 is CRC-32's check value, the CRC of "123456789".
    assert beam_pipeline.shard_of("123456789", 10) == 0xCBF43926 % 10 == 2
    shards = [beam_pipeline.shard_of(f"photos/{k}.jpg", 4) for k in range(200)]
    assert set(shards) == {0, 1, 2, 3}  # every shard gets some of 200 paths


def test_a_group_is_written_as_its_shard_sorted_by_path(beam_pipeline, tmp_path):
    from apache_beam.ml.inference.base import PredictionResult

    results = [PredictionResult("b/x.png", np.full(3, 2.0, np.float32)), PredictionResult("a.jpg", "unreadable (gone)"),
               PredictionResult("a.png", np.full(3, 1.0, np.float32))]
    beam_pipeline.write_group((7, results), tmp_path, [3])
    arrays = store.read_shard(tmp_path / "shard-000007.npz")
    assert arrays["ids"].tolist() == ["a.png", "b/x.png"]
    np.testing.assert_array_equal(arrays["encodings"], [[1.0] * 3, [2.0] * 3])
    assert arrays["skipped"].tolist() == ["a.jpg"] and arrays["skip_reasons"].tolist() == ["unreadable (gone)"]

    beam_pipeline.write_group((0, [PredictionResult("c.jpg", "not a decodable JPEG/PNG image (x)")]), tmp_path, [3])
    arrays = store.read_shard(tmp_path / "shard-000000.npz")
    assert arrays["encodings"].shape == (0, 3) and arrays["ids"].tolist() == [] and arrays["skipped"].tolist() == ["c.jpg"]


def test_the_handler_encodes_a_batch_and_gives_the_reasons_of_the_skipped(beam_pipeline, exports, photos):
    handler = beam_pipeline.ImageBytesHandler(exports["cosine"], photos, batch_size=5)
    assert handler.batch_elements_kwargs() == {"min_batch_size": 1, "max_batch_size": 5}
    model = handler.load_model()
    assert isinstance(model, SearchModel)
    batch = ["p1.png", "a/broken.jpg", "missing.png", "p0.png"]
    results = handler.run_inference(batch, model)
    assert [result.example for result in results] == batch
    expected = model.encode_image_bytes([(photos / "p1.png").read_bytes(), (photos / "p0.png").read_bytes()])
    np.testing.assert_allclose(np.stack([results[0].inference, results[3].inference]), expected, rtol=1e-6)
    assert results[1].inference.startswith("not a decodable JPEG/PNG image (")
    assert results[2].inference.startswith("unreadable (")
