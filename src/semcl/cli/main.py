"""`semcl` command line. Everything beyond the standard library is imported inside the command that
needs it: `list` and `plan` read the cached registry index (semcl.registry.index) and start without torch,
pandas or the registry's validation."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from semcl import __version__
from semcl.cli.args import get_table, load_registry
from semcl.cli.args import results_root as _results_root
from semcl.cli.args import say_skipped as _say_skipped
from semcl.cli.args import tables_named as _tables
from semcl.cli.numbers import add_numbers_option, overlaid, overlay, say_warnings
from semcl.errors import ConfigError, SemclError

PROFILE_NAMES = ("paper", "mini", "smoke")  # = semcl.registry.tables.PROFILE_NAMES (tests/e2e/test_first_hour.py)


def _store(args):
    from semcl.runs import Store

    return Store(Path(args.results) if args.results else None)


def _set_precision(args) -> None:
    """--precision, else the cluster profile's `precision`, is what every command plans runs with."""
    from semcl.runtime.precision import ENV

    chosen = args.precision
    if chosen is None and getattr(args, "cluster", None) and getattr(args, "executor", "slurm") == "slurm":
        from semcl.launch.slurm.profile import load_cluster_profile

        chosen = load_cluster_profile(args.cluster).precision
    if chosen is not None:
        os.environ[ENV] = chosen


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def cmd_list(args) -> None:
    from semcl.registry.index import load_index

    index = load_index(args.profile)
    runs_dir = _results_root(args) / "runs"
    papers = sorted({t["paper"] for t in index["tables"]})
    if args.paper and args.paper not in papers:
        raise ConfigError(f"unknown paper {args.paper!r} (papers: {', '.join(papers)})")
    if args.format == "json":
        from semcl.cli.format import dump, list_json

        return dump(list_json(index, args.paper, args.profile, runs_dir))
    tables = [t for t in index["tables"] if not args.paper or t["paper"] == args.paper]
    kept = [t for t in tables if t["id"] in index["runs"]]
    _say_skipped([t["id"] for t in tables if t["id"] not in index["runs"]], args.profile)
    try:
        started = set(os.listdir(runs_dir))  # one directory read instead of a stat per planned run
    except OSError:
        started = set()
    lines = []
    for t in kept:
        runs = index["runs"][t["id"]]
        # a finished record present (its content is checked by `semcl status` / `semcl table`)
        done = sum(r[0] in started and os.path.exists(runs_dir / r[0] / "metrics.json") for r in runs)
        lines.append((t["id"], t["paper"], f"{t['implemented']}/{t['rows']}", f"{done}/{len(runs)}", t["source"],
                      t["title"]))
    head = ("table", "paper", "rows impl/total", "runs done/planned", "source", "title")
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(4)]
    for line in [head, *lines]:
        print("  ".join(f"{x:<{w}}" for x, w in zip(line[:4], widths, strict=True)) + f"  {line[4]}: {line[5]}")
    print(f"(runs counted for profile '{args.profile}')")


