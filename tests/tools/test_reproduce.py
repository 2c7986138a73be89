"""One command reproduces a results table: it trains only the runs that have not finished."""

import json
import os
import shlex
import shutil
import signal
import threading
import time

import pytest

from common.errors import InputError
from models import registry
from tests.helpers import REPO as ROOT
from tests.helpers import run_config_json
from tools import report, reproduce

PAPERS = "[p.x]\ni2t_r1 = 30.0\ni2t_r5 = 50\ni2t_r10 = 60\nt2i_r1 = 20\nt2i_r5 = 40\nt2i_r10 = 50.5\n"


def _metrics(r1):
    return {**{f"{d}_r{k}": r1 * k for d in ("i2t", "t2i") for k in (1, 5, 10)}, "rsum": 36 * r1}


def _snapshot(path, runs):
    """A snapshot of runs recorded with `command`s (root "runs")."""
    records = {name: {"model": "gru", "preset": "paper", "dev": _metrics(1.0), "test": _metrics(1.0), "command": command}
               for name, command in runs.items()}
    path.write_text(json.dumps({"root": "runs", "runs": records}))
    return path


def _plan(tmp_path, rows):
    tables = tmp_path / "tables.toml"
    tables.write_text(f'[[table]]\nid = "t"\nlabels = ["run"]\ncolumns = ["rsum"]\nrows = [\n{rows}\n]\n')
    papers = report.check_papers(_toml(PAPERS), "papers.toml")
    (table,) = report.check_tables(report.read_toml(tables), papers, tables)
    return table


def _toml(text):
    import tomllib

    return tomllib.loads(text)


def test_finished_runs_are_skipped_interrupted_ones_resumed_absent_ones_started(tmp_path):
    runs = tmp_path / "runs"
    (runs / "done").mkdir(parents=True)
    (runs / "done" / "config.json").write_text("{}")
    (runs / "done" / "results.json").write_text("{}")
    (runs / "stopped").mkdir()
    (runs / "stopped" / "config.json").write_text("{}")
    table = _plan(tmp_path, '''
  { run = "done", labels = ["a"] },
  { run = "stopped", labels = ["b"], command = "python train.py --model gru --model-dir runs/stopped" },
  { run = "new", labels = ["c"], command = "python train.py --model gru --set train.seed=1" },
  { mean = ["done", "recorded"], labels = ["mean"] },
  { run = "ens", labels = ["e"] },
''')
    recorded = {
        "recorded": "python train.py --model gru --model-dir /elsewhere/recorded",
        # An ensemble names other runs of the table: they are taken from RUNS too; a run of no table stays.
        "ens": "python train.py --model ensemble --set model.members=runs/new,runs/recorded,runs/other --model-dir=x",
    }
    plan = reproduce.plan_commands(table, {name: {"command": c} for name, c in recorded.items()}, "runs", str(runs))
    # As `python -m train`, which runs from any folder.
    assert plan == [
        ("done", None),
        ("stopped", ["python", "-m", "train", "--model-dir", str(runs / "stopped"), "--resume"]),
        ("new", ["python", "-m", "train", "--model", "gru", "--set", "train.seed=1", "--model-dir", str(runs / "new")]),
        ("recorded", ["python", "-m", "train", "--model", "gru", "--model-dir", str(runs / "recorded")]),
        ("ens", ["python", "-m", "train", "--model", "ensemble", "--set",
                 f"model.members={runs}/new,{runs}/recorded,runs/other", f"--model-dir={runs / 'ens'}"]),
    ]


