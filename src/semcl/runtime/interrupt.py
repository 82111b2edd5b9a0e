"""Deferred preemption: a requeue signal that arrives mid-step is acted on at the next step
boundary, after a checkpoint of exactly that position.

submitit's handler for the requeue signal (USR2) checkpoints the job object, requeues it and
exits at once, from wherever the main thread happens to be: between backward and the optimiser
step, say. `defer_signal` wraps that handler; while training (`training()`), the signal only
raises a flag that the train loop checks after each step; outside training it runs at once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_pending: Callable[[], None] | None = None
_in_training = False


def defer_signal(signum: int = signal.SIGUSR2) -> None:
    """Wrap the current handler of `signum` (call in the job process, after submitit set it)."""
    original = signal.getsignal(signum)
    if not callable(original):
        return

    def handler(sig: int, frame) -> None:
        global _pending
        if _in_training:
            _pending = lambda: original(sig, frame)  # noqa: E731
        else:
            original(sig, frame)

    signal.signal(signum, handler)


@contextmanager
def training() -> Iterator[None]:
    global _in_training
    _in_training = True
    try:
        yield
    finally:
        _in_training = False
        fire_if_pending()  # a signal that came during the last step


def pending() -> bool:
    return _pending is not None


class Abandoned(Exception):
    """Long work at an epoch's start (HSA's kNN mining) stopped part way because a stop signal is pending
    (agreed across ranks); the train loop checkpoints the epoch's start and acts on the signal. Raised only
    inside `training()`, the one place a signal can be pending."""


def fire_if_pending() -> None:
    """Run the deferred handler (it normally requeues the job and exits the process)."""
    global _pending
    action, _pending = _pending, None
    if action is not None:
        action()


# ---------------------------------------------------------------- SIGTERM / SIGINT to a local worker


class Interrupted(BaseException):
    """A stop signal (SIGTERM / SIGINT) reached a local worker. A BaseException, like
    KeyboardInterrupt, so that execute_run does not record the run as failed: it keeps its
    checkpoint (taken at the step boundary where the signal was acted on) and a rerun resumes."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Inside the block, a stop signal raises Interrupted: at once outside training, and during
    training at the next step boundary after a checkpoint of that position (as a requeue
    signal). The previous handlers come back at the end. A no-op outside the main thread."""
    def stop(sig: int, frame) -> None:
        raise Interrupted(sig)

    try:
        old = {s: signal.signal(s, stop) for s in signums}
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    for s in signums:
        defer_signal(s)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
