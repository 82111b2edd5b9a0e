"""`semcl plan`'s GPU-hour estimate against public arithmetic on six rows of the paper profile.

The public figure of each row (bench/public_gpu_hours.csv) is arithmetic on published runs and vendor figures,
with its source; the target is the estimate within +-25 % of it: of its nearer end where the public figure is a
range (an estimate inside the range counts as 1.0); the note gives the ratio to the range's middle too. Pure arithmetic, no
timing: `python bench/bench_estimate.py [--write]` (with --write, its section of bench/results.md);
tests/estimate/test_public_arithmetic.py holds the same bound.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Row, write_section  # noqa: E402

PUBLIC = ROOT / "bench" / "public_gpu_hours.csv"
TOLERANCE = 0.25


def public_rows() -> list[dict]:
    with PUBLIC.open(newline="") as f:
        return list(csv.DictReader(f))


def estimated_gpu_hours(table_id: str, row: str) -> tuple[float, str]:
    """(GPU-hours, bound) of the row's first paper run on the GPUs its entry asks for."""
    from semcl.estimate.gpu_hours import estimate
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    table = get_table(table_id)
    run = next(r for r in plan_runs(table, "paper") if r.row_label == row)
    est = estimate(run.config, table.resources_for(row, "paper").gpus)
    return est.gpu_hours, est.bound


def range_ratio(value: float, low: float, high: float) -> float:
    """value / the nearer end of [low, high]; 1.0 inside it."""
    return value / high if value > high else value / low if value < low else 1.0


def ratios() -> list[tuple[dict, float, str, float]]:
    """Per public row: (row, estimate, bound, estimate against the public range)."""
    out = []
    for p in public_rows():
        gpu_h, bound = estimated_gpu_hours(p["table"], p["row"])
        out.append((p, gpu_h, bound, range_ratio(gpu_h, float(p["low"]), float(p["high"]))))
    return out


def run() -> list[Row]:
    rows = []
    for p, gpu_h, bound, ratio in ratios():
        public = p["low"] if p["low"] == p["high"] else f"{p['low']}-{p['high']}"
        rows.append(Row(f"Estimate: {p['table']} {p['row']} ({bound}-bound)", f"{gpu_h:.3g} GPU-h",
                        f"{public} GPU-h public", ratio, "0.75-1.25x", abs(ratio - 1) <= TOLERANCE,
                        f"{gpu_h / ((float(p['low']) + float(p['high'])) / 2):.2f}x the middle; public: {p['arithmetic']}"))
    return rows


def main() -> None:
    rows = run()
    for r in rows:
        print(f"{r.verdict:4s} {r.ratio:5.2f}  {r.stage}: {r.measured} vs {r.floor} ({r.note.split(';')[0]})")
    if "--write" in sys.argv:
        write_section("estimate", "GPU-hour estimate against public arithmetic", rows, ROOT / "bench" / "results.md")


if __name__ == "__main__":
    main()
