"""The built wheel works with no clone around: it carries the registry, the cluster profiles and the data files,
and `semcl list / show / plan` run from it in a folder outside the clone; a user's own registry (--registry,
$SEMCL_REGISTRY) and profiles ($SEMCL_CLUSTER_PROFILES) still win over the packaged copies.

One module-scoped build (a copy of the source tree in tmp, so the clone gets no build/ folder) and one venv
that reuses this venv's site-packages through a .pth, so torch is not installed again (~15 s in all)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from semcl.locations import CHECKOUT, SHIPPED

pytestmark = pytest.mark.slow
ROOT = CHECKOUT
DATA_FILES = ROOT / "src" / "semcl" / "data" / "files"


def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _committed(where: Path) -> str:
    """`where` as a git repository of one commit; its HEAD."""
    _git(where, "init", "-q")
    _git(where, "add", ".")
    _git(where, "commit", "-q", "-m", "snapshot")
    return _git(where, "rev-parse", "HEAD")


def _copy_source(dest: Path) -> None:
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", ".gitignore"):
        shutil.copy2(ROOT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src" / "semcl", dest / "src" / "semcl", ignore=skip)
    for source in SHIPPED.values():
        shutil.copytree(ROOT / source, dest / source, ignore=skip)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel file, venv bin folder, an empty folder outside the clone, a clean environment, the source's commit)."""
    tmp = tmp_path_factory.mktemp("wheel")
    _copy_source(tmp / "source")
    commit = _committed(tmp / "source")  # the build records it: an installed package has no clone to ask
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", str(tmp / "source"),
                    "-w", str(tmp / "dist")], check=True, cwd=tmp, capture_output=True)
    (wheel,) = (tmp / "dist").glob("semcl-*.whl")
    # the venv inside some other repository, whose commit the runs must not report as theirs
    (tmp / "outer").mkdir()
    (tmp / "outer" / "notes.txt").write_text("another project\n")
    _committed(tmp / "outer")
    venv = tmp / "outer" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv_python = venv / "bin" / "python"
    site = subprocess.run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # torch, pandas ... from this venv; its editable semcl .pth is not read from there (a .pth line is a path only)
    Path(site, "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(venv_python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEMCL_", "PYTHON"))}
    # PATH: the venv only, so no scontrol answers (the slurm plan asks it for MaxArraySize, seconds without a cluster)
    env.update(SEMCL_CACHE=str(tmp / "cache"), OMP_NUM_THREADS="1", PATH=str(venv / "bin"))
    (tmp / "elsewhere").mkdir()
    return wheel, venv / "bin", tmp / "elsewhere", env, commit


