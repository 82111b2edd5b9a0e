"""Every table's run ids per profile, pinned in tests/golden/run_ids.json (`make ids` rewrites it).

    .venv/bin/python scripts/run_ids.py          # rewrite the golden file
    .venv/bin/python scripts/run_ids.py --check  # list what changed against it; exit 1 if anything did

A run id hashes the run's config, so a changed default, preset or profile changes ids (and results
already on disk are no longer found under them). tests/e2e/test_run_ids_golden.py fails when an id
changes without the golden file being rewritten, naming each table / profile / row that moved.
Ids are computed for the official precision, whatever $SEMCL_PRECISION says.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_registry

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "run_ids.json"


def current_ids(root: Path = REPO / "experiments") -> dict[str, dict[str, dict[str, list[str]]]]:
    """{table: {profile: {row: [run id per seed, in seed order]}}} for the registry under `root`."""
    out: dict = {}
    for table_id, table in sorted(load_registry(root).items()):
        per_profile: dict = {}
        for profile in sorted(table.profiles):
            rows: dict[str, list[str]] = {}
            for run in plan_runs(table, profile, precision="official"):
                rows.setdefault(run.row_label, []).append(run.run_id)
            per_profile[profile] = rows
        out[table_id] = per_profile
    return out


def differences(old: dict, new: dict) -> list[str]:
    """One line per table / profile / row whose ids differ between `old` and `new`."""
    lines = []
    for table in sorted(set(old) | set(new)):
        if table not in new or table not in old:
            lines.append(f"{table}: table {'removed' if table not in new else 'added'}")
            continue
        for profile in sorted(set(old[table]) | set(new[table])):
            a, b = old[table].get(profile), new[table].get(profile)
            if a is None or b is None:
                lines.append(f"{table} / {profile}: profile {'removed' if b is None else 'added'}")
                continue
            for row in list(a) + [r for r in b if r not in a]:
                if a.get(row) != b.get(row):
                    lines.append(f"{table} / {profile} / {row}: {a.get(row)} -> {b.get(row)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the golden file instead of rewriting it")
    args = parser.parse_args(argv)
    ids = current_ids()
    if args.check:
        old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        lines = differences(old, ids)
        print("\n".join(lines) if lines else f"run ids match {GOLDEN.relative_to(REPO)}")
        return 1 if lines else 0
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    tmp = GOLDEN.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(ids, indent=1, sort_keys=True) + "\n")
    tmp.replace(GOLDEN)  # atomic: an interrupted rewrite leaves the old file
    n = sum(len(v) for t in ids.values() for p in t.values() for v in p.values())
    print(f"wrote {GOLDEN.relative_to(REPO)}: {n} run ids of {len(ids)} tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
