"""Shared pieces of the benchmarks: result rows, side-by-side timing, subprocess timing, machine info.

Every number that a target judges is a ratio of two timings taken in the same process (or the
same parent), interleaved, so that load from other processes on a shared machine hits both.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# the rates GPU-hour estimates read (src/semcl/data/files/train_throughput.csv, `loader` rows), filled by the benches
# that measure them (loader, data, video) and written by `make bench` or a bench's own --write
RATES: dict[str, float] = {}
THROUGHPUT_CSV = ROOT / "src" / "semcl" / "data" / "files" / "train_throughput.csv"


@dataclass
class Row:
    """One line of the results table. ``ok`` None means informational (no target)."""

    stage: str
    measured: str
    floor: str
    ratio: float | None
    target: str
    ok: bool | None
    note: str = ""

    @property
    def verdict(self) -> str:
        return "—" if self.ok is None else ("OK" if self.ok else "MISS")


def ratio_row(stage: str, measured: float, floor: float, unit: str, limit: float, *, note: str = "",
              floor_label: str = "") -> Row:
    """Row for ``measured / floor <= limit`` (times in ``unit``)."""
    r = measured / floor
    fl = f"{floor:.3g} {unit}" + (f" ({floor_label})" if floor_label else "")
    return Row(stage, f"{measured:.3g} {unit}", fl, r, f"≤ {limit:g}×", r <= limit, note)


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Run every function once per round, ``repeats`` rounds, rotating the order; seconds per call."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(repeats):
        order = names[i % len(names):] + names[: i % len(names)]
        for name in order:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def paired_ratio(times: dict[str, list[float]], num: str, den: str) -> float:
    """Median over rounds of num/den timed in the same round: robust to slow load drift."""
    return statistics.median(a / b for a, b in zip(times[num], times[den], strict=True))


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def time_command(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    """Wall time of one subprocess run (seconds); raises if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env or subprocess_env(), cwd=cwd or ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


def run_json_child(code: str, env: dict[str, str] | None = None, timeout: float = 900) -> dict:
    """Run ``python -c code`` in a fresh process; the child prints one JSON line last."""
    proc = subprocess.run([PYTHON, "-c", code], env=env or subprocess_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine_info() -> dict[str, str]:
    import numpy
    import torch

    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": mem,
        "load average at start (1/5/15 min)": load,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch threads": str(torch.get_num_threads()),
        "torch CPU capability": torch.backends.cpu.get_cpu_capability(),
        "numpy": numpy.__version__,
    }
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        import PIL

        info["Pillow"] = PIL.__version__
    except ImportError:
        pass
    try:
        import pandas

        info["pandas"] = pandas.__version__
    except ImportError:
        pass
    return info


def long_tail_counts(total: int = 115_846, n_classes: int = 1000, imbalance: float = 256.0):
    """int64 [C] class sizes by the CIFAR-LT rule n_i = int(n_max * (1/imbalance)**(i/(C-1))), with n_max
    the largest value whose sizes sum to at most ``total`` (the few images left over go to class 0).

    The defaults stand in for ImageNet-LT: its 115,846 training images over 1000 classes (n_max ≈ 646,
    smallest class 2). The real set runs 1280 .. 5, which this rule would turn into 229,853 images;
    keeping n right matters more here, since every cost timed with it grows with n, not the profile.
    """
    import torch

    ramp = (1.0 / imbalance) ** (torch.arange(n_classes, dtype=torch.float64) / max(n_classes - 1, 1))
    lo, hi = 0.0, float(total)
    for _ in range(60):  # bisection on n_max: the sum is monotone in it
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if int((mid * ramp).long().sum()) <= total else (lo, mid)
    counts = (lo * ramp).long()
    counts[0] += total - int(counts.sum())
    return counts


def long_tail_labels(counts, gen):
    """int64 [n] labels with ``counts[c]`` copies of class c, in an order shuffled by ``gen``."""
    import torch

    labels = torch.repeat_interleave(torch.arange(len(counts)), counts)
    return labels[torch.randperm(len(labels), generator=gen)]


def section_markers(tag: str) -> tuple[str, str]:
    """The comment lines around one bench's own block of results.md."""
    return f"<!-- {tag} rows: bench/bench_{tag}.py -->", f"<!-- end {tag} rows -->"


def render(rows: list[Row]) -> tuple[str, list[str]]:
    lines = ["| # | stage | measured | floor / baseline | ratio | target | OK/MISS |", "|---|---|---|---|---|---|---|"]
    notes = []
    for i, r in enumerate(rows, 1):
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"| {i} | {r.stage} | {r.measured} | {r.floor} | {ratio} | {r.target} | {r.verdict} |")
        if r.note:
            notes.append(f"- [{i}] {r.note}")
    return "\n".join(lines), notes


def write_section(tag: str, title: str, rows: list[Row], out: Path) -> None:
    """Replace (or append) one bench's section of results.md between its markers, keeping the rest of the
    file: a bench rerun on its own (`bench_<x>.py --write`) updates its rows without a whole `make bench`."""
    from datetime import UTC, datetime

    table, notes = render(rows)
    begin, end = section_markers(tag)
    section = "\n".join([begin, f"## {title}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC", "", table, "", *notes, end])
    text = out.read_text() if out.exists() else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    out.write_text(text)


def write_rates(rates: dict[str, float], path: Path = THROUGHPUT_CSV) -> None:
    """The measured rates into the table the GPU-hour estimate reads, dated, so the estimate and bench/results.md
    say the same (tests/estimate/test_public_arithmetic.py); rates not measured keep their line."""
    import csv
    import io
    import re

    rows = list(csv.reader(io.StringIO(path.read_text())))
    day = time.strftime("%Y-%m-%d")
    for row in rows:
        if len(row) > 11 and row[0] == "loader" and row[1] in rates:
            row[3] = f"{rates[row[1]]:g}"
            row[11] = re.sub(r"\(\d{4}-\d{2}-\d{2}\)", f"({day})", row[11])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