def _semcl(installed, *args, env=None):
    _, bin_dir, cwd, base, _ = installed
    return subprocess.run([str(bin_dir / "semcl"), *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def test_wheel_carries_registry_profiles_and_data_files(installed):
    wheel = installed[0]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for package_dir, source in SHIPPED.items():
            files = sorted(p for p in (ROOT / source).rglob("*.yaml"))
            assert files
            for path in files:
                inside = f"semcl/{package_dir}/{path.relative_to(ROOT / source).as_posix()}"
                assert zf.read(inside) == path.read_bytes(), inside
        package = ROOT / "src" / "semcl"
        data = [p for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
        assert DATA_FILES / "word_sims_imagenet100.npy" in data
        for path in data:  # what the code reads beside its modules (class lists, the RINCE matrix, ...)
            assert zf.read(f"semcl/{path.relative_to(package).as_posix()}") == path.read_bytes(), path
    shipped = {n for n in names if n.startswith(("semcl/_registry/", "semcl/_profiles/"))}
    assert shipped and all(n.endswith(".yaml") for n in shipped)
    assert len(shipped) == sum(len(list((ROOT / s).rglob("*.yaml"))) for s in SHIPPED.values())


def test_installed_semcl_lists_shows_and_plans_outside_the_clone(installed):
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    where = _semcl(installed, "--version")
    assert where.returncode == 0 and "semcl 0.1.0" in where.stdout
    probe = subprocess.run([str(installed[1] / "python"), "-c", "import semcl.locations as l; print(l.registry_root())"],
                           cwd=installed[2], env=installed[3], capture_output=True, text=True, check=True)
    assert Path(probe.stdout.strip()).parts[-2:] == ("semcl", "_registry")
    assert not Path(probe.stdout.strip()).is_relative_to(ROOT)

    listed = _semcl(installed, "list", "rince", "--profile", "smoke")  # the index slot plan reads next
    assert listed.returncode == 0, listed.stderr
    assert "rince/tab2" in listed.stdout and "registry folder not found" not in listed.stderr
    shown = _semcl(installed, "show", "rince/tab2")
    assert shown.returncode == 0, shown.stderr
    assert f"file: {Path(probe.stdout.strip()) / 'rince' / 'tab2.yaml'}" in shown.stdout
    planned = _semcl(installed, "plan", "rince/tab2", "--profile", "smoke")
    assert planned.returncode == 0, planned.stderr
    ids = [line.split()[0] for line in planned.stdout.splitlines() if not line.startswith("#") and line.strip()]
    # the installed copy plans exactly the runs (same ids) this clone plans
    assert ids[:len(plan_runs(get_table("rince/tab2"), "smoke"))] == [r.run_id for r in
                                                                       plan_runs(get_table("rince/tab2"), "smoke")]
    slurm = _semcl(installed, "plan", "rince/tab2", "--profile", "smoke", "--executor", "slurm", "--cluster",
                   "example-a100")
    assert slurm.returncode == 0, slurm.stderr
    assert "# array of 51 runs: account=my-lab," in slurm.stdout  # the packaged example-a100.yaml


def test_users_own_registry_and_profiles_override_the_packaged_ones(installed, tmp_path):
    own = tmp_path / "registry"
    shutil.copytree(ROOT / "experiments" / "presets", own / "presets")
    (own / "rince").mkdir()
    shutil.copy2(ROOT / "experiments" / "rince" / "tab1.yaml", own / "rince" / "tab1.yaml")
    for how in (["--registry", str(own)], []):
        listed = _semcl(installed, *how, "list", env={} if how else {"SEMCL_REGISTRY": str(own)})
        assert listed.returncode == 0, listed.stderr
        tables = [line.split()[0] for line in listed.stdout.splitlines()[1:] if "/" in line.split(" ")[0]]
        assert tables == ["rince/tab1"]
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    mine = (ROOT / "slurm" / "profiles" / "example-a100.yaml").read_text().replace("account: my-lab", "account: own-lab")
    (profiles / "mine.yaml").write_text(mine)
    env = {"SEMCL_CLUSTER_PROFILES": str(profiles)}
    ok = _semcl(installed, "plan", "rince/tab2", "--profile", "smoke", "--executor", "slurm", "--cluster", "mine", env=env)
    assert ok.returncode == 0, ok.stderr
    assert "# array of 51 runs: account=own-lab," in ok.stdout
    missing = _semcl(installed, "plan", "rince/tab2", "--profile", "smoke", "--executor", "slurm", "--cluster",
                     "example-a100", env=env)
    assert missing.returncode == 2
    assert f"{profiles / 'example-a100.yaml'}: no cluster profile 'example-a100' (known: mine;" in missing.stderr


def test_installed_runs_record_the_commit_the_wheel_was_built_from(installed, tmp_path, monkeypatch):
    wheel, bin_dir, cwd, env, commit = installed
    with zipfile.ZipFile(wheel) as zf:
        assert json.loads(zf.read("semcl/_build.json")) == {"commit": commit, "dirty": False}
    code = "import json, semcl.locations as l; print(json.dumps(l.built_from()))"
    got = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                         check=True)
    assert json.loads(got.stdout) == {"commit": commit, "dirty": False}  # not the enclosing repository's HEAD
    # a run's record takes it from there (the engine's git_state), here with a package folder holding that file
    import semcl.locations
    from semcl.engine.job import git_state

    (tmp_path / "_build.json").write_text(json.dumps({"commit": commit, "dirty": False}))
    monkeypatch.delenv("SEMCL_SNAPSHOT", raising=False)
    monkeypatch.setattr(semcl.locations, "PACKAGE", tmp_path)
    assert git_state() == {"commit": commit, "dirty": False}
