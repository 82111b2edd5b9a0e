"""Run every benchmark, print one table of ratios against floors, and write bench/results.md.

    make bench                     # = .venv/bin/python bench/run_all.py
    .venv/bin/python bench/run_all.py --only losses evals
    .venv/bin/python bench/run_all.py --only engine --out /tmp/engine.md   # without touching results.md

Benchmarks are not tests: they print numbers and flag misses (MISS) against the targets of
issue #5; the exit status is 0 unless a section crashed. Every ratio is measured side by side in
one run (interleaved rounds, medians), because the machine may be shared. See each bench_*.py for
what exactly is timed and what its floor is.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from common import RATES, Row, machine_info, section_markers, write_rates, write_section  # noqa: E402

# `estimate` last: it reads the loader rates this run measured (written before it runs)
SECTIONS = ("cli", "losses", "methods", "hsa", "vit", "data", "loader", "video", "evals", "robustness", "engine",
            "estimate")
# sections with their own block of results.md (numbered from 1; tests and the rate table cite their rows)
OWN_BLOCK = {"loader": "Loader rows (issue 22)", "video": "Video loader rows (issue 22)",
             "estimate": "GPU-hour estimate against public arithmetic"}


def _section(name: str) -> list[Row]:
    if name == "cli":
        import bench_cli

        return bench_cli.run()
    if name == "losses":
        import bench_losses

        return bench_losses.run()
    if name == "methods":
        import bench_methods

        return bench_methods.run()
    if name == "hsa":
        import bench_hsa

        return bench_hsa.run()
    if name == "vit":
        import bench_vit

        return bench_vit.run()
    if name == "data":
        import bench_data

        return bench_data.run()
    if name == "loader":
        import bench_loader

        return bench_loader.run()
    if name == "video":
        import bench_video

        return bench_video.run()
    if name == "evals":
        import bench_evals

        return bench_evals.run()
    if name == "robustness":
        import bench_robustness

        return bench_robustness.run()
    if name == "engine":
        import bench_engine

        return bench_engine.run()
    if name == "estimate":
        import bench_estimate

        return bench_estimate.run()
    raise ValueError(name)


def render(rows: list[Row]) -> tuple[str, list[str]]:
    lines = ["| # | stage | measured | floor / baseline | ratio | target | OK/MISS |", "|---|---|---|---|---|---|---|"]
    notes = []
    for i, r in enumerate(rows, 1):
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"| {i} | {r.stage} | {r.measured} | {r.floor} | {ratio} | {r.target} | {r.verdict} |")
        if r.note:
            notes.append(f"- [{i}] {r.note}")
    return "\n".join(lines), notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--out", type=Path, default=HERE / "results.md")
    args = parser.parse_args()
    info = machine_info()
    started = datetime.now(UTC)
    rows: list[Row] = []
    own: dict[str, list[Row]] = {}
    durations = {}
    crashed = False
    publish = args.out == HERE / "results.md"  # the estimate's rate table follows results.md, not another --out
    rates_written = False
    for name in args.only:
        if name == "estimate" and RATES and publish:
            write_rates(RATES)  # the estimate reads the rates measured above
            rates_written = True
            from semcl.estimate import throughput

            throughput._read.cache_clear()
        t0 = time.perf_counter()
        print(f"== {name} ...", flush=True)
        try:
            got = _section(name)
        except Exception as err:  # a crashed section is reported, the others still run
            crashed = True
            traceback.print_exc()
            got = [Row(f"{name}: crashed", "—", "—", None, "—", False, f"{type(err).__name__}: {err}")]
        durations[name] = time.perf_counter() - t0
        for r in got:
            ratio = "" if r.ratio is None else f" ratio {r.ratio:.2f}"
            print(f"   {r.verdict:<4} {r.stage}: {r.measured} vs {r.floor}{ratio} (target {r.target})", flush=True)
        if name in OWN_BLOCK:
            own[name] = got
        else:
            rows.extend(got)
    table, notes = render(rows)
    total = sum(durations.values())
    every = rows + [r for got in own.values() for r in got]
    misses = sum(r.ok is False for r in every)
    print()
    print(table)
    print("\n".join(notes))
    print(f"\n{misses} MISS of {sum(r.ok is not None for r in every)} judged rows; {total:.0f} s in all")
    text = [
        "# semcl benchmarks (issue #5)",
        "",
        f"Generated by `make bench` (bench/run_all.py) on {started:%Y-%m-%d %H:%M} UTC in {total:.0f} s "
        f"({', '.join(f'{k} {v:.0f} s' for k, v in durations.items())}).",
        "Ratios are measured side by side in one run (interleaved rounds, medians); the machine may be",
        "shared, so absolute times are noisy and only the ratios are judged. The loader, video and estimate",
        "blocks below come from the same run unless their heading says another date, and the loader rates the",
        "GPU-hour estimate reads (src/semcl/data/files/train_throughput.csv) were written from it.",
        "",
        table,
        "",
        "Notes:",
        "",
        *notes,
        "",
        "Machine and versions:",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
    ]
    # the GPU check's section (scripts/gpu_check.sh, on a GPU machine) survives a CPU rerun of the benchmarks
    from gpu_section import keep_gpu_section

    old = args.out.read_text() if args.out.exists() else ""
    args.out.write_text(keep_gpu_section(args.out, "\n".join(text)))
    for tag, title in OWN_BLOCK.items():  # this run's blocks; a block not run this time is kept as it was
        begin, end = section_markers(tag)
        if tag in own:
            write_section(tag, title, own[tag], args.out)
        elif begin in old and end in old:
            block = old[old.index(begin):old.index(end) + len(end)]
            args.out.write_text(args.out.read_text().rstrip("\n") + "\n\n" + block + "\n")
    if RATES and publish and not rates_written:  # no estimate section ran: the table still follows results.md
        write_rates(RATES)
    print(f"written to {args.out}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
