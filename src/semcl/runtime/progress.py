"""A step-level progress line for runs in the foreground: "epoch 3/6 step 40/78 loss 4.2100 12.3 it/s".

On when stderr is a terminal (e.g. `semcl run --executor debug` in a shell) or $SEMCL_PROGRESS=1 (`semcl run
--progress`: the local executor's jobs then write it into their stderr logs); $SEMCL_PROGRESS=0 turns it off.
Throttled to at most two lines a second, so it costs nothing next to a training step."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

ENV = "SEMCL_PROGRESS"
MIN_INTERVAL_S = 0.5  # <= 2 lines per second


def progress_enabled(stream=None) -> bool:
    value = os.environ.get(ENV)
    if value is not None and value != "":
        return value not in ("0", "false", "no", "off")
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    def __init__(self, epochs: int, stream=None, clock=time.monotonic, enabled: bool | None = None):
        self.epochs, self.stream, self.clock = epochs, stream or sys.stderr, clock
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.tty = self.enabled and self._isatty()
        self.last = None  # when the last line was written
        self.mark = None  # (time, epoch, step) the rate is measured from
        self.shown = False

    def _isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def line(self, epoch: int, step: int, steps: int, loss: float, rate: float | None) -> str:
        speed = f" {rate:.1f} it/s" if rate is not None else ""
        return f"epoch {epoch + 1}/{self.epochs} step {step}/{steps} loss {loss:.4f}{speed}"

    def update(self, epoch: int, step: int, steps: int, loss: float | Callable[[], float]) -> None:
        """`loss`: the mean so far, or a function giving it, called only when a line is written."""
        if not self.enabled:
            return
        now = self.clock()
        if self.mark is None or self.mark[1] != epoch:
            self.mark = (now, epoch, step)
        if self.last is not None and now - self.last < MIN_INTERVAL_S and step < steps:
            return
        elapsed, done = now - self.mark[0], step - self.mark[2]
        rate = done / elapsed if elapsed > 0 and done > 0 else None
        text = self.line(epoch, step, steps, loss() if callable(loss) else loss, rate)
        # a terminal: one line rewritten in place; a log file: one line each
        self.stream.write(f"\r{text}\x1b[K" if self.tty else f"{text}\n")
        self.stream.flush()
        self.last, self.shown = now, True

    def clear(self) -> None:
        if self.enabled and self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.shown = False