def cmd_show(args) -> None:
    from semcl.cli.format import dump, matching_rows, show_json
    from semcl.evals.protocols import describe

    table = overlaid(args, get_table(args.table))  # the user's paper numbers (semcl numbers) as user-supplied
    rows = matching_rows(table, args.rows) if args.rows is not None else table.rows
    if args.row:
        from semcl.report.trail import pick_rows

        rows = [r for r in pick_rows(table, args.row) if r in rows]
    if args.files:
        from semcl.cli.format import files_json
        from semcl.report.trail import print_trails, table_trails

        trails = table_trails(table, rows)
        return dump(files_json(table, trails)) if args.format == "json" else print_trails(table, trails)
    if args.format == "json":
        return dump(show_json(table, rows))
    print(f"{table.id}: {table.title}\n  paper: {table.paper}, {table.source}; file: {table.path}")
    print(f"  seeds: {table.seeds}; profiles: {', '.join(table.profiles)}")
    print("  columns:")
    for c in table.columns:
        print(f"    {c.key:<20} {c.label:<18} {describe(c)}")
    print("  rows:")
    for row in rows:
        state = {"reference": "reference (a published number shown beside ours; never run)",
                 "not implemented": "NOT IMPLEMENTED (planned)"}.get(row.state, row.state)
        print(f"    {row.label:<28} method={row.method:<28} {state}")
        if row.init_from:
            print(f"      starts from: {row.init_from!r} (the same seed's final weights)")
        if row.ensemble:
            print(f"      logit-sum ensemble of: {', '.join(repr(x) for x in row.ensemble)}")
        if row.select:
            print(f"      shows the row of {row.select.table} with the {row.select.best} mean {row.select.column} "
                  "(its runs; no runs of its own)")
        if row.overrides:
            print(f"      overrides: {row.overrides}")
        for key, rep in row.reported.items():
            if rep is not None:
                std = f" ± {rep.std}" if rep.std is not None else ""
                print(f"      reported {key}: {rep.value}{std} [{rep.provenance}] {rep.source}")
                for alt in rep.also:  # the same cell from lower-ranked sources
                    print(f"        also {alt.value} [{alt.provenance}] {alt.source}")
                if rep.overrides is not None:
                    print(f"        overrides the registry's {rep.overrides.value} [{rep.overrides.provenance}] "
                          f"{rep.overrides.source}")
        if not any(row.reported.values()):
            print("      reported: none known (null)")
    for name, prof in table.profiles.items():
        if prof.overrides or prof.note or prof.substitute:
            print(f"  profile {name}: {prof.note}")
            if prof.substitute:
                print(f"    substitutes: {prof.substitute}")
            for label, over in prof.rows.items():
                if any(r.label == label for r in rows):
                    print(f"    row {label!r}: {over}")
    for d in table.deviations:
        print(f"  deviation: {d}")
    for n in table.notes:
        print(f"  note: {n}")


def _index_tables(args, index: dict) -> list[dict]:
    """The tables `args` names (or --all), as index entries; same errors as `_tables`."""
    by_id = {t["id"]: t for t in index["tables"]}
    if getattr(args, "all", False):
        kept = [t for t in index["tables"] if t["id"] in index["runs"]]
        _say_skipped([t["id"] for t in index["tables"] if t["id"] not in index["runs"]], args.profile)
        return kept
    if not args.table:
        raise SemclError("name a table (e.g. rince/tab2) or pass --all")
    for name in args.table:
        if name not in by_id:
            raise ConfigError(f"unknown table {name!r} (known: {', '.join(sorted(by_id))})")
        if name not in index["runs"]:
            raise ConfigError(f"{name}: no profile {args.profile!r} (profiles: {', '.join(by_id[name]['profiles'])})")
    return [by_id[name] for name in args.table]


