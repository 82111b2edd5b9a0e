"""The command a cluster profile's jobs start Python with (`python:`, e.g. `apptainer exec --nv semcl.sif python`),
checked on the submitting host before anything is submitted: its first word exists, it runs, it imports semcl, and
it reaches `scontrol` (submitit requeues a job with `scontrol requeue` from inside it: a container without it
loses every requeue, Lightning-AI/pytorch-lightning#21404). Also the venv's dependency lock against this machine.
Each problem is one line (ConfigError) naming the profile and the key."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from semcl.errors import ConfigError

# what the job's Python reports about itself, run through the profile's command
PROBE = ("import json, shutil, sys\n"
         "try:\n    import semcl; ok = True\nexcept Exception:\n    ok = False\n"
         "print(json.dumps({'python': sys.version.split()[0], 'semcl': ok, 'scontrol': shutil.which('scontrol')}))")
PROBE_TIMEOUT_S = 300  # the first start of a large image may unpack it


def python_words(command: str, where: str) -> list[str]:
    """The profile's `python` command as words; ConfigError when it is empty or does not parse as one shell line."""
    try:
        words = shlex.split(command)
    except ValueError as err:
        raise ConfigError(f"{where}: 'python' = {command!r} does not parse as a shell command ({err})") from None
    if not words or "\n" in command:
        raise ConfigError(f"{where}: 'python' = {command!r} must be one non-empty command line "
                          "(e.g. apptainer exec --nv semcl.sif python)")
    return words


def check_job_python(command: str | None, where: str, env: dict | None = None) -> dict | None:
    """Run PROBE through `command` here (None: the jobs use this host's own Python, nothing to check); its report,
    or the one-line ConfigError: first word not found, the command fails, no semcl inside, no scontrol inside."""
    if command is None:
        return None
    words = python_words(command, where)
    first = words[0]
    found = (first if os.access(first, os.X_OK) and Path(first).is_file() else None) if "/" in first else shutil.which(first)
    if found is None:
        raise ConfigError(f"{where}: 'python' = {command!r}: {first!r} is not an executable on this host's PATH "
                          "(the nodes run the same command; install it or give its full path)")
    try:
        done = subprocess.run([*words, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{where}: 'python' = {command!r} did not answer within {PROBE_TIMEOUT_S} s") from None
    last = (done.stdout.strip().splitlines() or [""])[-1]
    try:
        report = json.loads(last) if done.returncode == 0 else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1][:200]
        raise ConfigError(f"{where}: 'python' = {command!r} does not run a Python here ({why})")
    if not report.get("semcl"):
        raise ConfigError(f"{where}: 'python' = {command!r} runs Python {report.get('python')} without semcl "
                          "(build the container from the lock: containers/README.md)")
    if not report.get("scontrol"):
        raise ConfigError(f"{where}: 'python' = {command!r} cannot reach scontrol, so no job could requeue itself; "
                          "bind SLURM's commands into the container (apptainer exec -B /usr/bin/scontrol ...; "
                          "containers/README.md)")
    return report


def check_lock_here() -> None:
    """ConfigError when this venv was installed from a lock (`make setup`) that does not fit this machine, or whose
    pins the installed packages no longer match; nothing for a venv made without one."""
    from semcl.runtime.lockfile import installed_lock, installed_mismatch, platform_mismatch, read_lock, sha256_of

    marker = installed_lock()
    if marker is None:
        return
    path = Path(marker["lock"])
    if not path.is_absolute():
        from semcl.locations import CHECKOUT

        path = CHECKOUT / path
    if not path.exists():
        return  # an installed wheel away from its clone: the venv's own pins are all there is
    lock = read_lock(path)
    problem = platform_mismatch(lock) or installed_mismatch(lock)
    if problem is None and sha256_of(path) != marker["sha256"]:
        problem = f"{path}: changed since this venv was installed from it; reinstall with `make setup`"
    if problem:
        raise ConfigError(problem)


def profile_path(cluster) -> str:
    from semcl.locations import profiles_root

    return str(profiles_root() / f"{cluster.name}.yaml")


def check_environment(cluster, where: str) -> dict | None:
    """Both checks, before `run --executor slurm`, `doctor` or `check --cluster` submits or computes anything."""
    check_lock_here()
    return check_job_python(cluster.python, where)
