"""Preflight of all tables (issue 22 item 4): `semcl check --all --profile paper` against its 10-minute
target, cold (an empty results store: every shape checked) and warm (the same store again: passed shapes
read from the cache); one table against its 60-second target.

Standalone, not in run_all.py: the cold pass of every table takes long on a small machine. Each pass runs
in a subprocess with its own temp results folder; exit status 2 (rows that failed their check) still
counts as a finished preflight. The load average at the start and end goes into the note, since on a
shared machine the wall time depends on it.

    .venv/bin/python bench/bench_preflight.py                       # --all, cold then warm
    .venv/bin/python bench/bench_preflight.py rince/tab9 rince/tab2 # per table, cold then warm
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import PYTHON, ROOT, Row, ratio_row, subprocess_env

SEMCL = str(Path(PYTHON).parent / "semcl")
ALL_TARGET_S = 600.0
TABLE_TARGET_S = 60.0


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _check(targets: list[str], results: Path, jobs: int | None, timeout: float | None) -> tuple[float, str]:
    """Wall seconds of one `semcl check` and its summary line ('# N row(s): ...')."""
    argv = [SEMCL, "--results", str(results), "check", *targets, "--profile", "paper"]
    if jobs:
        argv += ["--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=subprocess_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 2):
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("# ")), "no report")
    return elapsed, summary.lstrip("# ")


def run(tables: list[str] | None = None, jobs: int | None = None, timeout: float | None = None) -> list[Row]:
    groups = [["--all"]] if not tables else [[t] for t in tables]
    rows = []
    for targets in groups:
        name = "all tables" if targets == ["--all"] else targets[0]
        limit = ALL_TARGET_S if targets == ["--all"] else TABLE_TARGET_S
        with tempfile.TemporaryDirectory(prefix="semcl-bench-preflight-") as tmp:
            for kind in ("cold", "warm"):  # warm: the same results folder, so its cache
                before = _load()
                seconds, summary = _check(targets, Path(tmp), jobs, timeout)
                rows.append(ratio_row(f"preflight of {name} ({kind} cache, --profile paper)", seconds, limit, "s", 1.0,
                                      floor_label="target", note=f"{summary}; {before} -> {_load()}, "
                                                                 f"{os.cpu_count()} CPUs"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="*", help="table ids (default: --all)")
    ap.add_argument("--jobs", type=int, help="semcl check --jobs (default: its own, the CPU count)")
    ap.add_argument("--timeout", type=float, help="seconds per pass before giving up")
    args = ap.parse_args()
    for r in run(args.tables, args.jobs, args.timeout):
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        print(f"{r.stage}: {r.measured} / {r.floor} = {ratio} ({r.verdict}); {r.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