def cmd_plan(args) -> None:
    if args.executor == "slurm" and args.format == "text":  # the array layout needs the resolved runs and resources
        return _plan_slurm(args)
    from semcl.registry.index import load_index

    if args.set or args.row:  # variants and row selections are not in the cached index: plan them here
        from semcl.registry.variant_rows import plan_index

        index = plan_index(_tables(args), args.profile)
        tables = index["tables"]
    else:
        index = load_index(args.profile)
        tables = _index_tables(args, index)
    if args.format == "json":
        from semcl.cli.format import dump, plan_json

        return dump(plan_json(index, tables, args.profile, _results_root(args) / "runs", lambda: _store(args)))
    runs_dir, store = _results_root(args) / "runs", None
    unit = "GPU-h" if args.profile == "paper" else "CPU-min"
    totals = {"tables": 0, "runs": 0, "todo": 0, "all": 0.0, "left": 0.0}
    counted: set[str] = set()  # a run two tables share counts once in the overall total
    for table in tables:
        runs = index["runs"][table["id"]]
        width = max([24, *(len(r[1]) for r in runs)])  # long labels (variants: "<row> [key=value]") stay aligned
        print(f"# {table['id']} profile={args.profile}: {len(runs)} runs")
        todo, cost_all, cost_left, held = 0, 0.0, 0.0, set()
        for run_id, label, seed, cost, deps, *gpus in runs:
            held.update(gpus[:1])
            if not (runs_dir / run_id).exists():  # never started: no record, lock or checkpoint to read
                status, detail = "missing", ""
            else:
                store = store or _store(args)
                status, detail = store.status(run_id)
            extra = f"  {detail}" if detail and args.verbose else ""
            after = f"  after {','.join(deps)}" if deps else ""
            print(f"{run_id}  {label:<{width}} seed={seed:<4} {status:<8} {cost:>12}{after}{extra}")
            amount = float(cost.split()[0])
            cost_all += amount
            if status != "done":
                todo, cost_left = todo + 1, cost_left + amount
        if table["not_implemented"]:
            print(f"# not implemented (not planned): {', '.join(table['not_implemented'])}")
        if held:  # the estimate counts every GPU a run's job holds
            print(f"# {table['id']} GPUs held per run: {'/'.join(str(g) for g in sorted(held))}")
        print(f"# {table['id']} total: {len(runs)} runs, {cost_all:.4g} {unit}; not done: {todo} runs, {cost_left:.4g} {unit}")
        totals["tables"] += 1
        for run_id, _, _, cost, _, *gpus in runs:
            if run_id not in counted:
                counted.add(run_id)
                done = (runs_dir / run_id / "metrics.json").exists()
                totals["runs"], totals["all"] = totals["runs"] + 1, totals["all"] + float(cost.split()[0])
                totals["peak"] = max(totals.get("peak", 0), *gpus[:1], 0)
                if not done:
                    totals["todo"], totals["left"] = totals["todo"] + 1, totals["left"] + float(cost.split()[0])
    if totals["tables"] > 1:
        print(f"# all {totals['tables']} tables: {totals['runs']} runs, {totals['all']:.4g} {unit}; "
              f"not done: {totals['todo']} runs, {totals['left']:.4g} {unit}; widest run holds {totals.get('peak', 0)} GPUs "
              "(estimates: semcl.estimate.gpu_hours)")


def _plan_slurm(args) -> None:
    from semcl.launch.slurm.profile import load_cluster_profile
    from semcl.launch.slurm.submit import describe_arrays
    from semcl.runs import estimate_cost, plan_runs

    store = _store(args)
    for table in _tables(args):
        runs = plan_runs(table, args.profile)
        width = max([24, *(len(r.row_label) for r in runs)])
        print(f"# {table.id} profile={args.profile}: {len(runs)} runs")
        for run in runs:
            status, detail = store.status(run.run_id)
            cost = estimate_cost(run.config, args.profile, table.resources_for(run.row_label, args.profile).gpus)
            extra = f"  {detail}" if detail and args.verbose else ""
            after = f"  after {','.join(run.depends_on)}" if run.depends_on else ""
            print(f"{run.run_id}  {run.row_label:<{width}} seed={run.seed:<4} {status:<8} {cost:>12}{after}{extra}")
        print(describe_arrays([(r, table.resources_for(r.row_label, args.profile)) for r in runs],
                              load_cluster_profile(args.cluster), store))
        skipped = [r.label for r in table.rows if not r.implemented]
        if skipped:
            print(f"# not implemented (not planned): {', '.join(skipped)}")


def cmd_status(args) -> None:
    store = _store(args)
    current = None
    counts: dict[str, int] = {}
    for table, run, status, detail in _statuses(args, store):
        if table.id != current:
            if counts:
                print("# " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
            current, counts = table.id, {}
            print(f"# {table.id} profile={args.profile}")
        counts[status] = counts.get(status, 0) + 1
        if status != "done" or args.verbose:
            print(f"{run.run_id}  {run.row_label:<24} seed={run.seed:<4} {status:<8} {detail}")
    if counts:
        print("# " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))


