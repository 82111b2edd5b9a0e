"""Build hook (the project's metadata is in pyproject.toml): the wheel carries the registry (experiments/) and the
cluster profiles (slurm/profiles/) as package data semcl/_registry and semcl/_profiles, copied here at build time so
that git holds each file once; semcl.locations finds them when no clone is around."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = {"_registry": "experiments", "_profiles": "slurm/profiles"}  # = semcl.locations.SHIPPED


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


setup(cmdclass={"build_py": BuildWithRegistry})