def test_a_run_without_a_command_in_its_table_takes_the_one_another_tables_row_gives(tmp_path):
    # A comparison names runs only; a paper-length row gives one of them the command to make it, which the
    # recorded run's (a placeholder where it read a file outside the repository) does not replace.
    table = _toml('[[table]]\nid = "c"\ncompare = [{ claim = "A > B", a = ["a"], b = ["b"] }]')["table"][0]
    recorded = {name: {"command": f"python train.py --model gru --set model.word_vectors=<dir>/{name}.txt"}
                for name in ("a", "b")}
    plan = reproduce.plan_commands(table, recorded, "runs", str(tmp_path), {"a": "python train.py --model gru"})
    assert plan == [("a", ["python", "-m", "train", "--model", "gru", "--model-dir", str(tmp_path / "a")]),
                    ("b", ["python", "-m", "train", "--model", "gru", "--set", "model.word_vectors=<dir>/b.txt",
                           "--model-dir", str(tmp_path / "b")])]


@pytest.mark.parametrize("rows, recorded, message", [
    ('{ run = "a", labels = ["a"] }', {}, "a: no command to make it"),
    ('{ run = "a", labels = ["a"] }', {"a": "evaluate.py --model-dir a"}, "a: its recorded command is not a `python train.py"),
])
def test_a_run_without_a_train_command_is_named(tmp_path, rows, recorded, message):
    table = _plan(tmp_path, rows)
    with pytest.raises(InputError, match=message):
        reproduce.plan_commands(table, {name: {"command": c} for name, c in recorded.items()}, "runs", str(tmp_path))


def test_a_folder_that_holds_no_run_is_not_trained_into(tmp_path):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    table = _plan(tmp_path, '{ run = "a", labels = ["a"], command = "python train.py --model gru" }')
    with pytest.raises(InputError, match="runs/a: exists but holds no training run"):
        reproduce.plan_commands(table, {}, "runs", str(tmp_path / "runs"))


def test_a_table_with_a_finished_and_an_interrupted_run_trains_only_the_interrupted_one(trained, tmp_path, capsys,
                                                                                       monkeypatch):
    import train

    def in_this_process(command):
        # The command the plan gives, run here: a process of its own costs a TensorFlow import (how one is run and
        # stopped: the tests of run_train_command below), and the run's export, which no check reads, is left out.
        assert command[:3] == reproduce.TRAIN
        return train.main(command[3:], export=False)

    monkeypatch.setattr(reproduce, "run_train_command", in_this_process)
    runs = tmp_path / "runs"
    shutil.copytree(trained, runs / "finished")
    shutil.copytree(trained, runs / "interrupted")
    (runs / "interrupted" / "results.json").unlink()  # stopped after its last checkpoint
    finished = (runs / "finished" / "results.json").read_bytes()
    tables = tmp_path / "tables.toml"
    tables.write_text('[[table]]\nid = "t"\nlabels = ["run"]\ncolumns = ["rsum", "pieces"]\nrows = [\n'
                      '{ run = "finished", labels = ["finished"] },\n{ run = "interrupted", labels = ["interrupted"] },\n]\n')
    (tmp_path / "papers.toml").write_text(PAPERS)
    snapshot = _snapshot(tmp_path / "runs.json", {"old": "python train.py --model gru"})
    argv = ["t", "--runs", str(runs), "--snapshot", str(snapshot), "--tables", str(tables), "--papers", str(tmp_path / "papers.toml")]
    assert reproduce.main(argv) == 0
    out = capsys.readouterr().out
    assert (runs / "finished" / "results.json").read_bytes() == finished  # not run again
    resumed = json.loads((runs / "interrupted" / "results.json").read_text())
    assert resumed["test"] == pytest.approx(json.loads(finished)["test"])  # the same checkpoint, evaluated
    assert f"interrupted: python -m train --model-dir {runs / 'interrupted'} --resume" in out
    assert "finished: finished" in out
    rows = [line for line in out.splitlines() if line.startswith("| finished") or line.startswith("| interrupted")]
    # One more process than the copied run's (another test may have resumed the shared fixture already).
    assert resumed["pieces"] == json.loads(finished)["pieces"] + 1
    assert len(rows) == 2 and rows[1].endswith(f"| {resumed['pieces']} |")
    # Run again, everything is finished: nothing is trained.
    before = (runs / "interrupted" / "results.json").read_bytes()
    assert reproduce.main(argv) == 0
    assert (runs / "interrupted" / "results.json").read_bytes() == before


