"""The live view of running runs (semcl.launch.live): one line per active run from its progress.json on a terminal
(the local executor's `run`, `status --watch`), plain lines one per finished epoch elsewhere; what the lines say,
read off hand-written run folders and off real local runs (on a pseudo-terminal and through a pipe)."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semcl.launch.live import LiveView, describe, epoch_line, follow
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.runtime.progress import ProgressFile, read_progress, write_phase
from semcl.runtime.runlock import run_lock
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_describe_says_epoch_step_loss_rate_and_eta_less_the_file_age():
    doc = {"phase": "train", "since": 0.0, "epoch": 2, "epochs": 4, "step": 5, "steps": 10, "loss": 4.21,
           "rate": 2.5, "eta_s": 100.0, "time": 1000.0}
    # written 10 s ago: 100 - 10 = 90 s left
    assert describe(doc, 1010.0) == "epoch 2/4 step 5/10 loss 4.2100 2.5 it/s ETA 1:30"
    assert describe({**doc, "rate": 0.25}, 1000.0) == "epoch 2/4 step 5/10 loss 4.2100 4.0 s/it ETA 1:40"
    assert describe({**doc, "rate": None, "eta_s": None}, 1000.0) == "epoch 2/4 step 5/10 loss 4.2100 ETA ?"
    assert describe({**doc, "time": 0.0}, 1000.0).endswith("ETA 0:00 (no update for 16:40)")
    assert describe({"phase": "evaluate", "since": 935.0, "time": 935.0}, 1000.0) == "evaluating 1:05"
    assert describe({"phase": "start", "since": 998.0, "time": 998.0}, 1000.0) == "starting 0:02"
    assert describe(None, 1000.0) == "starting"
    # a finished epoch's plain line: ETA at the mean pace so far, (4 - 2) x (10 + 20) / 2 = 30 s
    assert epoch_line({"epoch": 2, "loss": 3.5, "seconds": 20.0}, 4, [{"seconds": 10.0}, {"seconds": 20.0}]) \
        == "epoch 2/4 loss 3.5000 20.0 s ETA 0:30"


def test_progress_file_is_rewritten_at_most_once_a_second_and_at_the_epoch_end(tmp_path):
    now = [100.0]
    path = tmp_path / "progress.json"
    f = ProgressFile(path, epochs=3, clock=lambda: now[0])
    seen = []
    for step in range(1, 9):  # 8 steps 0.4 s apart: written at steps 1, 4 (1.2 s later), 7 and the last one
        now[0] = 100.0 + 0.4 * step
        f.update(1, step, 8, 2.0 + step)
        seen.append(read_progress(path)["step"])
    assert seen == [1, 1, 1, 4, 4, 4, 7, 8]
    doc = read_progress(path)
    # rate from step 1 on: 7 steps in 2.8 s = 2.5 it/s; left: 1 more epoch of 8 steps = 3.2 s
    assert {k: doc[k] for k in ("phase", "epoch", "epochs", "step", "steps", "loss")} == \
        {"phase": "train", "epoch": 2, "epochs": 3, "step": 8, "steps": 8, "loss": 10.0}
    assert doc["rate"] == pytest.approx(2.5) and doc["eta_s"] == pytest.approx(3.2)
    write_phase(path, "evaluate")
    assert read_progress(path)["phase"] == "evaluate"
    path.write_text('{"phase": "trai')  # unreadable: the view shows nothing rather than stopping
    assert read_progress(path) is None


def _runs():
    return [r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "RINCE-in"]


def test_plain_lines_are_one_per_finished_epoch_then_evaluating_then_done(tmp_path):
    store = Store(tmp_path / "results")
    a, b, c = _runs()
    out = io.StringIO()
    view = LiveView([a, b, c], store, stream=out, tty=False)
    for run in (a, b):
        store.folder(run.run_id).path.mkdir(parents=True)
    store.folder(a.run_id).history.write_text(json.dumps({"epoch": 1, "loss": 3.25, "seconds": 12.0}) + "\n")
    view.update({a.run_id: "running", b.run_id: "running", c.run_id: "done"})  # c: done before the watch
    view.update({a.run_id: "running", b.run_id: "running", c.run_id: "done"})  # nothing new: nothing printed
    # the epochs of a 1-epoch run, its evaluation, its end; b ends without a history (failed at its start)
    write_phase(store.folder(a.run_id).progress, "evaluate")
    view.update({a.run_id: "running", b.run_id: "failed", c.run_id: "done"})
    view.update({a.run_id: "done", b.run_id: "failed", c.run_id: "done"})
    assert out.getvalue().splitlines() == [
        f"rince/tab2  RINCE-in  seed {a.seed}  epoch 1/1 loss 3.2500 12.0 s ETA 0:00",
        f"rince/tab2  RINCE-in  seed {a.seed}  evaluating",
        f"rince/tab2  RINCE-in  seed {b.seed}  failed",
        f"rince/tab2  RINCE-in  seed {a.seed}  done"]


def test_follow_reads_the_states_every_poll_and_stops_when_none_is_active():
    now, calls, updates = [0.0], [], []

    class View:
        def update(self, states):
            updates.append((now[0], states["r"]))

    answers = iter(["pending", "running", "running", "done"])

    def states():
        calls.append(now[0])
        return {"r": next(answers)}

    def sleep(s):
        now[0] += s

    last = follow(View(), states, poll=2.5, clock=lambda: now[0], sleep=sleep)
    assert last == {"r": "done"}
    # states at 0, then the first second at or past each 2.5 s; the lines every second in between
    assert calls == [0.0, 3.0, 6.0, 9.0]
    assert updates == [(0.0, "pending"), (1.0, "pending"), (2.0, "pending"), (3.0, "running"), (4.0, "running"),
                       (5.0, "running"), (6.0, "running"), (7.0, "running"), (8.0, "running"), (9.0, "done")]


def _spawn_on_pty(argv: list[str], env: dict, cols: int = 200):
    """Start `argv` on a fresh pseudo-terminal of `cols` columns; (pid, fd)."""
    import fcntl
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdout and stderr are the terminal
        os.chdir(REPO)
        os.execve(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    return pid, fd


def _read_pty(fd: int, until, timeout: float) -> list[tuple[float, str]]:
    """(seconds since the start, text) of each chunk the terminal shows, until `until(text so far)` or EOF."""
    t0, chunks = time.monotonic(), []
    while time.monotonic() - t0 < timeout:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.monotonic() - t0, ANSI.sub("", data.decode(errors="replace"))))
            if until("".join(c for _, c in chunks)):
                break
    return chunks


def _env(**extra) -> dict:
    # COLUMNS / LINES (set in pytest-xdist's workers) would override the pseudo-terminal's own size
    env = {k: v for k, v in os.environ.items() if k not in ("SEMCL_PROGRESS", "SEMCL_TRACKING", "COLUMNS", "LINES")}
    return {**env, "PYTHONPATH": str(REPO / "src"), "TERM": "xterm", **extra}


@pytest.mark.slow
def test_local_smoke_run_on_a_terminal_shows_epoch_and_eta_within_5_s_of_the_first_step(tmp_path):
    """`semcl run` on a terminal: each running run's line has `epoch 1/1 step k/10` and an ETA with a number no
    later than 5 s after the first step line appears; the evaluation phase is named; every run ends done."""
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "semcl.cli", "run", "rince/tab2", "--profile", "smoke", "--row", "RINCE-in",
            "--executor", "local", "--results", str(results)]
    pid, fd = _spawn_on_pty(argv, _env())
    try:
        chunks = _read_pty(fd, lambda text: "runs done" in text, timeout=900)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = "".join(c for _, c in chunks)
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    step = re.compile(r"rince/tab2\s+RINCE-in\s+seed \d+\s+epoch 1/1 step \d+/10 loss \d+\.\d{4}")
    eta = re.compile(step.pattern + r" \d+\.\d (it/s|s/it) ETA \d+:\d\d")
    first_step = next(t for t, c in chunks if step.search(c))
    first_eta = next(t for t, c in chunks if eta.search(c))
    assert first_eta - first_step <= 5.0
    assert re.search(r"rince/tab2\s+RINCE-in\s+seed \d+\s+evaluating \d+:\d\d", text)
    assert sorted(re.findall(r"RINCE-in  seed (\d+)  done", text)) == sorted(str(r.seed) for r in _runs())
    assert "3 of 3 runs done" in text
    for run in _runs():  # the progress file goes once the record is written
        assert not Store(results).folder(run.run_id).progress.exists()


TINY = """\
id: test/tiny
paper: gpaco
source: "test"
title: one tiny CE run
preset: paco_imagenet_lt_resnet50
seeds: [123]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: CE, method: ce}
profiles:
  smoke:
    seeds: [123]
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 10
      data.synthetic_test_per_class: 1
      data.image_size: 16
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 10
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 3
"""


@pytest.mark.slow
def test_local_run_through_a_pipe_prints_one_plain_line_per_epoch_and_its_log_opens_with_a_header(
        tmp_path, registry_copy):
    (registry_copy / "test").mkdir()
    (registry_copy / "test" / "tiny.yaml").write_text(TINY)
    run = plan_runs(get_table("test/tiny"), "smoke")[0]
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "semcl.cli", "run", "test/tiny", "--profile", "smoke", "--executor",
                           "local", "--results", str(results)], capture_output=True, text=True, cwd=REPO,
                          env=_env(SEMCL_REGISTRY=str(registry_copy)), timeout=600)
    assert done.returncode == 0, done.stderr
    history = [json.loads(line) for line in Store(results).folder(run.run_id).history.read_text().splitlines()]
    seconds = [h["seconds"] for h in history]
    lines = [line for line in done.stdout.splitlines() if line.startswith("test/tiny")]
    evaluating = "test/tiny  CE  seed 123  evaluating"  # printed when a poll falls in the evaluation
    assert lines.count(evaluating) <= 1
    # one line per epoch: its loss and seconds from history.jsonl, the ETA at the mean pace of the epochs so far
    assert [line for line in lines if line != evaluating] == [
        *(f"test/tiny  CE  seed 123  epoch {k}/3 loss {history[k - 1]['loss']:.4f} {seconds[k - 1]:.1f} s ETA "
          + _mmss((3 - k) * sum(seconds[:k]) / k) for k in (1, 2, 3)),
        "test/tiny  CE  seed 123  done"]
    assert "\r" not in done.stdout and "\x1b[" not in done.stdout
    assert not Store(results).folder(run.run_id).progress.exists()
    log = Store(results).folder(run.run_id).log.read_text().splitlines()
    header = [line.split(" semcl.job ", 1)[1] for line in log[:4]]
    from semcl.engine.job import pick_device
    from semcl.engine.provenance import device_name, git_state, versions

    v, git = versions(), git_state()
    assert header == [
        f"run {run.run_id}: table test/tiny | row CE | seed 123 | profile smoke | stage all",
        f"device {device_name(pick_device())} | world size 1 | rank 0",
        f"versions: python {v['python']}, torch {v['torch']}, torchvision {v['torchvision']}, semcl {v['semcl']}",
        f"code: commit {git['commit']}" + (" (uncommitted changes in src/ or experiments/)" if git["dirty"] else "")]


def _mmss(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}"


def test_status_watch_on_a_terminal_shows_each_running_runs_line_until_none_runs(tmp_path):
    """A store written by hand: two runs whose locks this test holds (live owners for another process), one
    training (progress.json at epoch 1/1 step 4/10), one evaluating for 65 s. `status --watch` shows both lines,
    and ends with the status listing once the locks are released."""
    results = tmp_path / "results"
    store = Store(results)
    a, b, _ = _runs()
    for run in (a, b):
        store.folder(run.run_id).path.mkdir(parents=True)
    argv = [sys.executable, "-m", "semcl.cli", "status", "rince/tab2", "--profile", "smoke", "--row", "RINCE-in",
            "--watch", "--poll", "0.5", "--results", str(results)]
    with run_lock(store.folder(a.run_id).path), run_lock(store.folder(b.run_id).path):
        (store.folder(a.run_id).progress).write_text(json.dumps(
            {"phase": "train", "since": time.time(), "epoch": 1, "epochs": 1, "step": 4, "steps": 10, "loss": 2.5,
             "rate": 2.0, "eta_s": 30.0, "time": time.time()}))
        (store.folder(b.run_id).progress).write_text(json.dumps(
            {"phase": "evaluate", "since": time.time() - 65, "time": time.time() - 65}))
        pid, fd = _spawn_on_pty(argv, _env())
        train = re.compile(rf"rince/tab2\s+RINCE-in\s+seed {a.seed}\s+epoch 1/1 step 4/10 loss 2\.5000 2\.0 it/s "
                           r"ETA 0:(2\d|30)")
        evaluating = re.compile(rf"rince/tab2\s+RINCE-in\s+seed {b.seed}\s+evaluating 1:\d\d")
        chunks = _read_pty(fd, lambda text: bool(train.search(text) and evaluating.search(text)), timeout=120)
        text = "".join(c for _, c in chunks)
        assert train.search(text) and evaluating.search(text), text
        assert "0 of 3 done, 2 running, 1 queued" in text
    rest = _read_pty(fd, lambda text: False, timeout=120)  # the locks are gone: no run is active any more
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    end = "".join(c for _, c in rest)
    assert os.waitstatus_to_exitcode(status) == 0, end
    assert "# rince/tab2 profile=smoke" in end and "missing: 3" in end