def _runs_with_resources(args) -> list:
    tables = _tables(args)
    if args.row and not args.set:  # a misspelt label would select nothing and report "0 runs to submit"
        for label in args.row:
            if not any(label in (r.label for r in t.rows) for t in tables):
                listing = "; ".join(f"{t.id}: {', '.join(repr(r.label) for r in t.rows)}" for t in tables)
                raise ConfigError(f"unknown row {label!r} (rows of {listing})")
    from semcl.runs import plan_runs

    return [(r, t.resources_for(r.row_label, args.profile)) for t in tables
            for r in plan_runs(t, args.profile, None if args.set else args.row)]  # --set: the tables hold the variants


def cmd_run(args) -> None:
    from semcl.launch.backends import backend, check_data_root

    store = _store(args)
    if args.progress:  # read by each run's training loop (semcl.runtime.progress), inherited by local jobs
        os.environ["SEMCL_PROGRESS"] = "1"
    pairs = _runs_with_resources(args)
    runs = [r for r, _ in pairs]
    if args.executor == "slurm" and not args.no_check:  # before anything is checked or written
        from semcl.preflight.check import distinct_runs
        from semcl.preflight.report import require_passed

        for table in _tables(args):
            why = require_passed(_preflight_file(args), table, {r.run_id for r in distinct_runs(table, args.profile)})
            if why:
                raise SemclError(f"refusing to submit: {why}")
    data_root = Path(args.data_root or os.environ.get("SEMCL_DATA", "data"))
    check_data_root(runs, data_root)
    if args.executor == "slurm":
        from semcl.launch.slurm.profile import load_cluster_profile

        backend("slurm").submit_slurm(pairs, store, data_root, load_cluster_profile(args.cluster),
                                      retry_failed=args.retry_failed)
        return
    backend(args.executor).submit_runs(runs, store, data_root, executor=args.executor, workers=args.workers,
                                       retry_failed=args.retry_failed)


def _statuses(args, store):
    """(table, run, status, detail) for every planned run, reattaching to submitted SLURM jobs."""
    from semcl.launch.slurm.manifest import job_ids, latest_jobs, run_state, sacct_states
    from semcl.runs import plan_runs

    tables = _tables(args)
    runs = [(t, r) for t in tables for r in plan_runs(t, args.profile)]
    jobs = latest_jobs(store)
    states = sacct_states(job_ids([jobs[r.run_id] for _, r in runs if r.run_id in jobs]))
    return [(t, r, *run_state(store, r.run_id, jobs.get(r.run_id), states)) for t, r in runs]


