"""The live per-epoch history of a run: results/runs/<id>/history.jsonl, one JSON line per finished epoch.

The training loop keeps the history in its checkpoint (what metrics.json's `history` is made of); this file
mirrors it while the run trains, so curves can be drawn before the run ends. Each line is appended with one
os.write of the whole line on an O_APPEND descriptor, then fsync: a crash can leave at most a torn last line,
which readers skip. On (re)start the file is rewritten (temp-then-rename) to exactly the checkpoint's history,
so a requeued run drops the epochs its checkpoint did not keep and a torn line, and continues the same file
without duplicates. The trackers (semcl.runtime.tracking), the progress line and progress.json (semcl.runtime.progress)
hang off the same object, so train() calls one thing per step and per epoch."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from semcl.errors import ResultsError
from semcl.files import file_mode, write_text_atomic
from semcl.store.run_folder import HISTORY, RunFolder

HISTORY_FILE = HISTORY  # semcl.store.run_folder spells the run folder's files


def _line(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True) + "\n"


def append_entry(path: Path, entry: dict) -> None:
    """One line, written whole by a single os.write on an O_APPEND descriptor, then fsync."""
    data = _line(entry).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, file_mode())
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk mid-line: say so (readers skip the torn line)
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)


def rewrite(path: Path, history: list[dict]) -> None:
    """The file becomes exactly `history` (temp-then-rename)."""
    write_text_atomic(path, "".join(_line(e) for e in history))


def read_history(path: Path) -> list[dict]:
    """The entries of a history file; a torn last line (a crash mid-write) is left out, a bad line
    before it is a one-line ResultsError naming the file and line."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise ResultsError(f"{path}: unreadable ({err.strerror or err})") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise ResultsError(f"{path}:{number}: not a JSON line; delete the file to rebuild it on resume") from None
        if not isinstance(entry, dict) or "epoch" not in entry:
            raise ResultsError(f"{path}:{number}: key 'epoch' missing")
        out.append(entry)
    return out


class EpochLog:
    """history.jsonl + trackers + progress line and progress.json of one training process; a no-op off rank 0.

    `folder` is the run's folder (its name is the run id, which keys every tracker)."""

    def __init__(self, folder: Path, history: list[dict], epochs: int, *, enabled: bool = True):
        from semcl.runtime.progress import Progress, ProgressFile
        from semcl.runtime.tracking import open_trackers

        self.enabled = enabled
        self.path = Path(folder) / HISTORY_FILE
        self.progress = Progress(epochs) if enabled else None
        self.live = ProgressFile(RunFolder(Path(folder)).progress, epochs) if enabled else None  # for other processes
        self.trackers = []
        if enabled:
            rewrite(self.path, history)  # the checkpoint's epochs, no more (a requeue's duplicates, a torn line)
            self.trackers = open_trackers(Path(folder), Path(folder).name, len(history), history)

    def __enter__(self) -> EpochLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, epoch: int, step: int, steps: int, loss: float | Callable[[], float]) -> None:
        """After each training step: `epoch` 0-based, `step` the steps done in it, `loss` their mean (or a function
        giving it, called only when a line is written: reading a loss held on a GPU waits for the device)."""
        if self.progress is not None:
            self.progress.update(epoch, step, steps, loss)
        if self.live is not None:
            self.live.update(epoch, step, steps, loss)

    def epoch_end(self, entry: dict) -> None:
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.clear()
        append_entry(self.path, entry)
        for tracker in self.trackers:
            tracker.log(entry)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.clear()
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []
