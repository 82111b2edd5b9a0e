"""Code snapshots for queued jobs: a job runs the code as it was when it was submitted.

The package source and the registry are copied into results/snapshots/<content hash>/ (the
environment, data and results are not), with the git commit, a dirty flag and the diff. Jobs
put the snapshot first on PYTHONPATH, so editing the working tree cannot change a queued job.

Several submissions may snapshot the same code at once: each writer copies into a temp folder of
its own (mkdtemp beside the snapshots) and renames it into place, which is atomic and fails when
the name is taken; a snapshot at its final name is therefore always complete, and never moved or
deleted here. Each holds manifest.json (every file and its sha256), checked before a snapshot is
reused; one that fails the check (files deleted, changed or added since) is not reused: the code
is snapshotted again beside it (<hash>-1, <hash>-2, ...) and the broken one is named on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import semcl
from semcl.errors import ConfigError, ResultsError
from semcl.locations import built_from, registry_root
from semcl.store.root import ResultsRoot

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
MANIFEST = "manifest.json"
CODE_DIRS = ("src/semcl", "experiments")  # where the package and the registry go in a snapshot
MAX_COPIES = 10  # <hash>, <hash>-1, ...: how many broken snapshots of one code are stepped over


def _files(root: Path) -> list[Path]:
    # __pycache__: jobs running from a snapshot may write byte code into it
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_hashes(root: Path, prefix: str = "") -> dict[str, str]:
    """{path relative to `root` (under `prefix`): sha256} of the files a snapshot keeps."""
    return {f"{prefix}{p.relative_to(root).as_posix()}": _sha256(p) for p in _files(root)}


def code_manifest(package: Path, registry: Path) -> dict[str, str]:
    """The code files a snapshot of (`package`, `registry`) holds, as snapshot-relative paths."""
    return {**file_hashes(package, f"{CODE_DIRS[0]}/"), **file_hashes(registry, f"{CODE_DIRS[1]}/")}


def _is_code(name: str) -> bool:
    return any(name.startswith(f"{d}/") for d in CODE_DIRS)


def code_digest(code: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(code.items())).encode()).hexdigest()


def snapshot_problem(folder: Path, code: dict[str, str] | None = None) -> str | None:
    """Why `folder` is not a complete snapshot (of `code`, if given), None when it is: its manifest
    lists exactly the files it holds, each with its hash."""
    try:
        listed = json.loads((folder / MANIFEST).read_text())["files"]
        if not isinstance(listed, dict):
            return f"{MANIFEST}: key 'files' is not a mapping"
    except FileNotFoundError:
        return f"no {MANIFEST}"
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{MANIFEST} unreadable ({type(err).__name__})"
    if code is not None and {k: v for k, v in listed.items() if _is_code(k)} != code:
        return f"{MANIFEST} lists other code"
    try:
        held = {k: v for k, v in file_hashes(folder).items() if k != MANIFEST}
    except OSError as err:
        return f"unreadable ({type(err).__name__}: {err})"
    if held != listed:
        changed = sorted(set(held) ^ set(listed)) or sorted(k for k in held if held[k] != listed[k])
        return f"{len(changed)} file(s) missing, added or changed, e.g. {changed[0]}"
    return None


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


def _candidates(parent: Path, code: dict[str, str]) -> list[Path]:
    name = code_digest(code)[:12]
    return [parent / (name if i == 0 else f"{name}-{i}") for i in range(MAX_COPIES)]


def _build(parent: Path, package: Path, registry: Path) -> Path:
    """A complete snapshot in a temp folder of this writer's own (manifest written last)."""
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=".tmp-"))
    try:
        try:
            shutil.copytree(package, tmp / CODE_DIRS[0], ignore=IGNORE)
            shutil.copytree(registry, tmp / CODE_DIRS[1], ignore=IGNORE)
        except shutil.Error as err:  # e.g. a symlink loop or a dangling link under the registry: one line
            first = err.args[0][0] if err.args and isinstance(err.args[0], list) and err.args[0] else err
            src, why = (first[0], first[2]) if isinstance(first, tuple) and len(first) == 3 else ("", str(first))
            raise ConfigError(f"{src or registry}: cannot be copied into the job's code snapshot ({why}); "
                              "remove or fix the link") from None
        built = built_from(package)  # an installed wheel: the commit it was built from, no clone to diff
        info = {**built, "diff": "", "untracked": []} if built else git_info(package.parents[1])
        (tmp / "snapshot.json").write_text(json.dumps({"commit": info["commit"], "dirty": info["dirty"],
                                                       "untracked": info["untracked"]}, indent=2))
        (tmp / "code.diff").write_text(info["diff"])
        (tmp / MANIFEST).write_text(json.dumps({"files": file_hashes(tmp)}, indent=1))
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes 0700; a snapshot is read like any folder of the store
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def make_snapshot(results: Path, package: Path | None = None, registry: Path | None = None) -> Path:
    """The snapshot folder of the package and registry (default: the ones in use): a verified
    existing one, else a new one."""
    package = Path(package or Path(semcl.__file__).parent).resolve()
    registry = Path(registry or registry_root()).resolve()
    parent = ResultsRoot(results).snapshots.resolve()
    parent.mkdir(parents=True, exist_ok=True)
    code = code_manifest(package, registry)
    for folder in _candidates(parent, code):
        if not folder.exists():
            break
        why = snapshot_problem(folder, code)
        if why is None:
            return folder
        print(f"{folder}: broken snapshot ({why}); not reused (delete it once no job uses it)", file=sys.stderr)
    tmp = _build(parent, package, registry)
    renamed = False
    try:
        copied = {k: v for k, v in json.loads((tmp / MANIFEST).read_text())["files"].items() if _is_code(k)}
        for folder in _candidates(parent, copied):  # `copied`: the tree may have changed since it was hashed
            try:
                tmp.rename(folder)  # atomic; fails when another writer's snapshot holds the name
                renamed = True
                return folder
            except OSError:
                if not folder.exists():
                    raise
            if snapshot_problem(folder, copied) is None:
                return folder  # another writer made the same snapshot first
    finally:
        if not renamed:
            shutil.rmtree(tmp, ignore_errors=True)
    raise ResultsError(f"{parent}: {MAX_COPIES} broken snapshots of this code ({_candidates(parent, copied)[0].name}"
                       f"...); delete them and submit again")


def job_setup_lines(folder: Path) -> list[str]:
    """Shell lines for the sbatch script: import semcl from the snapshot."""
    return [f'export PYTHONPATH="{folder}/src${{PYTHONPATH:+:$PYTHONPATH}}"',
            f'export SEMCL_REGISTRY="{folder}/experiments"', f'export SEMCL_SNAPSHOT="{folder}"']
