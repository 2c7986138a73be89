"""Stopping a training run between two steps on SIGINT or SIGTERM.

Ctrl-C (SIGINT) and the SIGTERM of `kill`, a batch scheduler or a
preempted machine ask the run to stop: the step under way finishes, the
training loop checkpoints the state of that step (mid-epoch; `--resume`
continues from it) and ends with the line that says how to continue. So a
stopped run loses no steps, not the steps since its last validation. A
validation, which can take minutes, is interrupted at once
(`StopRequest.interrupting`): the step it validates is checkpointed with
its validation due, done first by the resumed run. A second signal acts at
once, as without this module (KeyboardInterrupt for SIGINT, termination
for SIGTERM). A signal the process ignores (SIGINT in a job started in the
background with `&` or `nohup`) stays ignored.
"""

import contextlib
import logging
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)

log = logging.getLogger("train")


class StopRequest:
    """Whether a stop was asked for: false until the first signal, then
    the signal's name (`str(request)`)."""

    def __init__(self):
        self.signal_name = None
        self.interrupts = False

    def __bool__(self):
        return self.signal_name is not None

    def __str__(self):
        return self.signal_name or ""

    @contextlib.contextmanager
    def interrupting(self):
        """The block, unless a stop was asked for (KeyboardInterrupt at
        once); within it, the first signal interrupts the work under way
        (KeyboardInterrupt, once its handler runs: between two TensorFlow
        operations). For work that changes no training state, such as a
        validation, which a resumed run does again."""
        if self:
            raise KeyboardInterrupt
        self.interrupts = True
        try:
            yield
        finally:
            self.interrupts = False


@contextlib.contextmanager
def stop_requests():
    """Within the block, the first SIGINT or SIGTERM sets the yielded
    `StopRequest` instead of stopping the process, and puts the handlers
    back as they were (so a second one acts at once); they are put back
    on leaving the block too. Outside the main thread, where Python
    delivers no signals, the request is never set."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {number: signal.getsignal(number) for number in SIGNALS}
    watched = [number for number in SIGNALS if previous[number] is not signal.SIG_IGN]

    def restore():
        for number in watched:
            signal.signal(number, previous[number])

    def handle(number, frame):
        request.signal_name = signal.Signals(number).name
        restore()
        if request.interrupts:
            log.warning("%s: stopping now, with a checkpoint of the last step (the same signal again stops at once)",
                        request.signal_name)
            raise KeyboardInterrupt
        log.warning("%s: stopping after this step, with a checkpoint of it (the same signal again stops at once)",
                    request.signal_name)

    for number in watched:
        signal.signal(number, handle)
    try:
        yield request
    finally:
        restore()
