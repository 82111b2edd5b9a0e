"""The hashed locks under locks/ against pyproject.toml (CI fails when they disagree: relock with `make lock`), and
the one-line refusals of a lock that does not fit the machine or the venv."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from semcl.errors import SemclError
from semcl.runtime import lockfile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", lockfile.LOCKS)
def test_repository_locks_agree_with_pyproject(name):
    lock = lockfile.read_lock(ROOT / "locks" / f"{name}.txt")
    assert lockfile.disagreements(lock, ROOT / "pyproject.toml") == []
    assert lock.pins["torch"] == "2.14.1" and lock.python == "3.11" and lock.platform == "x86_64-manylinux_2_28"
    assert all(len(h) == 64 for hs in lock.hashes.values() for h in hs) and all(lock.hashes.values())


def test_setup_lock_is_the_all_lock_restricted():
    setup, every = (lockfile.read_lock(ROOT / "locks" / f"{n}.txt") for n in lockfile.LOCKS)
    assert set(setup.pins) < set(every.pins)
    assert {n: v for n, v in every.pins.items() if n in setup.pins} == setup.pins
    assert {n: every.hashes[n] for n in setup.pins} == setup.hashes
    assert {"wandb", "mlflow-skinny", "tensorboard", "torchcodec"} <= set(every.pins) - set(setup.pins)


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "locks" / "all.txt", tmp_path / "all.txt")
    return tmp_path / "pyproject.toml", tmp_path / "all.txt"


def test_a_changed_pyproject_is_named_line_by_line(tmp_path):
    pyproject, lock_path = _copy(tmp_path)
    text = pyproject.read_text()
    text = text.replace('"numpy>=1.26"', '"numpy>=9"').replace('"tqdm>=4.66",\n', '"tqdm>=4.66",\n    "attrs>=20",\n')
    text = text.replace('faiss = ["faiss-cpu>=1.8"]', 'faiss = []')
    pyproject.write_text(text)
    out = lockfile.disagreements(lockfile.read_lock(lock_path), pyproject)
    assert any("numpy==2.4.6 does not satisfy numpy>=9" in ln for ln in out)
    assert any("attrs>=20 (pyproject.toml) has no line" in ln for ln in out)
    # faiss-cpu went from pyproject: it and nothing else (packaging, numpy are still asked for by others) is stale
    stale = [ln for ln in out if "asked for by nothing" in ln]
    assert len(stale) == 1 and "faiss-cpu==" in stale[0]
    assert len(out) == 3 and all(ln.startswith(str(lock_path)) for ln in out)


def test_an_extra_left_out_of_the_all_lock(tmp_path):
    pyproject, lock_path = _copy(tmp_path)
    pyproject.write_text(pyproject.read_text().replace('timm = ["timm>=1.0"]', 'timm = ["timm>=1.0"]\nextra2 = []'))
    assert lockfile.disagreements(lockfile.read_lock(lock_path), pyproject) == [
        f"{lock_path}: leaves out the extra 'extra2' of pyproject.toml; relock with `make lock`"]


def test_unhashed_or_foreign_lines_are_refused(tmp_path):
    pyproject, lock_path = _copy(tmp_path)
    text = lock_path.read_text()
    lock_path.write_text(text.replace("wandb==0.31.0 \\\n", "wandb>=0.31\n", 1))
    with pytest.raises(SemclError, match=r"all\.txt:\d+: not a pinned requirement"):
        lockfile.read_lock(lock_path)
    (tmp_path / "plain.txt").write_text("torch==2.14.1\n")
    with pytest.raises(SemclError, match="plain.txt: no `uv pip compile` command"):
        lockfile.read_lock(tmp_path / "plain.txt")


def test_platform_and_python_mismatch_are_one_line(tmp_path, monkeypatch):
    lock = lockfile.read_lock(ROOT / "locks" / "all.txt")
    monkeypatch.setattr(lockfile.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(lockfile.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(lockfile.sys, "platform", "linux")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    lock.python = here
    assert lockfile.platform_mismatch(lock) is None
    monkeypatch.setattr(lockfile.platform, "machine", lambda: "aarch64")
    assert lockfile.platform_mismatch(lock) == (f"{lock.path}: locked for x86_64-manylinux_2_28 (Linux x86_64), this is "
                                                "linux aarch64; relock there: make lock")
    monkeypatch.setattr(lockfile.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(lockfile.platform, "libc_ver", lambda: ("glibc", "2.17"))
    assert "glibc >= 2.28" in lockfile.platform_mismatch(lock) and "glibc 2.17" in lockfile.platform_mismatch(lock)
    lock.python = "3.10"
    assert lockfile.platform_mismatch(lock) == (f"{lock.path}: locked for Python 3.10, this is Python {here}; "
                                                "use a Python 3.10 venv")


def test_installed_versions_against_the_pins(tmp_path, monkeypatch):
    lock = lockfile.Lock(tmp_path / "l.txt", [], None, None, pins={"torch": "2.14.1", "numpy": "2.4.6"})
    versions = {"torch": "2.14.1+cu130", "numpy": "2.4.6"}
    monkeypatch.setattr(lockfile.metadata, "version", lambda n: versions[n])
    assert lockfile.installed_mismatch(lock) is None  # the local-version tag of torch's build is not a difference
    versions["numpy"] = "2.3.0"
    assert lockfile.installed_mismatch(lock) == (f"{lock.path}: numpy is 2.3.0 here, the lock pins 2.4.6; "
                                                 "reinstall with `make setup`")


def test_installed_lock_marker(tmp_path):
    assert lockfile.installed_lock(tmp_path) is None
    digest = lockfile.sha256_of(ROOT / "locks" / "setup.txt")
    (tmp_path / lockfile.INSTALLED_FROM).write_text(f"{digest}  locks/setup.txt\n")  # sha256sum's own format
    assert lockfile.installed_lock(tmp_path) == {"lock": "locks/setup.txt", "sha256": digest}
    (tmp_path / lockfile.INSTALLED_FROM).write_text("garbage\n")
    assert lockfile.installed_lock(tmp_path) is None
