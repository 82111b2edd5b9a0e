"""Finished runs of a table whose config has since moved: run ids hash the config, so a run of an older config
drops out of the plan and would otherwise go silent (status `missing`, the table a dash, `run` training it
again). They are found by the table, row, profile and seed their config.yaml records, shown with the config
keys that changed, and never reused, moved or deleted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from semcl.config import config_to_dict
from semcl.runs import Run, Store


@dataclass(frozen=True)
class OlderRun:
    run_id: str
    row: str
    seed: int
    current: str | None  # the run id the row and seed plan now (None: the row is gone)
    changed: dict[str, tuple[Any, Any]]  # dotted key -> (then, now)


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"optim.lr": 0.1, ...}: a nested config as dotted keys (lists and scalars are leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def changed_keys(then: dict, now: dict) -> dict[str, tuple[Any, Any]]:
    """Dotted keys whose values differ between two nested configs (a key on one side only: None on the other)."""
    a, b = flatten(then), flatten(now)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def older_runs(store: Store, table_id: str, profile: str, planned: list[Run]) -> list[OlderRun]:
    """Finished runs in the store of `table_id` at `profile` that the current plan no longer holds."""
    runs_dir = store.root / "runs"
    if not runs_dir.is_dir():
        return []
    known = {r.run_id for r in planned}
    now = {(r.row_label, r.seed): r for r in planned}
    out = []
    for folder in sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name not in known):
        run = store.folder(folder.name)
        if not run.metrics.exists():
            continue
        try:
            head = yaml.safe_load(run.config.read_text())
            if head.get("table") != table_id or head.get("profile") != profile:
                continue
            row, seed, config = str(head["row"]), int(head["seed"]), head["config"]
            json.loads(run.metrics.read_text())  # an unreadable record is `status`'s to report, not this list's
        except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
            continue
        match = now.get((row, seed))
        changed = changed_keys(config, config_to_dict(match.config)) if match else {}
        out.append(OlderRun(folder.name, row, seed, match.run_id if match else None, changed))
    return out


def describe(older: list[OlderRun], limit: int = 6) -> list[str]:
    """The lines `semcl status` prints: how many, then per run its row, seed and the keys that changed."""
    if not older:
        return []
    lines = [f"# {len(older)} finished run(s) here belong to older configs of this table (shown, never reused): "
             "the keys that changed since"]
    for o in older:
        if o.current is None:
            lines.append(f"{o.run_id}  {o.row:<24} seed={o.seed:<4} older   (the row is no longer in the table)")
            continue
        keys = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in list(o.changed.items())[:limit])
        more = f" (+{len(o.changed) - limit} more)" if len(o.changed) > limit else ""
        lines.append(f"{o.run_id}  {o.row:<24} seed={o.seed:<4} older   now {o.current}: {keys or 'no key'}{more}")
    return lines
