"""Cold preflight of every table (issue 48 item 8): `semcl check --all --profile paper` in a fresh results folder (no
shape cache) against its 300-second target on this machine, with the CPU seconds of the check and its workers and
the load average beside it (other jobs share the machine; the wall time depends on them, the CPU seconds less so).

Also counted from the status file the check writes: rows with a memory figure (every row must keep one: the fake
step at the row's own size) and rows whose real step ran reduced (semcl.preflight.check.reductions).

    .venv/bin/python bench/bench_preflight_cold.py              # --all, cold
    .venv/bin/python bench/bench_preflight_cold.py --jobs 2 --timeout 1800
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import PYTHON, ROOT, Row, ratio_row, subprocess_env

TARGET_S = 300.0


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _children_cpu() -> float:
    """User + system seconds of the waited-for children (the check and, through it, its worker processes)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cold_check(jobs: int | None, timeout: float | None) -> dict:
    """One cold `semcl check --all --profile paper`: wall and CPU seconds, its summary line, and the status file's
    counts of rows, rows with a memory figure and rows with a reduced real step."""
    with tempfile.TemporaryDirectory(prefix="semcl-bench-preflight-cold-") as tmp:
        argv = [PYTHON, "-m", "semcl.cli", "check", "--all", "--profile", "paper", "--results", tmp]
        if jobs:
            argv += ["--jobs", str(jobs)]
        cpu0, before, start = _children_cpu(), _load(), time.perf_counter()
        proc = subprocess.run(argv, env=subprocess_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu0
        if proc.returncode not in (0, 2):  # 2: rows that failed their check (a finished preflight)
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        status = json.loads((Path(tmp) / "preflight" / "paper.json").read_text())
    rows = [r for t in status.values() for r in t.get("rows", {}).values()]
    summary = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("# ")), "no report")
    return {"wall_s": wall, "cpu_s": cpu, "load": f"{before} -> {_load()}", "summary": summary.lstrip("# "),
            "rows": len(rows), "with_memory": sum(r["est_gpu_gb"] is not None for r in rows),
            "reduced": sum(r["reduced"] is not None for r in rows),
            "errors": [f"{t}: {e}" for t, doc in status.items() for e in doc["errors"]]}


def run(jobs: int | None = None, timeout: float | None = None) -> list[Row]:
    res = cold_check(jobs, timeout)
    for line in res["errors"]:  # which rows failed (user-supplied weights absent, a missing optional package)
        print(f"  {line[:160]}", file=sys.stderr)
    note = (f"{res['summary']}; {res['with_memory']}/{res['rows']} rows with a memory figure, {res['reduced']} with a "
            f"reduced real step; {res['cpu_s']:.0f} CPU s; {res['load']}, {os.cpu_count()} CPUs")
    return [ratio_row("preflight of all tables (cold, --profile paper)", res["wall_s"], TARGET_S, "s", 1.0,
                      floor_label="target", note=note)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, help="semcl check --jobs (default: its own, the CPU count)")
    ap.add_argument("--timeout", type=float, help="seconds before giving up")
    args = ap.parse_args()
    for r in run(args.jobs, args.timeout):
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        print(f"{r.stage}: {r.measured} / {r.floor} = {ratio} ({r.verdict}); {r.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
