"""The image-features record (`data.image_features`): one name per kind,
the file stems they read, the old names read as their kinds (with a
one-line note on the command line), and the record's checks."""

import logging

import numpy as np
import pytest

from common.errors import InputError
from data import splits
from data.image_features import KINDS, ImageFeatures, file_stems, kind_name, option_kind


def test_each_kind_reads_its_file_stem():
    assert KINDS == {"fc": "ims", "fne": "stages"}
    assert file_stems("fc") == ("ims",) and file_stems("fne") == ("stages",)
    assert file_stems("fc+fne") == ("ims", "stages")
    # A collection's own feature names are read as they are.
    assert file_stems("resnet152+audio") == ("resnet152", "audio")
    assert file_stems("fne+fc") == ("stages", "ims")


@pytest.mark.parametrize("name, kind", [
    ("fc", "fc"), ("fne", "fne"), ("ims", "fc"), ("stages", "fne"), ("ims+stages", "fc+fne"), ("stages+fc", "fne+fc"),
    ("resnet152", "resnet152"),
])
def test_old_names_read_as_their_kinds(name, kind):
    assert kind_name(name) == kind


@pytest.mark.parametrize("name", ["", "fc+", "+fne", "fc++fne"])
def test_an_empty_part_is_refused(name):
    with pytest.raises(InputError, match="expected a kind or kinds joined by '\\+'"):
        kind_name(name)


def test_an_old_name_on_the_command_line_gets_a_one_line_note(caplog):
    with caplog.at_level(logging.WARNING):
        assert option_kind("fc") == "fc"
        assert caplog.messages == []
        assert option_kind("ims+stages") == "fc+fne"
    assert caplog.messages == ["--image-features ims+stages is the old name of fc+fne: write --image-features fc+fne"]


def test_a_data_config_holds_the_kind_whatever_name_it_was_given():
    assert splits.DataConfig().image_features == "fc"
    assert splits.DataConfig(image_features="stages").image_features == "fne"


def test_a_kind_reads_its_files(tmp_path):
    """`fc+fne` reads `{split}_ims.npy` and `{split}_stages.npy` side by side."""
    (tmp_path / "test_caps.txt").write_text("".join(f"caption {i}\n" for i in range(10)))
    ims, stages = np.arange(6, dtype=np.float32).reshape(2, 3), -np.arange(8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "test_ims.npy", ims)
    np.save(tmp_path / "test_stages.npy", stages)
    np.testing.assert_array_equal(splits.load_split(tmp_path, "test", "fne").images, stages)
    np.testing.assert_array_equal(splits.load_split(tmp_path, "test", "fc+fne").images, np.concatenate([ims, stages], 1))
    assert splits.feature_files(tmp_path, "test", "fc+fne") == [tmp_path / "test_ims.npy", tmp_path / "test_stages.npy"]


def test_the_record_round_trips_and_is_checked():
    record = ImageFeatures("fc", 1280, {"backbone": "efficientnet-lite0"})
    assert ImageFeatures.from_dict(record.to_dict(), "x.json") == record
    assert ImageFeatures.from_dict({"kind": "ims", "width": 4, "provenance": None}, "x.json") == ImageFeatures("fc", 4)
    for bad in ({"kind": "fc", "width": 4}, {"kind": 1, "width": 4, "provenance": None},
                {"kind": "fc", "width": True, "provenance": None}, {"kind": "fc", "width": 4, "provenance": "x"}, []):
        with pytest.raises(InputError, match="^x.json: image_features"):
            ImageFeatures.from_dict(bad, "x.json")
