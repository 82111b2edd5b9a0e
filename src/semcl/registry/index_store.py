"""The registry index file (stdlib only): where it lives, its source key, reading and writing it, and
the table list `semcl.registry.tables.get_table` reads to load only the files it needs. `semcl.registry.index` builds the
index; this module is what both it and `semcl.registry.tables` import, so neither imports the other.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

from semcl.files import write_bytes_atomic
from semcl.locations import PACKAGE, registry_root

# the whole package's source keys the index, not this module's folder (it moved into registry/ once)
SRC = PACKAGE
FORMAT = 4  # bump when the index layout changes




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


def cache_file(registry: Path) -> Path:
    where = zlib.crc32(f"{SRC}|{registry.resolve()}".encode())  # one file per checkout and registry
    return cache_dir() / f"index-{where:08x}.json"


def table_meta(table) -> dict:
    return {"id": table.id, "path": str(table.path), "paper": table.paper, "source": table.source, "title": table.title,
            # the paper's rows: the authors' released checkpoints (evaluated only) are not counted
            "profiles": list(table.profiles), "rows": sum(not r.released for r in table.rows),
            "implemented": sum(r.implemented and not r.released for r in table.rows),
            "not_implemented": [r.label for r in table.rows if not r.implemented],
            # rows that show the best row of another table (`select:`): label -> that table
            "selects": {r.label: r.select.table for r in table.rows if r.select},
            # rows that learn from an authors' checkpoint (a KD student of a released teacher): planned with the file
            "learners": [r.label for r in table.rows
                         if any(d in {x.label for x in table.rows if x.released} for d in r.depends_on)]}


def read_index(path: Path, key: str) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def write_index(path: Path, data: dict) -> None:
    try:
        # atomic: a concurrent reader sees the old or the new index; a cache needs no fsync
        write_bytes_atomic(path, json.dumps(data).encode(), durable=False)
    except OSError:
        pass  # a read-only home: no cache, every call takes the full path


def table_paths(registry: Path | None = None) -> dict[str, str] | None:
    """{table id: its file} from a current index (the whole registry loaded and checked at this source key),
    or None when there is none yet or a file changed since."""
    reg = registry or registry_root()
    data = read_index(cache_file(reg), source_key(reg))
    if data is None or data.get("tables") is None:
        return None
    try:
        paths = {t["id"]: t["path"] for t in data["tables"]}
        root = reg.resolve()
        # the cache may be shared ($SEMCL_CACHE): a path it names is trusted only as a YAML file of this registry
        inside = all(isinstance(p, str) and p.endswith(".yaml") and Path(p).resolve().is_relative_to(root)
                     for p in paths.values())
    except (TypeError, KeyError, OSError, RuntimeError):
        return None
    return paths if inside else None


def remember_tables(tables: dict, registry: Path | None = None, replace: bool = False) -> None:
    """Store the table list of a registry just loaded in full (by `semcl.registry.tables.get_table`), so that the
    next `get_table` reads only the files it needs."""
    reg = registry or registry_root()
    key = source_key(reg)
    path = cache_file(reg)
    data = read_index(path, key) or {"key": key, "tables": None, "profiles": {}}
    if data["tables"] is None or replace:  # replace: the list it held named files it should not
        data["tables"] = [table_meta(t) for t in tables.values()]
        write_index(path, data)
