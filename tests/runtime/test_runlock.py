"""One owner per run: the lock file, its staleness rules (pid on this host, SLURM job state,
heartbeat), `status` showing who runs a run, and `run` skipping an owned run."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from contextlib import redirect_stdout
from dataclasses import asdict

import pytest

from semcl.cli.main import main
from semcl.launch.backends import runs_to_submit
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.runtime import runlock
from semcl.runtime.runlock import LockInfo, RunOwned, acquire, heartbeat, is_stale, read_lock, release, run_lock
from semcl.store import Store


@pytest.fixture
def sleeper():
    """A live process that is not us (the other owner)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _lock(folder, *, host=None, pid=1, job_id=None, age=0.0) -> LockInfo:
    now = time.time()
    info = LockInfo(host or socket.gethostname(), pid, job_id, now - age, now - age, "t" * 32)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / runlock.LOCK_FILE).write_text(json.dumps(asdict(info)))
    return info


def test_lock_records_host_pid_job_and_is_released(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    with run_lock(tmp_path) as me:
        doc = json.loads((tmp_path / "lock.json").read_text())
        assert (doc["host"], doc["pid"], doc["job_id"]) == (socket.gethostname(), me.pid, "4242")
        assert abs(doc["heartbeat"] - time.time()) < 60
    assert not (tmp_path / "lock.json").exists()


def test_a_live_owner_on_this_host_keeps_the_run(tmp_path, sleeper):
    _lock(tmp_path, pid=sleeper.pid)
    with pytest.raises(RunOwned, match=rf"running \({socket.gethostname()}, pid {sleeper.pid}, heartbeat"):
        acquire(tmp_path)
    assert read_lock(tmp_path).pid == sleeper.pid  # untouched


def test_a_dead_owner_on_this_host_is_taken_over(tmp_path):
    _lock(tmp_path, pid=_dead_pid())
    me = acquire(tmp_path)
    assert read_lock(tmp_path).token == me.token
    release(tmp_path, me)
    assert read_lock(tmp_path) is None


def test_other_host_rules_job_state_then_heartbeat(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SEMCL_LOCK_STALE_S", "600")
    now = time.time()

    def other(job=None, age=0.0):
        return LockInfo("node-elsewhere", 99, job, now - age, now - age, "x")

    assert is_stale(other("17_3"), job_states={"17_3": "COMPLETED"})
    assert not is_stale(other("17_3", age=5000), job_states={"17_3": "RUNNING"})  # the job state wins
    assert is_stale(other(age=601), job_states={})  # nothing to ask: the heartbeat decides
    assert not is_stale(other(age=10), job_states={})
    monkeypatch.setenv("SLURM_JOB_ID", "17_3")  # (our own, requeued, job: the lock of its first attempt)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    first_attempt = LockInfo("node-elsewhere", 99, "17_3", now, now, "x", restart="0")
    assert is_stale(first_attempt, job_states={"17_3": "RUNNING"})


def test_heartbeat_refreshes_the_held_lock(tmp_path):
    with run_lock(tmp_path):
        before = json.loads((tmp_path / "lock.json").read_text())["heartbeat"]
        time.sleep(0.05)
        heartbeat(force=True)
        after = json.loads((tmp_path / "lock.json").read_text())["heartbeat"]
    assert after > before


def _first_run():
    return plan_runs(get_table("rince/tab2"), "smoke")[0]


def test_status_shows_running_and_run_skips_the_owned_run(tmp_path, sleeper, capsys):
    run = _first_run()
    store = Store(tmp_path)
    _lock(store.run_dir(run.run_id), pid=sleeper.pid)
    assert runs_to_submit([run], store, retry_failed=False) == []
    said = capsys.readouterr().out
    assert said == f"{run.run_id} {run.row_label} seed={run.seed}: running ({socket.gethostname()}, pid " \
                   f"{sleeper.pid}, heartbeat 0 s ago): skipped\n"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--results", str(tmp_path), "status", "rince/tab2", "--profile", "smoke"]) == 0
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith(run.run_id))
    assert f"running  ({socket.gethostname()}, pid {sleeper.pid}" in line
    assert "running: 1" in out.getvalue()


def _foreign_lock(folder, *, heartbeat_offset: float, written_ago: float, job_id=None, restart=None):
    """A lock another host wrote: its heartbeat by that host's clock (`heartbeat_offset` from ours), the file
    last written `written_ago` seconds ago by the file system's clock."""
    import os

    now = time.time()
    info = LockInfo("node-elsewhere", 99, job_id, now, now + heartbeat_offset, "y" * 32, None, restart)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / runlock.LOCK_FILE
    path.write_text(json.dumps({k: v for k, v in asdict(info).items() if k != "age_s"}))
    os.utime(path, (now - written_ago, now - written_ago))


def test_a_live_owner_whose_clock_is_an_hour_behind_keeps_its_run(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SEMCL_LOCK_STALE_S", "1800")
    _foreign_lock(tmp_path, heartbeat_offset=-3600, written_ago=5)  # its last heartbeat: 5 s ago
    info = read_lock(tmp_path)
    assert not is_stale(info, job_states={}) and 4 <= info.age() < 60
    with pytest.raises(RunOwned, match=r"node-elsewhere, pid 99, heartbeat [4-9] s ago\)"):
        acquire(tmp_path)


def test_a_dead_owner_whose_clock_ran_ahead_is_taken_over_and_said_so(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SEMCL_LOCK_STALE_S", "1800")
    _foreign_lock(tmp_path, heartbeat_offset=+3600, written_ago=7200)  # dead two hours, clock an hour ahead
    info = read_lock(tmp_path)
    assert is_stale(info, job_states={})
    text = info.describe()
    assert text.startswith("node-elsewhere, pid 99, heartbeat 72") and "s in this host's future (clocks disagree)" in text
    me = acquire(tmp_path)
    assert read_lock(tmp_path).token == me.token
    release(tmp_path, me)


def test_the_same_job_attempt_on_another_node_is_neither_stale_nor_another_owner(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    _foreign_lock(tmp_path, heartbeat_offset=0, written_ago=3, job_id="555", restart="1")  # rank 0, node B
    info = read_lock(tmp_path)
    assert not is_stale(info, job_states={"555": "RUNNING"})
    assert runlock.owner(tmp_path) is None  # a rank of this attempt takes part instead of skipping
    with pytest.raises(RunOwned):  # and never breaks it
        acquire(tmp_path)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")  # the job was requeued: the earlier attempt is gone
    assert is_stale(read_lock(tmp_path), job_states={"555": "RUNNING"})


def _previous_release_lock(folder, *, written_ago: float, job_id: str) -> None:
    """A lock the release before the `restart` field wrote (rank 0 of `job_id`, on another node)."""
    import os

    _foreign_lock(folder, heartbeat_offset=0, written_ago=written_ago, job_id=job_id)
    path = folder / runlock.LOCK_FILE
    doc = json.loads(path.read_text())
    del doc["restart"]
    path.write_text(json.dumps(doc))
    os.utime(path, (time.time() - written_ago, time.time() - written_ago))


def test_the_previous_releases_lock_of_this_job_is_not_taken_over(tmp_path, monkeypatch):
    """Turn-4 finding 4 for locks without `restart`: at the job's first attempt the lock is this attempt's (no
    earlier one exists); after a requeue its age decides, as for any lock whose owner cannot be asked."""
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)  # SLURM leaves it unset before a requeue
    monkeypatch.setenv("SEMCL_LOCK_STALE_S", "1800")
    _previous_release_lock(tmp_path, written_ago=0, job_id="555")
    info = read_lock(tmp_path)
    assert info.restart is None and not is_stale(info, job_states={"555": "RUNNING"})
    assert runlock.owner(tmp_path) is None  # this attempt: its ranks take part
    with pytest.raises(RunOwned):
        acquire(tmp_path)
    assert read_lock(tmp_path).token == "y" * 32  # untouched
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # requeued: a fresh lock may be the live earlier attempt's
    assert not is_stale(read_lock(tmp_path), job_states={"555": "RUNNING"})
    _previous_release_lock(tmp_path, written_ago=7200, job_id="555")
    assert is_stale(read_lock(tmp_path), job_states={"555": "RUNNING"})


@pytest.mark.parametrize("old_format", [False, True])
def test_status_inside_the_job_shows_the_run_another_node_runs(tmp_path, monkeypatch, old_format):
    """`semcl status` on a node of the job while rank 0 on another node trains the run: running, not missing."""
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    run = _first_run()
    store = Store(tmp_path)
    folder = store.run_dir(run.run_id)
    if old_format:
        _previous_release_lock(folder, written_ago=2, job_id="555")
    else:
        _foreign_lock(folder, heartbeat_offset=0, written_ago=2, job_id="555", restart="0")
    assert store.status(run.run_id)[0] == "running"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--results", str(tmp_path), "status", "rince/tab2", "--profile", "smoke"]) == 0
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith(run.run_id))
    assert "running  (node-elsewhere, job 555, heartbeat" in line, line
