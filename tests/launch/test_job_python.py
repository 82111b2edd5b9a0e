"""A cluster profile's `python:` command (submitit's `python=`): parsed strictly, checked on this host before anything
is submitted (its first word, that it runs a Python with semcl, that it reaches scontrol), and written into the
sbatch script the jobs run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from semcl.errors import ConfigError
from semcl.launch.slurm import job_python
from semcl.launch.slurm.profile import parse_cluster_profile
from semcl.runtime import lockfile

ROOT = Path(__file__).resolve().parents[2]


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return path


def _env_with(tmp_path: Path, scontrol: bool) -> dict:
    """This process's environment, with a bin folder first on PATH that holds a `scontrol` or not."""
    bin_dir = tmp_path / ("bin-with" if scontrol else "bin-without")
    bin_dir.mkdir(exist_ok=True)
    if scontrol:
        _script(bin_dir / "scontrol", "exit 0\n")
    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "scontrol").exists()]
    return {**os.environ, "PATH": os.pathsep.join([str(bin_dir), *keep]),
            "PYTHONPATH": str(ROOT / "src")}


def test_profile_key_parses_and_reaches_the_sbatch_script(tmp_path):
    from semcl.launch.slurm.submit import PreviewExecutor, sbatch_script, slurm_executor

    cmd = "apptainer exec --nv -B /usr/bin/scontrol '/shared/images/semcl v1.sif' python"
    prof = parse_cluster_profile({"gpus_per_node": 0, "python": cmd}, "c", "c.yaml")
    assert prof.python == cmd
    ex = slurm_executor(tmp_path, {"partition": "debug", "time": 15}, prof, 1, [], "j", PreviewExecutor)
    assert f"{cmd} -u -m submitit.core._submit" in sbatch_script(ex, 1)
    default = parse_cluster_profile({"gpus_per_node": 0}, "c", "c.yaml")
    ex = slurm_executor(tmp_path, {"partition": "debug", "time": 15}, default, 1, [], "j", PreviewExecutor)
    assert f"{sys.executable} -u -m submitit.core._submit" in sbatch_script(ex, 1)


@pytest.mark.parametrize("value,why", [("apptainer exec 'semcl.sif python", "does not parse as a shell command"),
                                       ("   ", "must be one non-empty command line"),
                                       ("python\nrm -rf /", "must be one non-empty command line")])
def test_a_bad_python_value_is_one_line(value, why):
    with pytest.raises(ConfigError, match=f"^c.yaml: 'python' = .*{why}"):
        parse_cluster_profile({"gpus_per_node": 0, "python": value}, "c", "c.yaml")


def test_a_wrapper_that_runs_python_with_semcl_and_scontrol_passes(tmp_path):
    wrap = _script(tmp_path / "wrap-python", f'exec {sys.executable} "$@"\n')
    report = job_python.check_job_python(str(wrap), "p.yaml", env=_env_with(tmp_path, scontrol=True))
    assert report == {"python": sys.version.split()[0], "semcl": True, "scontrol": str(tmp_path / "bin-with" / "scontrol")}
    assert job_python.check_job_python(None, "p.yaml") is None  # no `python:`: this host's own interpreter


def test_each_problem_is_one_line_naming_the_profile(tmp_path):
    env = _env_with(tmp_path, scontrol=True)
    with pytest.raises(ConfigError, match=r"^p.yaml: 'python' = 'no-such-apptainer exec x.sif python': "
                                          r"'no-such-apptainer' is not an executable on this host's PATH"):
        job_python.check_job_python("no-such-apptainer exec x.sif python", "p.yaml", env=env)
    failing = _script(tmp_path / "broken", 'echo "FATAL: image not found: semcl.sif" >&2; exit 255\n')
    with pytest.raises(ConfigError, match=r"does not run a Python here \(FATAL: image not found: semcl.sif\)"):
        job_python.check_job_python(str(failing), "p.yaml", env=env)
    # a Python without semcl: no site-packages (-S), PYTHONPATH ignored (-E)
    bare = _script(tmp_path / "bare-python", f'exec {sys.executable} -S -E "$@"\n')
    with pytest.raises(ConfigError, match=r"runs Python [\d.]+ without semcl"):
        job_python.check_job_python(str(bare), "p.yaml", env=env)
    wrap = _script(tmp_path / "wrap-python", f'exec {sys.executable} "$@"\n')
    with pytest.raises(ConfigError, match=r"cannot reach scontrol, so no job could requeue itself"):
        job_python.check_job_python(str(wrap), "p.yaml", env=_env_with(tmp_path, scontrol=False))


def test_the_venvs_lock_is_checked_against_the_machine_and_the_packages(tmp_path, monkeypatch):
    lock = ROOT / "locks" / "all.txt"
    monkeypatch.setattr(lockfile, "installed_lock", lambda prefix=None: None)
    job_python.check_lock_here()  # a venv made without a lock: nothing to check
    monkeypatch.setattr(lockfile, "installed_lock", lambda prefix=None: {"lock": str(lock), "sha256": "0" * 64})
    monkeypatch.setattr(lockfile, "platform_mismatch", lambda lk: None)
    monkeypatch.setattr(lockfile, "installed_mismatch", lambda lk: None)
    with pytest.raises(ConfigError, match=r"all.txt: changed since this venv was installed from it"):
        job_python.check_lock_here()
    digest = lockfile.sha256_of(lock)
    monkeypatch.setattr(lockfile, "installed_lock", lambda prefix=None: {"lock": "locks/all.txt", "sha256": digest})
    job_python.check_lock_here()  # relative to the clone, unchanged, fitting
    monkeypatch.setattr(lockfile, "platform_mismatch", lambda lk: f"{lk.path}: locked for Python 3.11, this is 3.12")
    with pytest.raises(ConfigError, match=r"all.txt: locked for Python 3.11, this is 3.12$"):
        job_python.check_lock_here()
