"""A function in a process of its own, supervised: `Worker`.

A benchmark that runs code in another process (a stage measured on its own
peak memory, a PyTorch reference in its own interpreter) talks to it through
a `Worker`: the death of the process (an exception, a crash, a kill) ends
the wait for its answer at once with a one-line error giving the process's
reason, rather than leaving the benchmark waiting.
"""

import sys
import time

from common.errors import InputError

POLL_SECONDS = 0.2  # how often a wait for a worker's answer checks that it is alive


class Worker:
    """`target(connection, *args)` in a process of its own (spawned), talked
    to over a pipe (`send`, `receive`), and supervised: every wait for its
    answer ends as soon as the process ends.

    The parent closes its copy of the child's end of the pipe once the
    process has started, so the child's death is an end of file on the
    parent's end (and `receive` also checks that the process is alive
    between polls). An exception in `target` is sent back as one line (its
    type, its reason and the file and line it was raised at) and raised
    here as an `InputError` naming the worker; a process that dies without
    a word (a crash, a signal, `os._exit`) is an `InputError` giving its
    exit status. Either way the process has ended when the error is raised.

    Used as a context manager, leaving the block closes the pipe (a worker
    waiting in `connection.recv()` gets an EOFError and ends) and waits for
    the process, killing it after `close_seconds`.

    Args:
      name: the worker as messages name it, e.g. "VSE++ of ../vsepp".
      target: a module-level function (the spawned process imports it).
      args: picklable arguments after the connection.
    """

    def __init__(self, name, target, *args, close_seconds=10):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.name = name
        self.close_seconds = close_seconds
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child_end, target, args), daemon=True)
        try:
            self.process.start()
        finally:
            child_end.close()  # the child holds the only copy now: its death is an end of file here

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def send(self, message):
        try:
            self.connection.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._failure() from None

    def receive(self, timeout=None):
        """The worker's next message; an `InputError` if the worker failed,
        died, or (with `timeout` seconds) did not answer in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.connection.poll(POLL_SECONDS):
                try:
                    message = self.connection.recv()
                except (EOFError, ConnectionResetError):
                    raise self._failure() from None
                if isinstance(message, WorkerFailure):
                    self.process.join(self.close_seconds)
                    raise InputError(f"{self.name} failed: {message.reason}")
                return message
            if not self.process.is_alive() and not self.connection.poll(0):
                raise self._failure()
            if deadline is not None and time.monotonic() > deadline:
                raise InputError(f"{self.name}: no answer within {timeout:g} s")

    def _failure(self):
        """The error of a worker that ended without an answer: its own
        reason if it sent one before dying, else its exit status."""
        try:
            while self.connection.poll(0):
                message = self.connection.recv()
                if isinstance(message, WorkerFailure):
                    self.process.join(self.close_seconds)
                    return InputError(f"{self.name} failed: {message.reason}")
        except (EOFError, OSError):
            pass
        self.process.join(self.close_seconds)
        code = self.process.exitcode
        if code is None:
            how = "closed its pipe"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return InputError(f"{self.name}: the worker process {how} without an answer")

    def close(self):
        """Closes the pipe and waits for the process (killing it after
        `close_seconds`)."""
        self.connection.close()
        self.process.join(self.close_seconds)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class WorkerFailure:
    """What a `Worker`'s process sends back when its target raises."""

    def __init__(self, reason):
        self.reason = reason


def _worker_main(connection, target, args):
    """A `Worker`'s process: runs the target; an exception goes back to the
    parent as a `WorkerFailure` (one line) and ends the process with status
    1, without a traceback on stderr."""
    import traceback

    try:
        target(connection, *args)
    except BaseException as error:  # noqa: BLE001 - relayed to the parent, which reports it
        frames = traceback.extract_tb(error.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__
        try:
            connection.send(WorkerFailure(where + reason))
        except OSError:
            pass  # the parent has gone
        sys.exit(1)
    finally:
        connection.close()

