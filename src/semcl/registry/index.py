"""A cached index of the registry, so `semcl list` and `semcl plan` start without torch, the schema
validation of every row, or the run-id hashing of every run.

Loading the registry validates every row of every table under every profile and resolves each
run's config to hash its id: seconds of CPU with 40+ tables. What `list` and `plan` print depends
only on the registry files and the source code (methods, datasets, config schema), so the index
is computed once by the full path (`semcl.registry.tables`, `semcl.registry.plan`) and stored as JSON under
`$SEMCL_CACHE` (default `$XDG_CACHE_HOME/semcl` or `~/.cache/semcl`), keyed by the path, size and
mtime of every `*.py` under `src/semcl` and every `*.yaml` under the registry root. Any change to
either invalidates it; a cache that cannot be written is skipped (the index is then rebuilt per
call). This module imports only the standard library.
"""

from __future__ import annotations

import os
from pathlib import Path

from semcl.locations import registry_root
from semcl.registry.index_store import cache_file, read_index, source_key, table_meta, write_index


def profile_runs(table, profile: str) -> list[list]:
    """[run_id, row label, seed, cost estimate, depends_on, GPUs held, training key, the cost of its evaluation
    alone] per planned run, in plan order."""
    from semcl.estimate.cost import estimate_cost, evaluation_cost
    from semcl.registry.plan import plan_runs

    out = []
    for r in plan_runs(table, profile):
        gpus = table.resources_for(r.row_label, profile).gpus
        out.append([r.run_id, r.row_label, r.seed, estimate_cost(r.config, profile, gpus), list(r.depends_on), gpus,
                    r.train_key, evaluation_cost(r.config, profile, gpus)])
    return out


def _released_costs(table, profile: str) -> list[list]:
    """[row label, the cost of evaluating its file alone (one GPU)] per released row (semcl verify)."""
    from semcl.estimate.cost import evaluation_cost

    return [[r.label, evaluation_cost(table.resolve(r, profile), profile, 1)] for r in table.rows if r.released]


def load_index(profile: str, registry: Path | None = None) -> dict:
    """{"tables": [meta...], "runs": {table id: [[run_id, label, seed, cost, deps], ...]}} for `profile`
    (runs only for tables that have it). Rebuilt from the registry when any source file changed;
    a registry error raises exactly as `load_registry` does (nothing is cached then)."""
    reg = registry or registry_root()
    # runs planned under `semcl --precision fast` have ids of their own ($SEMCL_PRECISION, semcl.runtime.precision)
    slot = profile if os.environ.get("SEMCL_PRECISION") in (None, "", "official") else f"{profile}@fast"
    key = source_key(reg)
    path = cache_file(reg)
    data = read_index(path, key)
    if data is None:
        data = {"key": key, "tables": None, "profiles": {}}
    if data["tables"] is None or slot not in data["profiles"]:
        from semcl.registry.tables import load_registry

        tables = load_registry(reg if registry else None)
        data["tables"] = [table_meta(t) for t in tables.values()]
        data["profiles"][slot] = {t.id: profile_runs(t, profile) for t in tables.values()
                                  if profile in t.profiles}
        data.setdefault("released", {})[slot] = {t.id: _released_costs(t, profile) for t in tables.values()
                                                 if profile in t.profiles and any(r.released for r in t.rows)}
        write_index(path, data)
    return {"tables": data["tables"], "runs": data["profiles"][slot], "released": data.get("released", {}).get(slot, {})}
