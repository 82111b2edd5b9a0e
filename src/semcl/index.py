"""A cached index of the registry, so `semcl list` and `semcl plan` start without torch, the schema
validation of every row, or the run-id hashing of every run.

Loading the registry validates every row of every table under every profile and resolves each
run's config to hash its id: seconds of CPU with 40+ tables. What `list` and `plan` print depends
only on the registry files and the source code (methods, datasets, config schema), so the index
is computed once by the full path (`semcl.registry`, `semcl.runs`) and stored as JSON under
`$SEMCL_CACHE` (default `$XDG_CACHE_HOME/semcl` or `~/.cache/semcl`), keyed by the path, size and
mtime of every `*.py` under `src/semcl` and every `*.yaml` under the registry root. Any change to
either invalidates it; a cache that cannot be written is skipped (the index is then rebuilt per
call). This module imports only the standard library.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

SRC = Path(__file__).resolve().parent
FORMAT = 1  # bump when the index layout changes


def registry_root() -> Path:
    """Same rule as semcl.registry.registry_root (kept here so this module imports nothing heavy)."""
    env = os.environ.get("SEMCL_REGISTRY")
    return Path(env) if env else SRC.parents[1] / "experiments"


def cache_dir() -> Path:
    env = os.environ.get("SEMCL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "semcl"


def _walk(root: Path, suffix: str) -> list[tuple[str, int, int]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if name.endswith(suffix):
                st = os.stat(os.path.join(dirpath, name))
                out.append((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns))
    return sorted(out)


def source_key(registry: Path | None = None) -> str:
    """(path, size, mtime) of every source and registry file, and the interpreter, as one string: compared
    whole (no hash: hashlib's OpenSSL load alone is a fifth of the start-up budget)."""
    reg = registry or registry_root()
    items = _walk(SRC, ".py") + _walk(reg, ".yaml")
    return f"{FORMAT}|{sys.version}|{reg.resolve()}|" + ";".join(f"{p},{n},{m}" for p, n, m in items)


def _cache_file(registry: Path) -> Path:
    where = zlib.crc32(f"{SRC}|{registry.resolve()}".encode())  # one file per checkout and registry
    return cache_dir() / f"index-{where:08x}.json"


def _table_meta(table) -> dict:
    return {"id": table.id, "paper": table.paper, "source": table.source, "title": table.title,
            "profiles": list(table.profiles), "rows": len(table.rows),
            "implemented": sum(r.implemented for r in table.rows),
            "not_implemented": [r.label for r in table.rows if not r.implemented]}


def _profile_runs(table, profile: str) -> list[list]:
    """[run_id, row label, seed, cost estimate, depends_on] per planned run, in plan order."""
    from semcl.runs import estimate_cost, plan_runs

    return [[r.run_id, r.row_label, r.seed, estimate_cost(r.config, profile), list(r.depends_on)]
            for r in plan_runs(table, profile)]


def _read(path: Path, key: str) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def _write(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old or the new index
    except OSError:
        pass  # a read-only home: no cache, every call takes the full path


def load_index(profile: str, registry: Path | None = None) -> dict:
    """{"tables": [meta...], "runs": {table id: [[run_id, label, seed, cost, deps], ...]}} for `profile`
    (runs only for tables that have it). Rebuilt from the registry when any source file changed;
    a registry error raises exactly as `load_registry` does (nothing is cached then)."""
    reg = registry or registry_root()
    key = source_key(reg)
    path = _cache_file(reg)
    data = _read(path, key)
    if data is None:
        data = {"key": key, "tables": None, "profiles": {}}
    if data["tables"] is None or profile not in data["profiles"]:
        from semcl.registry import load_registry

        tables = load_registry(reg if registry else None)
        data["tables"] = [_table_meta(t) for t in tables.values()]
        data["profiles"][profile] = {t.id: _profile_runs(t, profile) for t in tables.values()
                                     if profile in t.profiles}
        _write(path, data)
    return {"tables": data["tables"], "runs": data["profiles"][profile]}
