"""The time of a run over the processes that trained it."""

import json

import pytest

from common.errors import InputError
from engine import time_spent
from engine.time_spent import FILE, TimeSpent

EARLIER = [
    {"wall_seconds": 100.0, "cpu_seconds": 150.5, "cores": 2, "load_average": [0.5, 1.5], "peak_memory_bytes": 3e9},
    {"wall_seconds": 20.0, "cpu_seconds": 30.0, "cores": 4, "load_average": [2.0, 2.5], "peak_memory_bytes": 1e9},
]


def test_a_resumed_run_adds_this_process_to_the_recorded_pieces(tmp_path):
    (tmp_path / FILE).write_text(json.dumps({"pieces": EARLIER}))
    spent = TimeSpent(tmp_path, resume=True)
    this = spent.piece()
    totals = spent.totals()
    assert totals["pieces"] == 3
    assert totals["wall_seconds"] == pytest.approx(120.0 + this["wall_seconds"], abs=0.2)
    assert totals["cpu_seconds"] == pytest.approx(180.5 + this["cpu_seconds"], abs=0.5)
    # The load when the first piece started; the largest of the pieces' peaks (this test process's is below 3 GB).
    assert totals["load_average"][0] == 0.5 and totals["peak_memory_bytes"] == max(3e9, this["peak_memory_bytes"])
    spent.save()
    saved = json.loads((tmp_path / FILE).read_text())["pieces"]
    assert saved[:2] == EARLIER and len(saved) == 3


def test_a_run_names_each_machine_its_pieces_ran_on_once_in_order(tmp_path, monkeypatch):
    class ThisMachine:  # stands in for common.machine: this process runs on an "AMD EPYC" with avx512 kernels
        cores, load_average = staticmethod(lambda: 2), staticmethod(lambda: 1.0)
        cpu_model, instruction_set = staticmethod(lambda: "AMD EPYC"), staticmethod(lambda: "avx512")

    monkeypatch.setattr(time_spent, "machine", ThisMachine)
    pieces = [{**EARLIER[0], "cpu": "Intel Xeon", "isa": "avx2"}, EARLIER[1],  # the second recorded no machine
              {**EARLIER[1], "cpu": "AMD EPYC", "isa": "avx512"}, {**EARLIER[1], "cpu": "Intel Xeon", "isa": "avx2"}]
    (tmp_path / FILE).write_text(json.dumps({"pieces": pieces}))
    spent = TimeSpent(tmp_path, resume=True)
    assert (spent.piece()["cpu"], spent.piece()["isa"]) == ("AMD EPYC", "avx512")
    totals = spent.totals()
    assert (totals["cpu"], totals["isa"]) == ("Intel Xeon and AMD EPYC", "avx2 and avx512")
    # A run whose pieces all predate the record names none (and this process names its own).
    (tmp_path / FILE).write_text(json.dumps({"pieces": EARLIER}))
    assert TimeSpent(tmp_path, resume=True).totals()["cpu"] == "AMD EPYC"
    assert time_spent._distinct(EARLIER, "cpu") is None


def test_a_new_run_counts_only_itself(tmp_path):
    (tmp_path / FILE).write_text(json.dumps({"pieces": EARLIER}))
    totals = TimeSpent(tmp_path, resume=False).totals()
    assert totals["pieces"] == 1 and totals["wall_seconds"] < 5


def test_a_resumed_run_is_recorded_with_the_command_that_started_it(tmp_path):
    started = "python train.py --model gru --preset paper --model-dir runs/x"
    (tmp_path / FILE).write_text(json.dumps({"pieces": [{**EARLIER[0], "command": started}, EARLIER[1]]}))
    spent = TimeSpent(tmp_path, resume=True, command="python train.py --model-dir runs/x --resume")
    assert spent.totals()["command"] == started
    spent.save()
    assert json.loads((tmp_path / FILE).read_text())["pieces"][2]["command"] == "python train.py --model-dir runs/x --resume"


def test_pieces_recorded_without_commands_leave_this_processs(tmp_path):
    (tmp_path / FILE).write_text(json.dumps({"pieces": EARLIER}))
    this = "python train.py --model-dir runs/x --resume"
    assert TimeSpent(tmp_path, resume=True, command=this).totals()["command"] == this


@pytest.mark.parametrize("text", ["{", '{"pieces": 3}', '{"pieces": [{"wall_seconds": 1}]}', '{"runs": []}',
                                  '{"pieces": [{"wall_seconds": "1", "cpu_seconds": 1, "peak_memory_bytes": 1, '
                                  '"load_average": [1, 1]}]}'])
def test_a_malformed_record_is_named(tmp_path, text):
    (tmp_path / FILE).write_text(text)
    with pytest.raises(InputError, match=f"{FILE}: not the record of a run's pieces"):
        TimeSpent(tmp_path, resume=True)
