"""The recall@K plot (tools.report.plot): a table's runs drawn with their
R@1, R@5 and R@10 in both directions, as an image of the format asked
for, and a run without one of them an error naming where it was read."""

import io
import json

import matplotlib.image
from matplotlib.axes import Axes

from tests.tools.report.helpers import changed_snapshot, fails, run_record, update_argv
from tools import report


def test_a_recall_missing_for_the_plot_is_an_error_naming_the_run(workspace, capsys):
    plot = workspace["out"] / "recall.png"
    results = workspace["runs"] / "a" / "results.json"
    record = json.loads(results.read_text())
    del record["test"]["t2i_r5"]
    results.write_text(json.dumps(record))
    argv = [str(workspace["runs"]), *update_argv(workspace), "--plot", str(plot)]
    assert fails(capsys, workspace, argv).startswith(f"error: {results}: lacks the key 'test.t2i_r5', which the recall@K plot")
    # The same from a snapshot: the snapshot and the run.
    argv = changed_snapshot(workspace, lambda s: s["runs"]["b"]["test"].update(i2t_r10=None))
    err = fails(capsys, workspace, [*argv, *update_argv(workspace), "--plot", str(plot)])
    assert err.startswith(f"error: {workspace['snapshot']}: run 'b': lacks the key 'test.i2t_r10'")
    assert not plot.exists()
    # Without --plot the missing recall is an empty cell.
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| `gru` (quick) | 1 | 12.0 | 4 | 96.0 |" in capsys.readouterr().out


def test_the_plot_draws_each_runs_recalls_in_both_directions_as_a_png(monkeypatch):
    runs = {
        "a": {**run_record({}), "test": {"i2t_r1": 11.5, "i2t_r5": 30.25, "i2t_r10": 41.0,
                                         "t2i_r1": 8.0, "t2i_r5": 24.5, "t2i_r10": 35.75}},
        "b": {**run_record({}), "preset": "full", "test": {"i2t_r1": 2.0, "i2t_r5": 9.5, "i2t_r10": 17.0,
                                                           "t2i_r1": 1.5, "t2i_r5": 7.0, "t2i_r10": 12.25}},
    }
    # A run that is not there and a paper's row are not drawn.
    table = {"rows": [{"run": "a", "labels": ["`{model}`", "{preset}"]}, {"run": "gone", "labels": ["gone", ""]},
                      {"paper": "p/x", "labels": ["paper", ""]}, {"run": "b", "labels": ["`{model}`", "{preset}"]}]}
    drawn = []
    real_plot = Axes.plot

    def plot(axis, x, y, **style):
        drawn.append((axis, list(x), list(y), style["label"]))
        return real_plot(axis, x, y, **style)

    monkeypatch.setattr(Axes, "plot", plot)
    series, image = report.plot_recalls(table, runs, "png")
    assert series == [{"run": "a", "label": "m quick", "i2t": [11.5, 30.25, 41.0], "t2i": [8.0, 24.5, 35.75]},
                      {"run": "b", "label": "m full", "i2t": [2.0, 9.5, 17.0], "t2i": [1.5, 7.0, 12.25]}]
    # Each run's line in each direction's panel, R@K over K = 1, 5, 10.
    assert sorted((axis.get_title(), x, y, label) for axis, x, y, label in drawn) == [
        ("image annotation (i2t)", [1, 5, 10], [2.0, 9.5, 17.0], "m full"),
        ("image annotation (i2t)", [1, 5, 10], [11.5, 30.25, 41.0], "m quick"),
        ("image search (t2i)", [1, 5, 10], [1.5, 7.0, 12.25], "m full"),
        ("image search (t2i)", [1, 5, 10], [8.0, 24.5, 35.75], "m quick"),
    ]
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    assert matplotlib.image.imread(io.BytesIO(image), format="png").ndim == 3  # the whole image decodes
