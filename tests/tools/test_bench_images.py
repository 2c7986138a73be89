import json

import pytest
import tensorflow as tf

from tools import bench_images


def json_documents(text):
    """The JSON values printed one after another in `text`."""
    decoder, values, position = json.JSONDecoder(), [], 0
    while text[position:].strip():
        value, position = decoder.raw_decode(text, position + len(text[position:]) - len(text[position:].lstrip()))
        values.append(value)
    return values


def test_bench_times_the_image_signature_of_an_export(trained, tmp_path, capsys):
    argv = ["--saved-model", str(trained / "saved_model"), "--batch-sizes", "1,3", "--repeats", "1",
            "--record", str(tmp_path / "images.json")]
    assert bench_images.main(argv) == 0
    reports = json_documents(capsys.readouterr().out)
    assert [report["batch"] for report in reports] == [1, 3]
    for report in reports:
        assert set(report) == {"saved_model", "backbone", "views", "batch", "seconds_per_batch", "images_per_second",
                               "export_mb"}
        assert (report["backbone"], report["views"]) == ("efficientnet-lite0", 2)
        assert report["images_per_second"] > 0 and report["export_mb"] > 14  # the backbone's weights alone are 14 MB
    record = json.loads((tmp_path / "images.json").read_text())
    assert record["reports"] == reports
    # The export, outside the repository, is <dir>/saved_model: no folder of this machine.
    assert record["command"] == "python -m tools.bench_images --saved-model '<dir>/saved_model' --batch-sizes 1,3 --repeats 1"
    assert {report["saved_model"] for report in reports} == {"<dir>/saved_model"}


class FeaturesOnly(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="image_features")])
    def encode_image(self, image_features):
        return image_features


@pytest.mark.parametrize("problem", ["missing", "no image signature", "no images", "batch sizes"])
def test_bad_input_is_one_line(tmp_path, capsys, problem):
    saved_model, images, batch_sizes = tmp_path / "export", bench_images.SAMPLE_IMAGES, "1,64"
    if problem != "missing":
        module = FeaturesOnly()
        tf.saved_model.save(module, str(saved_model), signatures={"encode_image": module.encode_image})
    if problem == "no images":
        images = tmp_path / "empty"
        images.mkdir()
    if problem == "batch sizes":
        batch_sizes = "1,0"
    argv = ["--saved-model", str(saved_model), "--images", str(images), "--batch-sizes", batch_sizes]
    assert bench_images.main(argv) == 2
    err = capsys.readouterr().err
    expected = {
        "missing": f"error: --saved-model {saved_model}: not a SavedModel (no saved_model.pb)",
        "no image signature": f"error: --saved-model {saved_model}: has no encode_image_bytes signature",
        "no images": f"error: --images {images}: no JPEG or PNG files",
        "batch sizes": "error: --batch-sizes 1,0: must be at least 1; got 0",
    }[problem]
    assert err.startswith(expected) and err.count("\n") == 1, err