def _table_file(tmp_path, rows):
    """tables.toml of one table "t" with `rows`, and papers.toml, in `tmp_path`: their arguments."""
    tables, papers = tmp_path / "tables.toml", tmp_path / "papers.toml"
    tables.write_text(f'[[table]]\nid = "t"\nlabels = ["run"]\ncolumns = ["rsum"]\nrows = [\n{rows}\n]\n')
    papers.write_text(PAPERS)
    return ["--tables", str(tables), "--papers", str(papers)]


def test_every_rows_inputs_are_checked_before_the_first_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(reproduce, "run_train_command", lambda command: pytest.fail(f"ran {command}"))
    monkeypatch.chdir(tmp_path)  # relative paths are the current folder's, where the runs start
    (tmp_path / "vectors.txt").write_text("a 1\n")
    (tmp_path / "runs" / "stopped").mkdir(parents=True)
    stopped = registry.get("gru").experiment("paper", ["data.path=gone_data", "model.word_vectors=gone.txt"])
    (tmp_path / "runs" / "stopped" / "config.json").write_text(run_config_json(stopped))
    argv = ["t", "--snapshot", str(_snapshot(tmp_path / "runs.json", {"old": "python train.py --model gru"})), *_table_file(tmp_path, """
  { run = "fine", labels = ["a"], command = "python train.py --model gru --set model.word_vectors=vectors.txt --set model.word_vectors=word2vec" },
  { run = "glove", labels = ["b"], command = "python train.py --model fv-gmm --set model.word_vectors=glove.6B.50d.txt" },
  { run = "data", labels = ["c"], command = "python train.py --model gru --data no_such_folder" },
  { run = "ens", labels = ["d"], command = "python train.py --model ensemble --set model.members=runs/fine,runs/later,runs/other" },
  { run = "later", labels = ["e"], command = "python train.py --model gru" },
  { run = "stopped", labels = ["f"] },
""")]
    for dry_run in ([], ["--dry-run"]):
        assert reproduce.main([*argv, *dry_run]) == 2
        captured = capsys.readouterr()
        # One line: each row and what it misses; a run a row before it makes is there.
        assert captured.out == "" and captured.err == (
            "error: glove: --set model.word_vectors=glove.6B.50d.txt: file not found; "
            "data: --data no_such_folder: no such folder; "
            "ens: --set model.members=runs/fine,runs/later,runs/other: runs/later is no finished run, and no run before "
            "this one makes it; "
            "ens: --set model.members=runs/fine,runs/later,runs/other: runs/other is no finished run, and no run before "
            "this one makes it; "
            "stopped: runs/stopped/config.json: data.path: no such folder; "
            "stopped: runs/stopped/config.json: model.word_vectors: file not found; nothing was run\n")


def test_a_table_whose_inputs_are_there_is_planned(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "glove.6B.50d.txt").write_text("a 1\n")
    (tmp_path / "runs" / "other").mkdir(parents=True)
    (tmp_path / "runs" / "other" / "results.json").write_text("{}")  # finished, in no table
    argv = ["t", "--snapshot", str(_snapshot(tmp_path / "runs.json", {"old": "python train.py --model gru"})), "--dry-run", *_table_file(tmp_path, """
  { run = "glove", labels = ["b"], command = "python train.py --model fv-gmm --set model.word_vectors=glove.6B.50d.txt" },
  { run = "ens", labels = ["d"], command = "python train.py --model ensemble --set model.members=runs/glove,runs/other" },
""")]
    assert reproduce.main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        "glove: python -m train --model fv-gmm --set model.word_vectors=glove.6B.50d.txt --model-dir runs/glove",
        "ens: python -m train --model ensemble --set model.members=runs/glove,runs/other --model-dir runs/ens"]


