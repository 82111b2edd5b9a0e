"""environment.json of a bundle: the machine that published it, and each distinct environment its runs recorded
(with the run ids of each), so a reader sees at once whether the seeds of a cell ran alike."""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata

# the record keys that describe where and with what a run executed (semcl.engine.job's record; `environment` is
# the key a fuller record may carry): what tells two runs' environments apart, not their results
RECORD_KEYS = ("versions", "device", "evaluated_on", "world_size", "threads", "cpu_isa", "mkl_cbwr", "environment")
PUBLISH_PACKAGES = ("torch", "torchvision", "numpy", "safetensors", "timm", "pandas", "pyyaml")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def publishing_machine() -> dict:
    from semcl import __version__
    from semcl.engine.provenance import git_state

    return {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
            "semcl": __version__, "code": git_state(), "packages": {p: _version(p) for p in PUBLISH_PACKAGES}}


def run_environments(records: list[dict]) -> list[dict]:
    """The distinct environments of `records` (RECORD_KEYS present in each), in first-seen order, with their runs."""
    groups: dict[str, dict] = {}
    for rec in records:
        env = {k: rec[k] for k in RECORD_KEYS if k in rec}
        key = json.dumps(env, sort_keys=True, default=str)
        groups.setdefault(key, {"environment": env, "run_ids": []})["run_ids"].append(rec["run_id"])
    return list(groups.values())


def environment(records: list[dict]) -> dict:
    return {"published_by": publishing_machine(), "runs": run_environments(records)}
