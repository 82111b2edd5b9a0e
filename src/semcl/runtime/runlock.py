"""One owner per run: a lock file in the run folder (results/runs/<id>/lock.json).

The process that trains a run holds its lock: host, pid, SLURM job id, start time and a
heartbeat that the training loop refreshes at step boundaries (`heartbeat()`, rate-limited).
A lock is stale, and may be taken over, when its owner is provably gone:

1. same host: the pid is not alive (a zombie, exited but not reaped, counts as dead) or is a
   different process than the one that took the lock;
2. a SLURM job id that `sacct`/`squeue` report as no longer queued or running, or our own job id at an
   earlier restart count (a requeued job resuming its run); our own job at the same restart count is this
   very attempt (another rank, another node): never stale, and not another owner. A lock of the previous
   release has no restart count: at our first attempt it is this attempt (there was no earlier one); later,
   which attempt wrote it is unknown, and rule 3 decides;
3. otherwise (another host, no job state to ask): the lock file was last written more than
   $SEMCL_LOCK_STALE_S seconds (default 1800) ago. Its age is read from the file's mtime against a file
   written now beside it, both stamped by the shared file system, so hosts whose clocks disagree agree on it
   (a heartbeat from a host whose clock is behind does not look old; one from a host whose clock ran ahead
   does not look fresh).

Taking a lock is atomic (a fully written temp file hard-linked to lock.json, which fails if it
exists), and so is breaking a stale one (renamed away under a unique name before the retry),
so of two processes racing for a run exactly one wins.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from semcl.errors import ConfigError, ResultsError
from semcl.files import file_mode, move
from semcl.store.run_folder import LOCK

LOCK_FILE = LOCK  # semcl.store.run_folder spells the run folder's files
HEARTBEAT_EVERY_S = 30.0


class RunOwned(ResultsError):
    """The run is owned by another live process."""

    def __init__(self, folder: Path, holder: LockInfo):
        super().__init__(f"{folder}: running ({holder.describe()}); skipped")
        self.holder = holder


@dataclass
class LockInfo:
    host: str
    pid: int
    job_id: str | None
    started: float
    heartbeat: float
    token: str
    proc_start: str | None = None  # /proc/<pid>/stat start time: tells a reused pid apart
    restart: str | None = None  # SLURM_RESTART_COUNT of the job attempt that took it
    # seconds since the lock file was written, by the file system's clock (read_lock); never written
    age_s: float | None = field(default=None, compare=False)

    def age(self) -> float:
        return self.age_s if self.age_s is not None else time.time() - self.heartbeat

    def describe(self) -> str:
        who = f"job {self.job_id}" if self.job_id else f"pid {self.pid}"
        ahead = self.heartbeat - time.time()
        clock = f"; its heartbeat is {int(ahead)} s in this host's future (clocks disagree)" if ahead > 60 else ""
        return f"{self.host}, {who}, heartbeat {max(0, int(self.age()))} s ago{clock}"


def stale_after_s() -> float:
    text = os.environ.get("SEMCL_LOCK_STALE_S", "1800")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # NaN fails this too: a lock must be able to go stale
        raise ConfigError(f"$SEMCL_LOCK_STALE_S = {text!r}: expected a positive number of seconds (default 1800)")
    return value


def slurm_job_id() -> str | None:
    """This process's SLURM job (array tasks as <array>_<task>, as in the manifests)."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


PROC = Path("/proc")


def _proc_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first); the command name (field 2) may hold spaces,
    hence rsplit on ')'. None where unreadable."""
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_start(pid: int) -> str | None:
    fields = _proc_fields(pid)  # field 22: start time in clock ticks since boot
    return fields[19] if fields is not None and len(fields) > 19 else None


def _ps_state(pid: int) -> str | None:
    """The process state letter from `ps` (no /proc, e.g. macOS); None when ps cannot tell."""
    import subprocess

    try:
        out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()[:1] or None


def _is_zombie(pid: int) -> bool:
    """A zombie (exited, not yet reaped by its parent) still answers kill(pid, 0) but is gone."""
    fields = _proc_fields(pid)
    if fields is not None:
        return fields[0] in ("Z", "X")
    if (PROC / "self" / "stat").exists():  # /proc works, this pid has no entry: it exited meanwhile
        return not (PROC / str(pid)).exists()
    return _ps_state(pid) in ("Z", "X")  # no /proc; a ps that cannot tell leaves it alive


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return not _is_zombie(pid)


def slurm_restart() -> str | None:
    return os.environ.get("SLURM_RESTART_COUNT", "0") if slurm_job_id() else None


def _me() -> LockInfo:
    now = time.time()
    return LockInfo(socket.gethostname(), os.getpid(), slurm_job_id(), now, now, uuid.uuid4().hex,
                    _proc_start(os.getpid()), slurm_restart())


def _fs_now(folder: Path) -> float:
    """Now, by the clock that stamps files in `folder` (the file server's on a shared file system); this host's
    clock where nothing can be written there."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".clock.", suffix=".tmp")
    except OSError:
        return time.time()
    try:
        return os.fstat(fd).st_mtime
    finally:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)


def read_lock(folder: Path) -> LockInfo | None:
    """The lock in `folder`; None if absent. An unreadable lock (a crash mid-heartbeat cannot make
    one: heartbeats rename a complete file) reads as an owner on an unknown host, so the
    heartbeat rule, here the file's age, decides."""
    path = folder / LOCK_FILE
    try:
        doc = json.loads(path.read_text())
        info = LockInfo(**{k: doc[k] for k in LockInfo.__dataclass_fields__ if k in doc and k != "age_s"})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        info = LockInfo("?", -1, None, mtime, mtime, "")
    try:
        info.age_s = _fs_now(folder) - path.stat().st_mtime
    except OSError:
        return None  # removed meanwhile
    return info