def test_every_file_a_tables_row_reads_is_shipped_or_its_row_says_how_to_make_it(monkeypatch):
    monkeypatch.chdir(ROOT)
    for table in report.read_toml(report.RESULTS_DIR / "tables.toml")["table"]:
        commands = reproduce.table_runs(table) if "rows" in table else {}
        # The runs a table makes are made; what else its commands read must be in the repository.
        plan = [(name, [*reproduce.TRAIN, *shlex.split(command)[2:]] if command else None)
                for name, command in commands.items()]
        for problem in reproduce.missing_inputs(plan, "runs", "runs"):
            name, named, _ = problem.split(": ")
            row = next(row for row in table["rows"] if row.get("run") == name)
            file = named.rpartition("=")[2]
            assert any(f"`{file}`" in label and "how to make it](docs/" in label for label in row["labels"]), \
                (table["id"], problem, row["labels"])


# A stand-in for train.py: says it has started (a file), then runs for a
# minute unless it is stopped; a SIGTERM ends it with train.py's "stopped" status.
RUN = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(130)); "
       "open(sys.argv[1], 'w').close(); time.sleep(float(sys.argv[2]))")


def _signal_this_process_once(started, number):
    """Sends this process `number` once the file `started` exists."""
    def send():
        while not started.exists():
            time.sleep(0.01)
        os.kill(os.getpid(), number)
    threading.Thread(target=send, daemon=True).start()


def test_a_sigterm_is_passed_on_to_the_run_and_waited_for(tmp_path):
    started, before = tmp_path / "started", signal.getsignal(signal.SIGTERM)
    _signal_this_process_once(started, signal.SIGTERM)
    began = time.monotonic()
    assert reproduce.run_train_command(["python", "-c", RUN, str(started), "60"]) == reproduce.STOPPED
    assert time.monotonic() - began < 30
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_ctrl_c_is_left_to_the_run(tmp_path):
    # The terminal sends Ctrl-C to the run too; here only this process gets
    # it, and the run goes on to its end.
    started, before = tmp_path / "started", signal.getsignal(signal.SIGINT)
    _signal_this_process_once(started, signal.SIGINT)
    assert reproduce.run_train_command(["python", "-c", RUN, str(started), "1"]) == 0
    assert signal.getsignal(signal.SIGINT) is before


def test_a_stopped_run_stops_the_reproduction_before_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(reproduce, "run_train_command", lambda command: reproduce.STOPPED)
    tables = tmp_path / "tables.toml"
    tables.write_text('[[table]]\nid = "t"\nlabels = ["run"]\ncolumns = ["rsum"]\n'
                      'rows = [{ run = "a", labels = ["a"], command = "python train.py --model gru" }]\n')
    (tmp_path / "papers.toml").write_text(PAPERS)
    snapshot = _snapshot(tmp_path / "runs.json", {"old": "python train.py --model gru"})
    argv = ["t", "--runs", str(tmp_path / "runs"), "--snapshot", str(snapshot), "--tables", str(tables),
            "--papers", str(tmp_path / "papers.toml")]
    assert reproduce.main(argv) == 130
    assert capsys.readouterr().err.strip() == (f"interrupted: {tmp_path / 'runs'}/a stopped with a checkpoint; "
                                               "the table is not rendered (run this again to continue it)")


def test_a_table_of_commands_without_runs_says_how_to_make_them(tmp_path):
    reproducible = _plan(tmp_path, '{ run = "a", labels = ["a"], command = "python train.py --model gru" }')
    (plain,) = report.check_tables(_toml('[[table]]\nid = "p"\nlabels = ["run"]\ncolumns = ["rsum"]\n'
                                         'rows = [{ run = "a", labels = ["a"] }]\n'), {}, "tables.toml")
    blocks = report.render([reproducible, plain], {}, {}, "runs", suites={}, records={})
    assert blocks == {"t": "No run of this table is recorded yet: `python -m tools.reproduce t` trains its runs, "
                           "then prints it.", "other-runs": ""}
