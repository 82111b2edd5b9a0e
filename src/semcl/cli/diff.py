"""`semcl diff <run-id> <run-id>`: the config keys two runs differ in, one per line `key: a -> b` (dotted keys as
`--set` and rows' overrides name them; the runs' table, row, profile and seed first). A stored run is read off
its config.yaml; a run not in the store yet may be one the other run's table plans now (what `semcl status`
names beside a run of an older config), planned under the same profile. What status summarises, in full. Two
finished runs also show where their records' environments differ (`environment.cuda: 13.0 -> 12.8`), after the
config keys."""

from __future__ import annotations

import sys

from semcl.cli.args import open_store
from semcl.errors import SemclError


def _valid(run_id: str) -> bool:
    return bool(run_id) and run_id not in (".", "..") and "/" not in run_id and "\\" not in run_id


def read_config(store, run_id: str) -> dict | None:
    """{"table": ..., "row": ..., "profile": ..., "seed": ..., "config": {...}} of a stored run (None: no folder)."""
    if not _valid(run_id) or not store.folder(run_id).path.is_dir():
        return None
    return store.read_config(run_id)


def planned_config(run_id: str, other: dict | None) -> dict | None:
    """The config of `run_id` as the other run's table plans it now under its profile (None: not planned)."""
    from semcl.config import config_to_dict
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table, load_registry

    table_id, profile = (other or {}).get("table"), (other or {}).get("profile")
    if table_id not in load_registry() or profile not in get_table(table_id).profiles:
        return None
    for run in plan_runs(get_table(table_id), profile):
        if run.run_id == run_id:
            return {"table": run.table_id, "row": run.row_label, "profile": profile, "seed": run.seed,
                    "config": config_to_dict(run.config)}
    return None


def diff_lines(a: dict, b: dict) -> list[str]:
    from semcl.report.older_configs import ABSENT, change_line, changed_keys

    heads = [change_line(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in ("table", "row", "profile", "seed")
             if a.get(k, ABSENT) != b.get(k, ABSENT)]
    return heads + [change_line(k, x, y) for k, (x, y) in changed_keys(a["config"], b["config"]).items()]


def environment_lines(store, ids: list[str]) -> list[str]:
    """`environment.<key>: a -> b` (and `versions.<package>`, `device`) where two finished runs' records differ:
    torch's CUDA / cuDNN / NCCL, the GPU, the driver, the lock, the container (runtime.environment). Empty when
    either run has no record yet; a key one record predates shows as (absent)."""
    from semcl.report.older_configs import change_line, changed_keys

    recs = []
    for rid in ids:
        rec = store.read_record(rid) if _valid(rid) and store.folder(rid).path.is_dir() else None
        if rec is None:
            return []
        recs.append({"environment": rec.get("environment"), "versions": rec.get("versions"), "device": rec.get("device")})
    a, b = ({k: v for k, v in r.items() if v is not None} for r in recs)
    return [change_line(k, x, y) for k, (x, y) in changed_keys(a, b).items()]


def cmd_diff(args) -> None:
    store = open_store(args)
    ids = args.run_ids
    heads = [read_config(store, rid) for rid in ids]
    for i in (0, 1):
        if heads[i] is None:
            heads[i] = planned_config(ids[i], heads[1 - i])
        if heads[i] is None:
            where = heads[1 - i] and f" nor planned by {heads[1 - i]['table']} (profile {heads[1 - i]['profile']})"
            raise SemclError(f"unknown run id {ids[i]!r}: no folder {store.root / 'runs' / ids[i]}{where or ''}")
    a, b = heads
    lines = diff_lines(a, b)
    for line in lines + environment_lines(store, ids):
        print(line)
    if not lines:
        print(f"semcl: runs {args.run_ids[0]} and {args.run_ids[1]} have the same config", file=sys.stderr)


def add_parser(sub) -> None:
    sp = sub.add_parser("diff", help="the config keys two stored runs differ in (key: a -> b), from their config.yaml")
    sp.add_argument("run_ids", nargs=2, metavar="RUN_ID", help="two run ids (folders under <results>/runs/)")
    sp.set_defaults(func=cmd_diff)
