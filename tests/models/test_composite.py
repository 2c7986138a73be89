"""The one build path of a model made of trained runs (`models.composite`):
each run's model from its record, the columns of each kind of features,
the best weights from the record's checkpoint; the ensemble and the
two-stage model build their runs through it."""

import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from models import composite, ensemble, members, rerank
from models.ensemble_config import EnsembleConfig
from models.rerank_config import RerankConfig
from models.restore import restore_model


def test_each_run_reads_the_columns_of_its_kind_in_order_of_first_appearance(trained, trained_fne, trained_fv):
    runs = [members.load_trained_run(run) for run in (trained_fne, trained, trained_fv)]
    models, parts = composite.build_parts(runs, 3120 + 1280)
    # poe on `stages` (3120 wide) first, then gru and fv on `ims` (1280 wide), side by side.
    assert [part.columns for part in parts] == [(0, 3120), (3120, 4400), (3120, 4400)]
    assert [part.run for part in parts] == runs
    assert [model.image_features.width for model in models] == [3120, 1280, 1280]
    with pytest.raises(InputError, match=r"fc \(1280\) = 4400 columns; the run's features have 4401"):
        composite.build_parts(runs, 4401)


def test_a_run_is_built_from_its_record_and_restored_from_its_checkpoint(trained):
    run = members.load_trained_run(trained)
    (model,), parts = composite.build_parts([run], 1280)
    _, own = restore_model(trained)
    composite.restore_parts([model], parts)
    assert [w.shape for w in model.weights] == [w.shape for w in own.weights]
    for mine, theirs in zip(model.get_weights(), own.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    # gru's embed_dim is 32 (tests/conftest.py's TINY): both encodings are 32 wide.
    assert composite.encoding_widths(model) == (32, 32)
    text = tf.constant(["a dog runs"])
    np.testing.assert_array_equal(model.encode_text(model.vectorizer(text)), own.encode_text(own.vectorizer(text)))


def test_the_ensemble_and_the_two_stage_model_build_their_runs_through_it(trained, trained_fv, monkeypatch):
    built = []
    build_run = composite.build_run
    monkeypatch.setattr(composite, "build_run", lambda run: built.append(run) or build_run(run))
    directories = (str(trained), str(trained_fv))
    runs = members.ensemble_members(EnsembleConfig(members=directories))
    for build, config in ((ensemble.build, EnsembleConfig(members=directories)),
                          (rerank.build, RerankConfig(members=directories))):
        built.clear()
        model = build(config, runs, 1280)
        assert built == list(runs)
        assert [(part.run, part.columns) for part in model.parts] == [(runs[0], (0, 1280)), (runs[1], (0, 1280))]
