"""tools.worker.Worker: the wait for a worker's answer ends as soon as its
process does, with the process's own reason in one line."""

import os
import time

import pytest

from common.errors import InputError
from tools.worker import Worker

# The targets below are module-level functions: the spawned process imports
# this module to find them (so it imports nothing heavier than tools.worker).


def dies_without_a_word(connection, status):
    os._exit(status)


def raises(connection, text):
    raise RuntimeError(text + "\nsecond line")


def answers_then_dies(connection):
    connection.send("ready")
    connection.recv()
    os._exit(0)


def test_a_worker_that_dies_without_a_word_ends_the_wait_with_its_exit_status():
    began = time.monotonic()
    with Worker("the worker", dies_without_a_word, 3) as worker:
        with pytest.raises(InputError) as error:
            worker.receive()
    assert str(error.value) == "the worker: the worker process exited with status 3 without an answer"
    assert worker.process.exitcode == 3 and time.monotonic() - began < 30


def test_a_worker_killed_by_a_signal_is_named_with_the_signal():
    with Worker("the worker", answers_then_dies) as worker:
        assert worker.receive() == "ready"
        worker.process.kill()
        with pytest.raises(InputError, match=r"^the worker: the worker process was killed by signal 9 without an answer$"):
            worker.receive()


def test_a_worker_exception_is_relayed_as_one_line_with_its_place():
    with Worker("the worker", raises, "it broke") as worker:
        with pytest.raises(InputError) as error:
            worker.receive()
    assert str(error.value) == f"the worker failed: {__file__}:{raises.__code__.co_firstlineno + 1}: RuntimeError: it broke"
    assert worker.process.exitcode == 1


def test_a_worker_that_ends_after_answering_fails_the_next_wait():
    """The parent does not hold the child's end of the pipe: after the
    child's death, the next receive ends at once."""
    with Worker("the worker", answers_then_dies) as worker:
        assert worker.receive() == "ready"
        worker.send("go")
        with pytest.raises(InputError, match="exited with status 0 without an answer"):
            worker.receive(timeout=30)


def test_leaving_the_block_ends_a_worker_waiting_for_a_message():
    with Worker("the worker", answers_then_dies) as worker:
        assert worker.receive() == "ready"
    assert not worker.process.is_alive() and worker.process.exitcode == 1  # its recv got an end of file
