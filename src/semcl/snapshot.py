"""Code snapshots for queued jobs: a job runs the code as it was when it was submitted.

The package source and the registry are copied into results/snapshots/<content hash>/ (the
environment, data and results are not), with the git commit, a dirty flag and the diff. Jobs
put the snapshot first on PYTHONPATH, so editing the working tree cannot change a queued job.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import semcl
from semcl.registry import registry_root

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def git_info(repo: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout

    try:
        diff = git("diff", "HEAD", "--", "src", "experiments")
        untracked = git("ls-files", "--others", "--exclude-standard", "--", "src", "experiments").split()
        return {"commit": git("rev-parse", "HEAD").strip(), "dirty": bool(diff or untracked), "diff": diff,
                "untracked": untracked}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "diff": "", "untracked": []}


def make_snapshot(results: Path) -> Path:
    """Copy the package and the registry once per distinct content; returns the snapshot folder."""
    package = Path(semcl.__file__).resolve().parent
    registry = registry_root().resolve()
    digest = hashlib.sha256()
    for base in (package, registry):
        for path in _files(base):
            digest.update(str(path.relative_to(base)).encode())
            digest.update(path.read_bytes())
    folder = (results / "snapshots" / digest.hexdigest()[:12]).resolve()
    if (folder / "snapshot.json").exists():
        return folder
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(package, tmp / "src" / "semcl", ignore=IGNORE)
    shutil.copytree(registry, tmp / "experiments", ignore=IGNORE)
    info = git_info(package.parents[1])
    (tmp / "snapshot.json").write_text(json.dumps({"commit": info["commit"], "dirty": info["dirty"],
                                                   "untracked": info["untracked"]}, indent=2))
    (tmp / "code.diff").write_text(info["diff"])
    if folder.exists():  # a concurrent submission made the same snapshot
        shutil.rmtree(tmp)
    else:
        tmp.rename(folder)
    return folder


def job_setup_lines(folder: Path) -> list[str]:
    """Shell lines for the sbatch script: import semcl from the snapshot."""
    return [f'export PYTHONPATH="{folder}/src${{PYTHONPATH:+:$PYTHONPATH}}"',
            f'export SEMCL_REGISTRY="{folder}/experiments"', f'export SEMCL_SNAPSHOT="{folder}"']
