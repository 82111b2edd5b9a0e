"""Where semcl finds the registry (the table YAMLs) and the cluster profiles (stdlib only: `semcl list` reads it
before anything heavy is imported).

In order: the user's own folder ($SEMCL_REGISTRY, which `semcl --registry` sets; $SEMCL_CLUSTER_PROFILES); else
the copy an installed wheel carries inside the package (semcl/_registry, semcl/_profiles, put there at build time
by setup.py, so git holds each file once); else the clone's experiments/ and slurm/profiles/ (an editable install
or a source tree, where no such copy exists).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parents[1]  # src/semcl -> the clone's root
# package folder -> the clone's folder it is built from (setup.py holds the same pairs; tests/e2e/test_wheel.py)
SHIPPED = {"_registry": "experiments", "_profiles": "slurm/profiles"}
BUILD_INFO = "_build.json"  # setup.py writes it into the wheel: the commit the wheel was built from


def _find(env_var: str, shipped: str) -> Path:
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    packaged = PACKAGE / shipped
    return packaged if packaged.is_dir() else CHECKOUT / SHIPPED[shipped]


def results_root() -> Path:
    """The results folder when none is named: $SEMCL_RESULTS, else ./results."""
    return Path(os.environ.get("SEMCL_RESULTS", "results"))


def registry_root() -> Path:
    """The registry folder: $SEMCL_REGISTRY, else the installed package's copy, else the clone's experiments/."""
    return _find("SEMCL_REGISTRY", "_registry")


def profiles_root() -> Path:
    """The cluster profiles: $SEMCL_CLUSTER_PROFILES, else the installed package's copy, else slurm/profiles/."""
    return _find("SEMCL_CLUSTER_PROFILES", "_profiles")


def built_from(package: Path | None = None) -> dict | None:
    """{"commit", "dirty"} of the source tree an installed wheel was built from (semcl/_build.json); None when
    the code runs from a clone, whose git then answers (a venv inside some other repository must not report
    that repository's commit)."""
    try:
        info = json.loads(((package or PACKAGE) / BUILD_INFO).read_text())
    except (OSError, ValueError):
        return None
    return {"commit": info.get("commit"), "dirty": info.get("dirty")} if isinstance(info, dict) else None


def shown_path(path: Path) -> str:
    """A path as a page meant to be shared prints it: relative to the registry's parent (a file of the repository,
    `experiments/rince/claims.yaml`) or to the working folder (`results`), else its last two parts -- never the
    building machine's absolute path."""
    path = Path(path).resolve()
    for base in (registry_root().resolve().parent, Path.cwd().resolve()):
        if path.is_relative_to(base):
            return str(path.relative_to(base)) or "."
    return str(Path(*path.parts[-2:]))
