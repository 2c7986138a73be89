import json

import pytest

from common.errors import InputError
from data import provenance
from tests.helpers import EMBEDDED_DATA


def test_the_embedded_features_record_how_they_were_made():
    recorded = provenance.read(EMBEDDED_DATA)
    # From data/f8k_precomp/README.md: EfficientNet-Lite0, ImageNet weights,
    # 224x224 RGB scaled as (x - 127) / 128, the image and its mirror averaged,
    # the global average of the 1280-d head; the per-stage file beside it.
    assert (recorded["backbone"], recorded["weights"], recorded["crops"]) == ("efficientnet-lite0", "imagenet", 2)
    assert recorded["input"]["scaling"] == "(x - 127) / 128"
    assert "mirror" in recorded["input"]["views"] and "224x224" in recorded["input"]["views"]
    assert recorded["ims"] == "global average of the head (1280)"
    assert "stages.json" in recorded["stages"] and "outside this repository" in recorded["made"]
    assert provenance.same_features(recorded, provenance.describe("efficientnet-lite0", "imagenet", 2, stages=False))


def write(folder, recorded):
    folder.mkdir()
    (folder / "provenance.json").write_text(json.dumps(recorded))
    return folder


def test_check_same_accepts_the_same_features_with_or_without_stages(tmp_path):
    run = provenance.describe("vgg16", "imagenet", 10, stages=False)
    folder = write(tmp_path / "f", provenance.describe("vgg16", "imagenet", 10, stages=True))
    provenance.check_same(run, "run/config.json", folder)
    assert provenance.missing_notice(run, "run/config.json", folder) is None


def test_check_same_refuses_other_features_naming_both_files(tmp_path):
    run = provenance.describe("vgg16", "imagenet", 10, stages=False)
    folder = write(tmp_path / "f", provenance.describe("vgg16", "imagenet", 1, stages=False))
    with pytest.raises(InputError) as error:
        provenance.check_same(run, "run/config.json", folder)
    message = str(error.value)
    assert message.startswith(f"{folder / 'provenance.json'}: ") and "run/config.json" in message
    assert "crops 1 vs 10" in message and "\n" not in message


def test_a_folder_without_provenance_gets_a_notice_and_an_old_run_is_not_checked(tmp_path):
    run = provenance.describe("resnet152", "imagenet", 10, stages=False)
    provenance.check_same(run, "run/config.json", tmp_path)
    notice = provenance.missing_notice(run, "run/config.json", tmp_path)
    assert notice.startswith(f"notice: {tmp_path / 'provenance.json'} does not exist") and "run/config.json" in notice
    other = write(tmp_path / "f", provenance.describe("vgg16", "imagenet", 1, stages=False))
    provenance.check_same(None, "old/config.json", other)
    assert provenance.missing_notice(None, "old/config.json", tmp_path) is None


@pytest.mark.parametrize("text, problem", [("{", "not valid JSON"), ('{"backbone": "x"}', "not a feature provenance")])
def test_unreadable_provenance_is_one_line(tmp_path, text, problem):
    (tmp_path / "provenance.json").write_text(text)
    with pytest.raises(InputError, match=f"^{tmp_path / 'provenance.json'}: {problem}"):
        provenance.read(tmp_path)
