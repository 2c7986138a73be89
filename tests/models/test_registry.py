"""`models.registry`: which module registers which model (looked up
without importing the families), and `ModelSpec.experiment`: the kinds
of image features a model reads (`train.py --image-features`)."""

import json
import subprocess
import sys

import pytest

from common.errors import InputError
from models import registry
from tests.helpers import REPO

RECORD_REGISTRATIONS = """
import json, sys
from models import registry
loaded = "tensorflow" in sys.modules
registrations = {}
register = registry.register

def recording(spec):
    registrations.setdefault(sys._getframe(1).f_globals["__name__"], []).append(spec.name)
    return register(spec)

registry.register = recording
for module in registry.FAMILIES:
    __import__(module)
print(json.dumps({"tensorflow before the families": loaded, "registrations": registrations}))
"""


def test_each_family_module_registers_the_names_the_registry_looks_up_without_it():
    # `registry.FAMILIES` lets a name be checked, and its family found, without importing any family (nor
    # TensorFlow); the families' own registrations, recorded in a fresh process, must be what it says.
    done = subprocess.run([sys.executable, "-c", RECORD_REGISTRATIONS], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=True)
    recorded = json.loads(done.stdout.splitlines()[-1])
    assert recorded["tensorflow before the families"] is False
    assert {module: sorted(names) for module, names in recorded["registrations"].items()} == {
        module: sorted(names) for module, names in registry.FAMILIES.items()}


# Every family's settings are importable without TensorFlow.
EVERY_EXPERIMENT_WITHOUT_TENSORFLOW = """
import json, sys
from models import registry
for module, names in registry.FAMILIES.items():
    for name in names:
        spec = registry.get(name)
        for preset in ("paper", *spec.presets):
            for features in ("fc", *spec.image_features):
                spec.experiment(preset, image_features=features)
print(json.dumps(sorted({"tensorflow", "keras"} & set(sys.modules))))
"""


def test_a_family_s_experiments_are_made_without_tensorflow():
    # What lets train.py check a preset and every --set value before TensorFlow loads (seconds).
    done = subprocess.run([sys.executable, "-c", EVERY_EXPERIMENT_WITHOUT_TENSORFLOW], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_an_unknown_name_is_refused_naming_the_known_ones():
    with pytest.raises(InputError) as error:
        registry.check_name("gru ", "--model")
    assert str(error.value).startswith("--model 'gru ': unknown model; known models: ensemble, fv-gmm, fv-gmm-hglmm, ")
    registry.check_name("fv-gmm-hglmm")

FNE_PIPELINES = ("sh", "mh", "soe", "moe", "ph", "poe")


@pytest.mark.parametrize("name", FNE_PIPELINES)
def test_fne_features_make_the_pipeline_read_every_layers_features(name):
    config = registry.get(name).experiment("paper", image_features="fne")
    assert (config.model.image_input, config.data.image_features) == ("fne", "fne")
    # The default, one CNN layer's features.
    config = registry.get(name).experiment("paper")
    assert (config.model.image_input, config.data.image_features) == ("unit", "fc")


def test_fne_features_combine_with_a_preset_and_overrides():
    config = registry.get("ph").experiment("quick", ["model.embed_dim=16", "data.test_split=dev"], "fne")
    assert (config.model.image_input, config.data.image_features) == ("fne", "fne")
    assert (config.model.embed_dim, config.data.test_split, config.preset) == (16, "dev", "quick")


@pytest.mark.parametrize("name", registry.names())
def test_every_model_reads_fc_features(name):
    assert registry.get(name).experiment("paper", image_features="fc").data.image_features == "fc"


def test_a_model_without_fne_features_names_itself_and_what_it_reads():
    with pytest.raises(InputError) as error:
        registry.get("gru").experiment("paper", image_features="fne")
    assert str(error.value) == "--image-features 'fne': model 'gru' reads fc"
    with pytest.raises(InputError) as error:
        registry.get("ph").experiment("paper", image_features="fc+fne")
    assert str(error.value) == "--image-features 'fc+fne': model 'ph' reads fc, fne"


def test_the_old_name_of_a_kind_reads_that_kind():
    assert registry.get("ph").experiment("paper", image_features="stages") == registry.get("ph").experiment(
        "paper", image_features="fne")
