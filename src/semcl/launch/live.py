"""What the user watches while runs train: one line per active run (table, row, seed, epoch k/N, step, loss, it/s,
ETA; "evaluating" once training ends), read from each run's progress.json and history.jsonl
(semcl.runtime.progress, semcl.runtime.history), so it works the same for local worker processes and SLURM jobs.

On a terminal the lines are redrawn in place (rich's Live display) under a count of the runs by state; finished
runs get one line above it. Elsewhere (a log file, a pipe, CI) it prints plain lines instead: one per finished epoch
per run (from history.jsonl, so none is skipped between two polls), one when a run starts evaluating, one when it
ends. Used by the local executor's wait loop, `semcl status --watch` and `semcl wait`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from semcl.errors import ResultsError
from semcl.registry.plan import Run
from semcl.runtime.history import read_history
from semcl.runtime.progress import duration, read_progress, speed
from semcl.store import Store

ACTIVE = ("pending", "running", "requeued")  # states that keep `--watch` and `wait` going
SETTLED = ("done", "failed")
STALE_S = 120.0  # a progress file older than this while its run counts as running: say how old


def describe(progress: dict | None, now: float) -> str:
    """Where a running run stands, from its progress.json ("starting" where there is none yet)."""
    if progress is None:
        return "starting"
    phase, age = progress["phase"], max(0.0, now - float(progress.get("time", now)))
    since = duration(now - float(progress.get("since", now)))
    if phase == "start":
        text = f"starting {since}"
    elif phase == "evaluate":
        text = f"evaluating {since}"
    elif phase == "trained":
        text = "trained; evaluation to come"
    else:
        eta = progress.get("eta_s")
        rate = speed(progress.get("rate"))
        text = (f"epoch {progress['epoch']}/{progress['epochs']} step {progress['step']}/{progress['steps']} "
                f"loss {float(progress['loss']):.4f}" + (f" {rate}" if rate else "")
                + f" ETA {duration(None if eta is None else max(0.0, eta - age))}")
    return text + (f" (no update for {duration(age)})" if age > STALE_S and phase != "trained" else "")


def epoch_line(entry: dict, epochs: int, done: list[dict]) -> str:
    """A plain line for a finished epoch: loss, seconds, and the ETA at the mean pace of the epochs so far."""
    per_epoch = sum(float(e.get("seconds", 0.0)) for e in done) / max(len(done), 1)
    return (f"epoch {entry['epoch']}/{epochs} loss {float(entry['loss']):.4f} {float(entry.get('seconds', 0.0)):.1f} s"
            f" ETA {duration((epochs - int(entry['epoch'])) * per_epoch)}")


class LiveView:
    """The lines of `runs`; `update(states)` with run id -> state ("running", "done", ...) after each poll."""

    def __init__(self, runs: list[Run], store: Store, *, stream=None, tty: bool | None = None,
                 clock: Callable[[], float] = time.time):
        self.runs = list({r.run_id: r for r in runs}.values())
        self.store, self.stream, self.clock = store, stream or sys.stdout, clock
        self.tty = _isatty(self.stream) if tty is None else tty
        self.t0 = clock()
        self.printed: dict[str, int] = {}  # plain: history lines already printed per run
        self.phase: dict[str, str] = {}  # plain: the last phase said per run
        self.settled: set[str] = set()
        self.started = False
        self.live = None

    def __enter__(self) -> LiveView:
        if self.tty:
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:  # rich missing: plain lines
                self.tty = False
            else:
                self.live = Live(console=Console(file=self.stream), auto_refresh=False, transient=True,
                                 redirect_stdout=False, redirect_stderr=False)
                self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def label(self, run: Run) -> str:
        return f"{run.table_id}  {run.row_label}  seed {run.seed}"

    def say(self, text: str) -> None:
        if self.live is not None:
            self.live.console.print(text, highlight=False, markup=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def update(self, states: dict[str, str]) -> None:
        first, self.started = not self.started, True
        now = self.clock()
        for run in self.runs:
            state = states.get(run.run_id, "missing")
            if run.run_id in self.settled:
                continue
            if state in SETTLED and first:  # done before the watch began: nothing to tell
                self.settled.add(run.run_id)
                continue
            if not self.tty:
                self._plain(run, state)
            if state in SETTLED:
                self.settled.add(run.run_id)
                self.say(f"{self.label(run)}  {state}")
        if self.live is not None:
            self.live.update(self._render(states, now), refresh=True)

    def _plain(self, run: Run, state: str) -> None:
        folder = self.store.folder(run.run_id)
        if state not in ("running", "requeued", *SETTLED):  # a queued run has nothing to say yet
            return
        try:
            history = read_history(folder.history) if folder.history.exists() else []
        except ResultsError:  # a bad line: `semcl curves` names it; the view shows what it can
            history = []
        seen = self.printed.get(run.run_id, 0)
        if len(history) < seen:  # a resumed run rewrote its history to its checkpoint's epochs
            seen = len(history)
        for k in range(seen, len(history)):
            self.say(f"{self.label(run)}  {epoch_line(history[k], run.config.schedule.epochs, history[:k + 1])}")
        self.printed[run.run_id] = len(history)
        progress = read_progress(folder.progress)
        phase = progress["phase"] if progress else None
        if phase == "evaluate" and self.phase.get(run.run_id) != phase and state not in SETTLED:
            self.say(f"{self.label(run)}  evaluating")
        self.phase[run.run_id] = phase

    def _render(self, states: dict[str, str], now: float):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 2))
        for _ in range(4):
            grid.add_column(no_wrap=True, overflow="ellipsis")
        for run in self.runs:
            if states.get(run.run_id) in ("running", "requeued"):
                text = describe(read_progress(self.store.folder(run.run_id).progress), now)
                grid.add_row(run.table_id, run.row_label, f"seed {run.seed}", text)
        return Group(grid, Text(self.summary(states, now), no_wrap=True, overflow="ellipsis"))

    def summary(self, states: dict[str, str], now: float) -> str:
        counts = {k: sum(states.get(r.run_id) == k for r in self.runs) for k in ("done", "running", "pending",
                                                                                  "requeued", "failed")}
        queued = sum(states.get(r.run_id) not in counts for r in self.runs)
        parts = [f"{counts['done']} of {len(self.runs)} done", f"{counts['running']} running"]
        parts += [f"{v} {k}" for k, v in (("pending", counts["pending"]), ("requeued", counts["requeued"]),
                                          ("queued", queued), ("failed", counts["failed"])) if v]
        return ", ".join(parts) + f"  ({duration(now - self.t0)})"


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def follow(view: LiveView, states: Callable[[], dict[str, str]], poll: float, *, timeout: float | None = None,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Poll `states` every `poll` seconds (the progress lines every second in between) until no run is active, or
    `timeout` seconds; returns the last states."""
    t0 = last = clock()
    now_states = states()
    while True:
        view.update(now_states)
        if not any(s in ACTIVE for s in now_states.values()):
            return now_states
        if timeout is not None and clock() - t0 > timeout:
            return now_states
        sleep(min(1.0, poll))
        if clock() - last >= poll:
            now_states, last = states(), clock()
