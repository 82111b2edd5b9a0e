"""Where a training stands, for the people watching it: a throttled step line on stderr and progress.json in the
run folder.

The step line ("epoch 3/6 step 40/78 loss 4.2100 12.3 it/s ETA 4:05") is on when stderr is a terminal (e.g.
`semcl run --executor debug` in a shell) or $SEMCL_PROGRESS=1 (`semcl run --progress`: the local executor's jobs
then write it into their stderr logs); $SEMCL_PROGRESS=0 turns it off. At most two lines a second.

progress.json (RunFolder.progress) is what another process reads: the CLI's wait loop for local jobs, `semcl status
--watch` and `semcl wait` for SLURM jobs (semcl.launch.live). Rank 0 rewrites it at most once a second while
training (phase "train": epoch, step, steps, loss, rate, ETA, wall time), the job sets the phases around training
("start", "evaluate", "trained"), and removes it once the record is written. Its writes skip the fsync that records
get: a crash loses a second of progress, nothing else."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from semcl.files import write_bytes_atomic

ENV = "SEMCL_PROGRESS"
MIN_INTERVAL_S = 0.5  # <= 2 step lines per second
FILE_INTERVAL_S = 1.0  # progress.json: <= 1 rewrite per second
PHASES = ("start", "train", "evaluate", "trained")


def progress_enabled(stream=None) -> bool:
    value = os.environ.get(ENV)
    if value is not None and value != "":
        return value not in ("0", "false", "no", "off")
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def duration(seconds: float | None) -> str:
    """"1:02:05", "4:05", "0:07" ("?" when unknown)."""
    if seconds is None or not seconds >= 0 or seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def speed(rate: float | None) -> str:
    """Steps per second as "12.3 it/s", or "4.2 s/it" below one step a second ("" when unknown)."""
    if not rate:
        return ""
    return f"{rate:.1f} it/s" if rate >= 1 else f"{1 / rate:.1f} s/it"


class Meter:
    """Steps per second over the current epoch, from its first timed step on (the first step of an epoch pays for
    warm-up and is not counted); until a second step is timed, the last epoch's rate, and before any, the first
    step's own time since the meter was made (rough, but an ETA from the first step on). The ETA is the training's
    remaining steps at that rate."""

    def __init__(self, epochs: int, clock=time.monotonic):
        self.epochs, self.clock = epochs, clock
        self.begin = clock()  # just before the first step (the meter is made as the loop starts)
        self.mark = None  # (time, epoch, step) the rate is measured from
        self.rate: float | None = None

    def update(self, epoch: int, step: int, steps: int) -> tuple[float | None, float | None]:
        """(rate, eta_s) after `step` of `steps` in 0-based `epoch` (one step since the last call)."""
        now = self.clock()
        if self.mark is None and now > self.begin:
            self.rate = 1 / (now - self.begin)
        if self.mark is None or self.mark[1] != epoch:
            self.mark = (now, epoch, step)
        elapsed, done = now - self.mark[0], step - self.mark[2]
        if elapsed > 0 and done > 0:
            self.rate = done / elapsed
        left = (self.epochs - epoch - 1) * steps + steps - step
        return self.rate, (left / self.rate if self.rate else None)


class Progress:
    """The step line on `stream` (a terminal: one line rewritten in place; a log file: one line each)."""

    def __init__(self, epochs: int, stream=None, clock=time.monotonic, enabled: bool | None = None):
        self.epochs, self.stream, self.clock = epochs, stream or sys.stderr, clock
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.tty = self.enabled and self._isatty()
        self.meter = Meter(epochs, clock)
        self.last = None  # when the last line was written
        self.shown = False

    def _isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def line(self, epoch: int, step: int, steps: int, loss: float, rate: float | None, eta: float | None) -> str:
        timing = f" {speed(rate)} ETA {duration(eta)}" if rate else ""
        return f"epoch {epoch + 1}/{self.epochs} step {step}/{steps} loss {loss:.4f}{timing}"

    def update(self, epoch: int, step: int, steps: int, loss: float | Callable[[], float]) -> None:
        """`loss`: the mean so far, or a function giving it, called only when a line is written."""
        if not self.enabled:
            return
        rate, eta = self.meter.update(epoch, step, steps)
        now = self.clock()
        if self.last is not None and now - self.last < MIN_INTERVAL_S and step < steps:
            return
        # a terminal: one line rewritten in place; a log file: one line each
        text = self.line(epoch, step, steps, loss() if callable(loss) else loss, rate, eta)
        self.stream.write(f"\r{text}\x1b[K" if self.tty else f"{text}\n")
        self.stream.flush()
        self.last, self.shown = now, True

    def clear(self) -> None:
        if self.enabled and self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.shown = False


def write_progress(path: Path, doc: dict) -> None:
    """Replace progress.json by `doc` plus the wall time (temp-then-rename, no fsync)."""
    write_bytes_atomic(Path(path), json.dumps({**doc, "time": time.time()}, sort_keys=True).encode(), durable=False)


def write_phase(path: Path, phase: str) -> None:
    """A phase outside the training loop (PHASES), from now on."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    write_progress(path, {"phase": phase, "since": time.time()})


def read_progress(path: Path) -> dict | None:
    """progress.json, or None where it is missing or unreadable (a reader never stops on it: it only shows)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("phase") in PHASES else None


class ProgressFile:
    """progress.json of a training process (rank 0): at most once a second, and at each epoch's last step."""

    def __init__(self, path: Path, epochs: int, clock=time.monotonic):
        self.path, self.epochs, self.clock = Path(path), epochs, clock
        self.meter = Meter(epochs, clock)
        self.last = None
        self.since = time.time()

    def update(self, epoch: int, step: int, steps: int, loss: float | Callable[[], float]) -> None:
        """`loss` as Progress.update: read only when the file is written."""
        rate, eta = self.meter.update(epoch, step, steps)
        now = self.clock()
        if self.last is not None and now - self.last < FILE_INTERVAL_S and step < steps:
            return
        write_progress(self.path, {"phase": "train", "since": self.since, "epoch": epoch + 1, "epochs": self.epochs,
                                   "step": step, "steps": steps, "loss": loss() if callable(loss) else loss,
                                   "rate": rate, "eta_s": eta})
        self.last = now
