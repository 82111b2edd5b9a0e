"""Build hook (the project's metadata is in pyproject.toml): the wheel carries the registry (experiments/) and the
cluster profiles (slurm/profiles/) as package data semcl/_registry and semcl/_profiles, copied here at build time so
that git holds each file once; semcl.locations finds them when no clone is around."""

import json
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = {"_registry": "experiments", "_profiles": "slurm/profiles"}  # = semcl.locations.SHIPPED
BUILD_INFO = "_build.json"  # = semcl.locations.BUILD_INFO


def _git_state() -> dict:
    """The commit and dirty flag of the tree being built (None, None from an sdist: no git there)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, check=True).stdout

    try:
        if Path(git("rev-parse", "--show-toplevel").strip()).resolve() != HERE:
            return {"commit": None, "dirty": None}  # a tree inside some other repository
        changed = git("status", "--porcelain", "--", "src", *SHIPPED.values()).strip()
        return {"commit": git("rev-parse", "HEAD").strip(), "dirty": changed != ""}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def _yaml_only(folder: str, names: list[str]) -> list[str]:
    """shutil.copytree's ignore: every file but the YAMLs (editor backups, caches)."""
    return [n for n in names if not (Path(folder, n).is_dir() or n.endswith(".yaml"))]


class BuildWithRegistry(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the clone's own folders
        for name, source in SHIPPED.items():
            target = Path(self.build_lib) / "semcl" / name
            shutil.rmtree(target, ignore_errors=True)  # a file deleted from the registry leaves no stale copy
            shutil.copytree(HERE / source, target, ignore=_yaml_only)
        # run records name this commit (semcl.locations.built_from): an installed package has no clone to ask
        (Path(self.build_lib) / "semcl" / BUILD_INFO).write_text(json.dumps(_git_state()) + "\n")


setup(cmdclass={"build_py": BuildWithRegistry})
