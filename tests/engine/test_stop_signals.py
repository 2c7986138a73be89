import os
import signal

import pytest

from engine.stop_signals import stop_requests


@pytest.fixture
def handlers():
    """SIGINT and SIGTERM as Python starts (KeyboardInterrupt, termination),
    put back after the test."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_sets_the_request_and_the_second_acts_as_without_it(number, handlers):
    with stop_requests() as request:
        assert not request
        os.kill(os.getpid(), number)
        assert request and str(request) == signal.Signals(number).name
        # The handlers are Python's again: a second Ctrl-C raises at once.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_the_handlers_are_put_back_on_leaving_without_a_signal(handlers):
    with stop_requests() as request:
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
    assert not request
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_ignored_signal_stays_ignored(handlers):
    # A job started with `&` or nohup ignores SIGINT: Ctrl-C at the terminal is not for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stop_requests() as request:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        assert not request
        os.kill(os.getpid(), signal.SIGTERM)
        assert str(request) == "SIGTERM"
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_within_interrupting_the_first_signal_interrupts_the_work_and_is_the_request(number, handlers):
    with stop_requests() as request:
        with pytest.raises(KeyboardInterrupt), request.interrupting():
            os.kill(os.getpid(), number)
            pytest.fail("the work went on after the signal")
        assert str(request) == signal.Signals(number).name
        # Its handler is Python's again, and work that would be interrupted does not start.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt), request.interrupting():
            pytest.fail("the work began after the stop was asked for")


def test_after_interrupting_a_signal_waits_for_the_loop_again(handlers):
    with stop_requests() as request:
        with request.interrupting():
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        assert str(request) == "SIGTERM"