def is_this_attempt(info: LockInfo) -> bool:
    """The lock was taken by this very SLURM job attempt (by rank 0, possibly on another node)."""
    if info.job_id is None or info.job_id != slurm_job_id():
        return False
    ours = slurm_restart()
    return info.restart == ours or (info.restart is None and ours == "0")  # the previous release's lock


def is_stale(info: LockInfo, *, job_states: dict[str, str] | None = None) -> bool:
    """Whether the lock's owner is gone (the rules in the module docstring)."""
    if info.host == socket.gethostname() and info.pid > 0:
        if not _pid_alive(info.pid):
            return True
        return info.proc_start is not None and _proc_start(info.pid) not in (None, info.proc_start)
    if info.job_id:
        if info.job_id == slurm_job_id():  # our own job: an earlier attempt (requeued) is gone, this one is alive
            if is_this_attempt(info):
                return False
            if info.restart is not None:
                return True
            return info.age() > stale_after_s()  # the previous release's lock, after a requeue: which attempt?
        states = job_states if job_states is not None else _job_states([info.job_id])
        state = states.get(info.job_id)
        if state is not None:
            from semcl.runtime.slurm_state import ACTIVE

            return state not in ACTIVE
    return info.age() > stale_after_s()


_STATE_CACHE: dict[str, tuple[float, str | None]] = {}


def _job_states(job_ids: list[str]) -> dict[str, str]:
    """sacct/squeue states, cached for 15 s (status loops ask about many runs)."""
    from semcl.runtime.slurm_state import sacct_states

    now = time.time()
    missing = [j for j in job_ids if now - _STATE_CACHE.get(j, (0.0, None))[0] > 15]
    if missing:
        found = sacct_states(missing)
        for j in missing:
            _STATE_CACHE[j] = (now, found.get(j))
    return {j: s for j in job_ids if (s := _STATE_CACHE[j][1]) is not None}


def owner(folder: Path) -> LockInfo | None:
    """The live owner of the run in `folder` other than this process, None if nobody owns it."""
    info = read_lock(folder)
    if info is None or info.token in _HELD or is_this_attempt(info) or is_stale(info):
        return None
    return info


def running_lock(folder: Path) -> LockInfo | None:
    """The lock of a live run in `folder` not held by this process: what `status` shows as running. Unlike
    `owner`, this SLURM job attempt's own lock (rank 0 on another node) counts: the run is running."""
    info = read_lock(folder)
    if info is None or info.token in _HELD or is_stale(info):  # this attempt's lock is never stale
        return None
    return info


# ---------------------------------------------------------------- holding a lock

_HELD: dict[str, tuple[Path, LockInfo]] = {}  # token -> (folder, info) of the locks this process holds
_last_beat = 0.0


def _write(path: Path, info: LockInfo, *, exclusive: bool) -> None:
    # not files.write_atomic: a lock without hard links is created O_EXCL (atomic), never checked-then-renamed


    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        doc = {k: v for k, v in asdict(info).items() if k != "age_s"}
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
        os.chmod(tmp, file_mode())
        if exclusive:
            try:
                os.link(tmp, path)  # FileExistsError if someone else holds it
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system: exclusive create, then fill
                with os.fdopen(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode()), "w") as f:
                    json.dump(doc, f, indent=1)
        else:
            move(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def acquire(folder: Path) -> LockInfo:
    """Take the run's lock (breaking a stale one); RunOwned if a live process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    me = _me()
    for _ in range(3):
        try:
            _write(path, me, exclusive=True)
            _HELD[me.token] = (folder, me)
            return me
        except FileExistsError:
            pass
        other = read_lock(folder)
        if other is None:
            continue  # released meanwhile
        if not is_stale(other):
            raise RunOwned(folder, other)
        try:  # one breaker wins the rename; the others find the lock gone or retaken
            stale = path.with_name(f".{LOCK_FILE}.stale.{me.token}")
            move(path, stale)
            stale.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
    other = read_lock(folder)
    raise RunOwned(folder, other or me)


def release(folder: Path, info: LockInfo) -> None:
    """Remove the lock if it is still ours."""
    _HELD.pop(info.token, None)
    current = read_lock(folder)
    if current is not None and current.token == info.token:
        (folder / LOCK_FILE).unlink(missing_ok=True)


@contextmanager
def run_lock(folder: Path) -> Iterator[LockInfo]:
    """Hold the run's lock for the block (RunOwned if another live process holds it)."""
    info = acquire(folder)
    try:
        yield info
    finally:
        release(folder, info)


def heartbeat(force: bool = False) -> None:
    """Refresh the heartbeat of every lock this process holds (at most every HEARTBEAT_EVERY_S).
    Called by the training loop at step boundaries; a no-op outside a held lock."""
    global _last_beat
    now = time.time()
    if not _HELD or (not force and now - _last_beat < HEARTBEAT_EVERY_S):
        return
    _last_beat = now
    for folder, info in list(_HELD.values()):
        current = read_lock(folder)
        if current is None or current.token != info.token:
            continue  # taken over (our heartbeat had gone stale): never overwrite the new owner's lock
        info.heartbeat = now
        try:
            _write(folder / LOCK_FILE, info, exclusive=False)
        except OSError:
            pass  # a full disk must not stop training; the pid / job rules still hold
