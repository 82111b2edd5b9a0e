"""How a table's rows move with the training budget: the same rows re-run with one config key swept.

    .venv/bin/python scripts/budget_sweep.py gpaco/cifar100-lt --profile mini \
        --row "CE, IF 100" --row "PaCo, IF 100" --key schedule.epochs --values 6 20 50 --data-root data

Each (row, value, seed) is an ordinary run (its config differs only in the swept key, so it has its own run
id in the results store and is never redone); they go through the local executor, then one line per row and
value prints every column as mean ± std over the seeds. For choosing a `mini` budget (issue 15): the
smallest value at which the baselines order as in the paper.
"""

from __future__ import annotations

import argparse
import copy
import statistics
from pathlib import Path

import yaml

from semcl.launch.local import submit_runs
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store


def _set(cfg, dotted: str, value) -> None:
    section, key = dotted.split(".", 1)
    setattr(getattr(cfg, section), key, value)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("table")
    p.add_argument("--profile", default="mini")
    p.add_argument("--row", action="append", required=True, help="row label (repeatable)")
    p.add_argument("--key", required=True, help="dotted config key, e.g. schedule.epochs")
    p.add_argument("--values", nargs="+", required=True, help="values (YAML scalars)")
    p.add_argument("--data-root", default="data")
    p.add_argument("--results", default="results")
    p.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count, at most 4)")
    args = p.parse_args(argv)
    table, store = get_table(args.table), Store(Path(args.results))
    base = [r for r in plan_runs(table, args.profile) if r.row_label in args.row and not r.depends_on]
    runs: dict[tuple[str, str], list[Run]] = {}
    for raw in args.values:
        value = yaml.safe_load(raw)
        for r in base:
            cfg = copy.deepcopy(r.config)
            _set(cfg, args.key, value)
            runs.setdefault((r.row_label, raw), []).append(
                Run(r.table_id, r.row_label, r.seed, r.profile, cfg, make_run_id(cfg, r.seed)))
    submit_runs([x for rs in runs.values() for x in rs], store, Path(args.data_root), workers=args.workers)
    metrics = sorted({k for rs in runs.values() for x in rs for k in store.records([x.run_id]).get(x.run_id, {})
                      .get("metrics", {})})
    shown = [m for m in metrics if m.startswith(("acc_", "linear_top1_last", "retrieval_", "ood_"))] or metrics
    print(f"| Row | {args.key} | " + " | ".join(shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for (row, raw), rs in runs.items():
        recs = store.records([x.run_id for x in rs])
        cells = []
        for m in shown:
            vals = [recs[x.run_id]["metrics"][m] for x in rs if x.run_id in recs
                    and isinstance(recs[x.run_id]["metrics"].get(m), int | float)]
            sd = f" ± {statistics.stdev(vals):.2f}" if len(vals) > 1 else ""
            cells.append(f"{statistics.mean(vals):.2f}{sd}" if vals else "—")
        print(f"| {row} | {raw} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