def cmd_wait(args) -> None:
    import time

    store = _store(args)
    t0 = time.time()
    while True:
        rows = _statuses(args, store)
        active = [r for r in rows if r[2] in ("pending", "running", "requeued")]
        if not active:
            counts = {k: sum(r[2] == k for r in rows) for k in ("done", "failed", "partial", "missing")}
            print("no run queued or running: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
            failed = [r for r in rows if r[2] == "failed"]
            if failed:
                raise SemclError(f"{len(failed)} run(s) failed; see `semcl status`")
            return
        if args.timeout and time.time() - t0 > args.timeout:
            raise SemclError(f"timed out after {args.timeout} s with {len(active)} run(s) still queued or running")
        time.sleep(args.poll)


def cmd_table(args) -> None:
    from semcl.report.tables import write_table

    table, out_dir = get_table(args.table), None
    if args.set or args.row:  # the registered rows and each one's variant, in a folder of its own
        from semcl.registry.variant_rows import slug, table_view

        table = table_view(table, args.set, args.row, args.profile)
        out_dir = _store(args).root / "tables" / "variants" / slug(args.set)
    table = overlaid(args, table)  # the user's paper numbers (semcl numbers) as user-supplied
    text, path = write_table(table, args.profile, _store(args), args.format, out_dir)
    print(text, end="")
    print(f"(written to {path})", file=sys.stderr)


def cmd_claims(args) -> None:
    from semcl.report.claim_verdicts import write_claims

    ov = overlay(args)
    text, path = write_claims(args.paper, args.profile, _store(args), args.format, overlay=ov)
    say_warnings(ov)
    print(text, end="")
    print(f"(written to {path})", file=sys.stderr)


def cmd_figure(args) -> None:
    from semcl.report.figures import write_figure

    table = get_table(args.table)
    if table.figure is None:
        with_figure = sorted(t.id for t in load_registry().values() if t.figure)
        raise ConfigError(f"{table.path}: table {table.id} has no 'figure' entry (tables with one: {', '.join(with_figure)})")
    points, path = write_figure(table, args.profile, _store(args))
    print(points.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"(written to {path} and {path.with_suffix('.csv')})", file=sys.stderr)


def cmd_report(args) -> None:
    from semcl.report.reproduction import build_report

    try:
        out = Path(args.out) if args.out else _results_root(args) / "reports"  # never the tracked reproduce/ by default
        ov = overlay(args)
        if args.html:  # the page and, from the same data, the Markdown beside it
            from semcl.report.html import build_html_report

            page, path = build_html_report(args.paper, args.profile, _store(args), out, overlay=ov)
        else:
            text, path = build_report(args.paper, args.profile, _store(args), out, overlay=ov)
        say_warnings(ov)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if args.html:
        print(page)
        print(f"(written to {page} and {path})", file=sys.stderr)
        return
    print(text, end="")
    print(f"(written to {path})", file=sys.stderr)


def _preflight_file(args) -> Path:
    if getattr(args, "set", None):  # a variant's check never replaces the registered rows' status
        from semcl.registry.variant_rows import slug

        return _results_root(args) / "preflight" / "variants" / slug(args.set) / f"{args.profile}.json"
    return _results_root(args) / "preflight" / f"{args.profile}.json"


def cmd_check(args) -> None:
    import tempfile

    from semcl.launch.slurm.profile import load_cluster_profile
    from semcl.preflight.check import Reduce, check_tables
    from semcl.preflight.pool import default_jobs
    from semcl.preflight.report import render, write_status

    cluster = load_cluster_profile(args.cluster)
    reduce = (Reduce(backbone="resnet_tiny", image_size=32, head_hidden=64, head_dim=32, drop_pretrained=True,
                    method={"arch": "vit_tiny_test", "checkpoint": None, "backbone": "r3d_small",
                            "segmenter": "deeplabv3_tiny"})
              if args.reduced else None)
    tables = _tables(args)

    def progress(res) -> None:
        if args.verbose:
            print(f"  {res.status():<7} {res.table} / {res.row} ({res.seconds:.1f} s)", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="semcl-check-") as work:
        results = check_tables(tables, args.profile, Path(work), cluster.gpu_mem_gb, reduce=reduce,
                               batch=args.batch, progress=progress, jobs=args.jobs or default_jobs(),
                               cache=None if args.no_cache else _results_root(args) / "preflight" / "cache")
    print(render(results), end="")
    if reduce is None:  # only a full-size check clears a table for the cluster
        write_status(_preflight_file(args), args.profile, results)
    else:
        print(f"(reduced check: {reduce.describe()}; not recorded as a preflight)", file=sys.stderr)
    if not all(r.ok for r in results):
        raise SemclError(f"{sum(not r.ok for r in results)} row(s) failed the preflight")


def cmd_readme(args) -> None:
    from semcl.report.readme import update_readme

    path = Path(args.readme)
    if not path.exists():
        raise SemclError(f"{path}: no such file")
    done = update_readme(path, _store(args), get_table)
    for table_id, profile in done:
        print(f"{path}: table {table_id} ({profile}) regenerated")
    if not done:
        print(f"{path}: no '<!-- semcl:table <id> <profile> -->' block with runs in {_results_root(args)}",
              file=sys.stderr)


def cmd_prepare(args) -> None:
    from semcl.data.prepare_mini import prepare_mini

    for line in prepare_mini(Path(args.data_root or os.environ.get("SEMCL_DATA", "data")), video=args.video):
        print(line)


def cmd_completion(args) -> None:
    from semcl.cli.completion import bash_script
    from semcl.launch.slurm.profile import profiles_root
    from semcl.registry.tables import load_registry

    papers = sorted({t.paper for t in load_registry().values()})
    clusters = sorted(p.stem for p in profiles_root().glob("*.yaml"))
    sys.stdout.write(bash_script(build_parser(), papers, clusters))


# a read-only results folder, a full disk or quota: one line instead of a traceback
WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcl", description="Reproduce tables of papers on semantic contrastive learning.")
    p.add_argument("--version", action="version", version=f"semcl {__version__}")
    p.add_argument("--results", help="results folder (default: $SEMCL_RESULTS or ./results)")
    p.add_argument("--registry", help="registry folder of table YAMLs (default: $SEMCL_REGISTRY, else the installed "
                                      "package's copy, else the clone's experiments/)")
    p.add_argument("--precision", choices=("official", "fast"), default=None,
                   help="the runs' arithmetic, part of their ids: official (default: what each paper's code did) or "
                        "fast (bf16 autocast, channels_last, cudnn.benchmark); default: the cluster profile's, else official")
    sub = p.add_subparsers(dest="command", required=True)

    def with_profile(sp, default="paper"):
        sp.add_argument("--profile", choices=PROFILE_NAMES, default=default,
                        help=f"paper (the paper's scale), mini (real small data, CPU minutes) or smoke "
                             f"(synthetic data, seconds); default: {default}")

    def with_set(sp, rows: str | None):
        sp.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a variant: this config key (dotted, as rows' overrides, e.g. optim.lr=0.1; value as YAML) "
                             "on the selected rows, after every registry layer; own run ids, labelled "
                             "'<row> [KEY=VALUE]' (repeatable)")
        if rows:
            sp.add_argument("--row", action="append", help=rows)

    def with_json(sp):
        sp.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (default) or json (for scripts)")

    sp = sub.add_parser("list", help="every registry entry with its status")
    sp.add_argument("paper", nargs="?", default=None, help="only this paper's entries (rince, gpaco, paco, hsa, scns)")
    with_profile(sp)
    with_json(sp)
    sp.set_defaults(func=cmd_list)
    sp = sub.add_parser("show", help="rows, columns, protocols and reported numbers of a table")
    sp.add_argument("table", help="table id, e.g. rince/tab2 (see `semcl list`)")
    sp.add_argument("--rows", metavar="REGEX", help="only the rows whose label matches (case-insensitive)")
    sp.add_argument("--row", action="append", metavar="LABEL", help="only this row, by its exact label (repeatable)")
    sp.add_argument("--files", action="store_true",
                    help="the files behind each row: registry YAML, preset, method spec and class, losses, model "
                         "builder, dataset reader, and each column's protocol and metric code")
    with_json(sp)
    add_numbers_option(sp)
    sp.set_defaults(func=cmd_show)
    for name, func, hlp in (("plan", cmd_plan, "one line per run: id, row, seed, status, cost"),
                            ("status", cmd_status, "done / pending / running / requeued / failed / missing per run"),
                            ("wait", cmd_wait, "block until no run of these tables is queued or running")):
        sp = sub.add_parser(name, help=hlp)
        sp.add_argument("table", nargs="*", help="table ids, e.g. rince/tab2")
        sp.add_argument("--all", action="store_true", help="every table in the registry")
        sp.add_argument("-v", "--verbose", action="store_true", help="also the detail of each run (error, lock owner)")
        with_profile(sp)
        if name == "plan":
            sp.add_argument("--executor", choices=("local", "debug", "slurm"), default="local",
                            help="slurm: also show the job arrays that `run --executor slurm` would submit")
            sp.add_argument("--cluster", default="local", help="cluster profile slurm/profiles/<name>.yaml")
            with_set(sp, "only this row label and the rows it builds on (repeatable)")
            with_json(sp)
        if name == "wait":
            sp.add_argument("--timeout", type=positive_float, default=None, help="give up after this many seconds")
            sp.add_argument("--poll", type=positive_float, default=10.0,
                            help="seconds between status checks (default 10)")
        sp.set_defaults(func=func)
    sp = sub.add_parser("run", help="submit the missing runs of one or more tables")
    sp.add_argument("table", nargs="*", help="table ids, e.g. rince/tab2")
    sp.add_argument("--all", action="store_true", help="every table in the registry that has the profile")
    with_profile(sp)
    sp.add_argument("--executor", choices=("local", "debug", "slurm"), default="local",
                    help="local: processes on this machine (default); debug: inside this process (submitit debug), "
                         "tracebacks shown; slurm: job arrays on a cluster (after `semcl check`)")
    sp.add_argument("--cluster", default="local", help="cluster profile for --executor slurm (slurm/profiles/)")
    sp.add_argument("--workers", type=positive_int, default=None,
                    help="local executor: parallel processes (default: CPU count, at most 4)")
    sp.add_argument("--row", action="append", help="only this row label (repeatable)")
    with_set(sp, None)
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--retry-failed", action="store_true", help="also resubmit runs that failed")
    sp.add_argument("--no-check", action="store_true",
                    help="--executor slurm: submit even without a passed `semcl check` of the table")
    sp.add_argument("--progress", action="store_true",
                    help="a step-level progress line (epoch, step, loss, it/s) even where stderr is not a terminal "
                         "(local jobs: in their stderr logs); sets $SEMCL_PROGRESS=1")
    sp.set_defaults(func=cmd_run)
    sp = sub.add_parser("check", help="preflight on the CPU: build, one step, checkpoint and evaluation of every "
                                      "distinct row config (seeds collapsed)")
    sp.add_argument("table", nargs="*", help="table ids, e.g. rince/tab2")
    sp.add_argument("--all", action="store_true", help="every table in the registry that has the profile")
    with_profile(sp)
    sp.add_argument("--cluster", default="example-a100",
                    help="cluster profile whose gpu_mem_gb the estimate is held against (slurm/profiles/)")
    sp.add_argument("--batch", type=positive_int, default=4, help="images in the one training step (default 4)")
    sp.add_argument("--reduced", action="store_true",
                    help="CI size: resnet_tiny backbone, 32-px images, 64/32 head, no pretrained file "
                         "(not recorded as a preflight)")
    sp.add_argument("-v", "--verbose", action="store_true", help="one progress line per row on stderr")
    sp.add_argument("--jobs", type=positive_int, help="checks in parallel processes (default: the CPU count)")
    sp.add_argument("--no-cache", action="store_true",
                    help="check every shape again (default: passed shapes are read from results/preflight/cache, "
                         "per code version)")
    with_set(sp, "with --set: only this row varies (repeatable)")
    sp.set_defaults(func=cmd_check)
    sp = sub.add_parser("table", help="paper vs ours table from the results store")
    sp.add_argument("table", help="table id, e.g. rince/tab2")
    with_profile(sp)
    sp.add_argument("--format", choices=("md", "tex", "csv"), default="md", help="md (default), tex or csv")
    with_set(sp, "with --set: only this row varies (repeatable); each varied row is shown beside its variant")
    add_numbers_option(sp)
    sp.set_defaults(func=cmd_table)
    sp = sub.add_parser("claims", help="judge a paper's claims (experiments/<paper>/claims.yaml) from the stored runs")
    sp.add_argument("paper", help="rince | gpaco | paco | hsa | scns")
    with_profile(sp)
    sp.add_argument("--format", choices=("md", "csv"), default="md", help="md (default) or csv")
    add_numbers_option(sp)
    sp.set_defaults(func=cmd_claims)
    sp = sub.add_parser("figure", help="paper vs ours figure (PNG + CSV of the points) from the results store")
    sp.add_argument("table", help="table id with a 'figure' entry, e.g. rince/fig4")
    with_profile(sp)
    sp.set_defaults(func=cmd_figure)
    sp = sub.add_parser("report", help="per-paper reproduction report: every table's status, tables and figures")
    sp.add_argument("paper", help="rince | gpaco | paco | ...")
    with_profile(sp)
    sp.add_argument("--out", default=None, help="folder for <paper>.<profile>.md (default: <results>/reports/; "
                                                "the curated pages are reproduce/)")
    sp.add_argument("--html", action="store_true", help="also write <paper>.<profile>.html: one self-contained page "
                    "(tables with provenance on hover, claims' verdicts, figures inline); prints its path")
    add_numbers_option(sp)
    sp.set_defaults(func=cmd_report)
    sp = sub.add_parser("readme", help="regenerate the README's result tables (blocks <!-- semcl:table ID PROFILE -->"
                                       " ... <!-- /semcl -->) from the stored runs")
    sp.add_argument("--readme", default="README.md", help="the file whose blocks are rewritten (default: README.md)")
    sp.set_defaults(func=cmd_readme)
    sp = sub.add_parser("prepare-mini", help="lay out Fashion-MNIST and MNIST (installed packages) under the data root")
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--video", action="store_true",
                    help="also render moving-MNIST clips (rince/tab4 mini; synthetic motion of real digits)")
    sp.set_defaults(func=cmd_prepare)
    from semcl.cli import data as cli_data
    from semcl.cli import numbers as cli_numbers
    cli_data.add_parser(sub, with_profile)
    cli_numbers.add_parser(sub)
    from semcl.cli import curves as cli_curves
    cli_curves.add_parser(sub, with_profile)
    from semcl.cli import export as cli_export
    cli_export.add_parser(sub)
    sp = sub.add_parser("completion", help="print a bash completion script: source <(semcl completion bash)")
    sp.add_argument("shell", choices=("bash",), help="bash (zsh: after autoload bashcompinit; bashcompinit)")
    sp.set_defaults(func=cmd_completion)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.results and Path(args.results).exists() and not Path(args.results).is_dir():
            raise SemclError(f"--results {args.results}: is a file, not a results folder")
        if args.registry:  # through the environment, so the runs' own processes read the same registry
            if not Path(args.registry).is_dir():
                raise SemclError(f"--registry {args.registry}: not a folder of table YAMLs")
            os.environ["SEMCL_REGISTRY"] = str(Path(args.registry).resolve())
        _set_precision(args)
        args.func(args)
    except SemclError as err:
        print(f"semcl: error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    except KeyboardInterrupt:  # a command without its own signal handling (run has one)
        print("semcl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `semcl list | head` (before OSError, of which it is one)
        # the reader is gone: point stdout at /dev/null so the interpreter's final flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        line = os_error_line(err)
        if line is None:
            raise
        print(f"semcl: error: {line}", file=sys.stderr)
        return 2
    return 0


def os_error_line(err: OSError) -> str | None:
    """One line for a failed read or write of a named file (None: no file named, a bug to show whole)."""
    from semcl.files import DISK_FULL

    where = f"{err.filename}: " if err.filename else ""
    why = err.strerror or str(err)
    if err.errno in DISK_FULL:
        return (f"{where}cannot write: the disk is full or over quota ({why}); free space on it, or point "
                "--results / $SEMCL_RESULTS at another disk")
    if err.errno in WRITE_ERRNOS:
        return (f"{where}cannot write ({why}); fix the permissions of the results folder "
                "(--results / $SEMCL_RESULTS)")
    if err.errno == errno.EFBIG:
        return f"{where}cannot write: the file would exceed this process's file-size limit (ulimit -f) ({why})"
    return f"{where}{why}" if err.filename else None


if __name__ == "__main__":
    sys.exit(main())
