"""Finished runs of a table that its plan no longer reaches: run ids hash the config, so a run of an older config
drops out of the plan and would otherwise go silent (status `missing`, the table a dash, `run` training it
again). They are found by the table, row, profile and seed their config.yaml records, grouped per row with the
config keys that changed since (against the row's run planned now for the same seed), and never reused, moved or
deleted. Runs of `--set` variants are not older configs: they are counted apart, with the `--set` that shows
them."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from semcl.config import config_to_dict
from semcl.registry.plan import Run
from semcl.store import Store

ABSENT = object()  # a key on one side only
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a store holds thousands of run folders
_SETTING = re.compile(r", (?=[a-z_]+\.[A-Za-z0-9_]+=)")  # between the settings of a variant label


@dataclass(frozen=True)
class StoredRun:
    """A finished run folder, as its config.yaml describes it."""

    run_id: str
    table: str
    profile: str
    row: str
    seed: int
    config: dict


@dataclass(frozen=True)
class OlderRun:
    run_id: str
    row: str
    seed: int
    current: str | None  # the run compared with (the row's run for this seed, else its first); None: row gone
    changed: dict[str, tuple[Any, Any]]  # dotted key -> (then, now)
    seed_planned: bool = True


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"optim.lr": 0.1, ...}: a nested config as dotted keys (lists and scalars are leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def changed_keys(then: dict, now: dict) -> dict[str, tuple[Any, Any]]:
    """Dotted keys whose values differ between two nested configs (a key on one side only: ABSENT on the other)."""
    a, b = flatten(then), flatten(now)
    return {k: (a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(set(a) | set(b))
            if a.get(k, ABSENT) != b.get(k, ABSENT)}


def show(value: Any) -> str:
    """A config value as a line shows it: strings bare, the rest as JSON (null, true, [1, 2])."""
    if value is ABSENT:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value)


def change_line(key: str, then: Any, now: Any) -> str:
    return f"{key}: {show(then)} -> {show(now)}"


def stored_runs(store: Store, skip: set[str]) -> list[StoredRun]:
    """Every finished run folder under results/runs/ not in `skip`, with a readable config.yaml. A folder
    without a record, or with an unreadable one, is left to `status` (a run in flight, a failure)."""
    runs_dir = store.folders.runs
    if not runs_dir.is_dir():
        return []
    out = []
    for folder in sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name not in skip):
        run = store.folder(folder.name)
        if not run.metrics.exists():
            continue
        try:
            head = yaml.load(run.config.read_text(), Loader=_LOADER)
            json.loads(run.metrics.read_text())
            out.append(StoredRun(folder.name, str(head["table"]), str(head["profile"]), str(head["row"]),
                                 int(head["seed"]), dict(head["config"])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
            continue
    return out


def variant_base(label: str, registered: set[str]) -> str | None:
    """The registered row a `--set` variant label "<row> [key=value, ...]" varies (None: not a variant's)."""
    for base in registered:
        if label.startswith(base + " [") and label.endswith("]"):
            return base
    return None


def set_options(label: str, base: str) -> str:
    """The `--set` options that plan a variant again, read off its label."""
    return " ".join(f"--set {shlex.quote(s)}" for s in _SETTING.split(label[len(base) + 2:-1]))


def older_runs(stored: list[StoredRun], table_id: str, profile: str, planned: list[Run], known: set[str],
               registered: set[str], rows: set[str] | None = None) -> list[OlderRun]:
    """The finished runs of `table_id` at `profile` whose id no plan holds (`known`): those of a row planned now
    (`rows`: only those rows), and, when all rows are shown, those of rows the table no longer has. A variant's
    run counts only when its variant is planned."""
    now: dict[str, dict[int, Run]] = {}
    for run in planned:
        now.setdefault(run.row_label, {})[run.seed] = run
    out = []
    for s in stored:
        if s.table != table_id or s.profile != profile or s.run_id in known:
            continue
        if s.row in now:
            match = now[s.row].get(s.seed) or next(iter(now[s.row].values()))
            out.append(OlderRun(s.run_id, s.row, s.seed, match.run_id,
                                changed_keys(s.config, config_to_dict(match.config)), s.seed in now[s.row]))
        elif rows is None and s.row not in registered and variant_base(s.row, registered) is None:
            out.append(OlderRun(s.run_id, s.row, s.seed, None, {}))
    return out


def variant_counts(stored: list[StoredRun], table_id: str, profile: str, known: set[str],
                   registered: set[str]) -> dict[str, int]:
    """Finished runs of `--set` variants of the table, per variant label (the plan without --set holds none)."""
    out: dict[str, int] = {}
    for s in stored:
        if s.table == table_id and s.profile == profile and s.run_id not in known and variant_base(s.row, registered):
            out[s.row] = out.get(s.row, 0) + 1
    return out


def describe(older: list[OlderRun], limit: int = 8, shown: int | None = 5) -> list[str]:
    """What `semcl status` prints: the count, then per row and older config the keys that changed (`limit` of
    them) and its runs (`shown` of them; None: all, as `status -v`)."""
    if not older:
        return []
    lines = [f"# {len(older)} finished run(s) here belong to older configs of this table: shown, never reused or "
             "deleted (semcl diff <old id> <new id> lists every key)"]
    groups: dict[tuple, list[OlderRun]] = {}
    for o in older:
        changes = tuple(change_line(k, a, b) for k, (a, b) in o.changed.items())
        groups.setdefault((o.row, o.current is None, changes), []).append(o)
    for (row, gone, changes), runs in groups.items():
        if gone:
            why = "the row is no longer in the table"
        elif changes:
            why = "; ".join(changes[:limit]) + (f"; +{len(changes) - limit} more" if len(changes) > limit else "")
        else:  # the same config: the seed or the runs it builds on moved
            why = "no config key differs" + ("" if any(not o.seed_planned for o in runs) else
                                             " (the runs it builds on, or how ids are made, moved)")
        lines.append(f"# row {row!r} ({len(runs)} run(s)): {why}")
        for o in runs[:shown]:
            now = "" if gone else f"  now {o.current}" + ("" if o.seed_planned else " (this seed is not planned now)")
            lines.append(f"{o.run_id}  seed={o.seed:<4} older{now}")
        if shown is not None and len(runs) > shown:
            lines.append(f"# ... and {len(runs) - shown} more run(s) of this older config (status -v lists them)")
    return lines


def describe_variants(counts: dict[str, int], table_id: str, profile: str, registered: set[str]) -> list[str]:
    """One line per `--set` variant with finished runs here, and the command that shows them."""
    return [f"# {n} finished run(s) of the variant {label!r}: semcl status {table_id} --profile {profile} "
            f"{set_options(label, variant_base(label, registered) or '')}" for label, n in sorted(counts.items())]


def status_lines(store: Store, shown: dict[str, list[Run]], profile: str, subset: bool,
                 verbose: bool = False) -> dict[str, list[str]]:
    """Per table id, the lines `semcl status` adds under its runs. `shown`: the runs status lists per table;
    `subset`: they are some rows or `--set` variants of it (the runs of its other registered rows are then not
    older, and only the shown rows' older runs are listed); `verbose`: every older run, not the first few."""
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    full = {tid: plan_runs(get_table(tid), profile) if subset else runs for tid, runs in shown.items()}
    known = {r.run_id for runs in (*full.values(), *shown.values()) for r in runs}
    stored = stored_runs(store, known)
    out = {}
    for tid, runs in shown.items():
        registered = {r.label for r in get_table(tid).rows}
        lines = describe(older_runs(stored, tid, profile, runs, known, registered,
                                    {r.row_label for r in runs} if subset else None), shown=None if verbose else 5)
        if not subset:
            counts = variant_counts(stored, tid, profile, known, registered)
            lines += describe_variants(counts, tid, profile, registered)
        out[tid] = lines
    return out
