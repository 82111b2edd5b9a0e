"""`semcl plan`, `run`, `status` and `wait`: the runs of tables, what they cost, sending them out through a
backend (semcl.launch.base.Backend) and following them."""

from __future__ import annotations

import json
import os
import sys

from semcl.cli.args import (
    NAME_A_TABLE,
    add_json,
    add_profile,
    add_set,
    add_tables,
    data_root,
    open_store,
    positive_float,
    positive_int,
    results_folders,
    results_root,
    say_skipped,
    tables_named,
)
from semcl.cli.check import preflight_file
from semcl.errors import ConfigError, SemclError
from semcl.launch.backends import BACKENDS, DEFAULT_EXECUTOR, backend
from semcl.launch.base import DEFAULT_CLUSTER, LaunchOptions


def _index_tables(args, index: dict) -> list[dict]:
    """The tables `args` names (or --all), as index entries; same errors as `_tables`."""
    by_id = {t["id"]: t for t in index["tables"]}
    if getattr(args, "all", False):
        kept = [t for t in index["tables"] if t["id"] in index["runs"]]
        say_skipped([t["id"] for t in index["tables"] if t["id"] not in index["runs"]], args.profile)
        return kept
    if not args.table:
        raise SemclError(NAME_A_TABLE)
    for name in args.table:
        if name not in by_id:
            from semcl.registry.tables import unknown_table

            raise unknown_table(name, by_id)
        if name not in index["runs"]:
            raise ConfigError(f"{name}: no profile {args.profile!r} (profiles: {', '.join(by_id[name]['profiles'])})")
    return [by_id[name] for name in args.table]


def _run_line(run_id: str, label: str, width: int, seed: int, status: str, cost: str, deps, detail: str) -> str:
    """One run of `semcl plan`: id, row, seed, status, cost, the runs it waits for, the detail (-v)."""
    after = f"  after {','.join(deps)}" if deps else ""
    extra = f"  {detail}" if detail else ""
    return f"{run_id}  {label:<{width}} seed={seed:<4} {status:<8} {cost:>12}{after}{extra}"


def cmd_plan(args) -> None:
    be = backend(args.executor)
    if be.previews_layout and args.format == "text":  # the job layout needs the resolved runs and resources
        return _plan_with_layout(args, be)
    from semcl.registry.index import load_index

    if args.set or args.row or args.seeds:  # variants, row selections and seeds: not in the cached index
        from semcl.registry.variant_rows import plan_index

        index = plan_index(tables_named(args), args.profile)
        tables = index["tables"]
    else:
        index = load_index(args.profile)
        tables = _index_tables(args, index)
    if args.format == "json":
        from semcl.cli.format import dump, plan_json

        return dump(plan_json(index, tables, args.profile, results_folders(args).runs, lambda: open_store(args)))
    runs_dir, store = results_folders(args).runs, None
    unit = "GPU-h" if args.profile == "paper" else "CPU-min"
    trained = _trained_keys(results_root(args))
    overall = _Bill(trained)  # a run two tables share counts once; a training two runs share is paid once
    for table in tables:
        runs = index["runs"][table["id"]]
        width = max([24, *(len(r[1]) for r in runs)])  # long labels (variants: "<row> [key=value]") stay aligned
        print(f"# {table['id']} profile={args.profile}: {len(runs)} runs")
        bill, held = _Bill(trained), set()
        for run_id, label, seed, cost, deps, gpus, train_key, eval_cost in runs:
            held.add(gpus)
            if not (runs_dir / run_id).exists():  # never started: no record, lock or checkpoint to read
                status, detail = "missing", ""
            else:
                store = store or open_store(args)
                status, detail = store.status(run_id)
            bill.add(run_id, train_key, cost, eval_cost, status == "done")
            trainer = overall.add(run_id, train_key, cost, eval_cost, status == "done", gpus)
            shared = f"  evaluates {trainer}'s training" if trainer else ""
            print(_run_line(run_id, label, width, seed, status, cost, deps, detail if args.verbose else "") + shared)
        if table["not_implemented"]:
            print(f"# not implemented (not planned): {', '.join(table['not_implemented'])}")
        if table.get("learners"):
            print(f"# {len(table['learners'])} rows learn from the authors' checkpoints (e.g. {table['learners'][0]!r}): "
                  f"planned with the files, `semcl verify {table['id']} --weights DIR --students`")
        for label, cost in (index.get("released") or {}).get(table["id"], []):  # not in the totals: optional
            print(f"# released (the authors' checkpoint; evaluation only, 1 GPU, `semcl verify`): {label}: {cost}")
        for line in selects_lines(table.get("selects") or {}, {t["id"] for t in tables}, "plan", args.profile):
            print(line)
        if held - {0}:  # the estimate counts every GPU a run's job holds
            print(f"# {table['id']} GPUs held per run: {'/'.join(str(g) for g in sorted(held))}")
        print(f"# {table['id']} total: {bill.runs} runs, {bill.all:.4g} {unit}; not done: {bill.todo} runs, "
              f"{bill.left:.4g} {unit}" + bill.saved_line(unit))
    if len(tables) > 1:
        print(f"# all {len(tables)} tables: {overall.runs} runs, {overall.all:.4g} {unit}; not done: {overall.todo} runs, "
              f"{overall.left:.4g} {unit}; widest run holds {overall.peak} GPUs (estimates: semcl.estimate)"
              + overall.saved_line(unit))


def selects_lines(selects: dict[str, str], shown: set[str], command: str, profile: str) -> list[str]:
    """The rows that show another table's best row, and the one command that plans or runs those tables' runs
    (nothing when they are among the tables already named)."""
    others = sorted(set(selects.values()) - shown)
    if not others:
        return []
    rows = ", ".join(repr(label) for label, t in selects.items() if t in others)
    return [f"# rows {rows} show the best row of {', '.join(others)}; their runs: "
            f"semcl {command} {' '.join(others)} --profile {profile}"]


def _trained_keys(root) -> dict[str, str]:
    """Training key -> the run of the store that holds its training (results/trained/<key>.json, semcl.store);
    an unreadable claim is left out (the plan then bills that training in full, the run re-claims it)."""
    from semcl.store import ResultsRoot

    try:
        names = [name for name in os.listdir(ResultsRoot(root).trainings) if name.endswith(".json")]
    except OSError:
        return {}
    owners = {}
    for name in names:
        try:
            doc = json.loads((ResultsRoot(root).trainings / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("run_id"), str):
            owners[name[:-5]] = doc["run_id"]
    return owners


class _Bill:
    """What a set of planned runs costs: each run once, each training once (the first run of a training key pays
    training and evaluation, the others their evaluation alone; a key trained in the store, evaluation alone)."""

    def __init__(self, trained: dict[str, str] | None = None) -> None:
        self.seen, self.trainers = set(), dict(trained or {})
        self.runs = self.todo = self.peak = self.shared = 0
        self.all = self.left = self.saved = 0.0

    def add(self, run_id: str, train_key: str, cost: str, eval_cost: str, done: bool, gpus: int = 0) -> str | None:
        """Count the run; returns the run whose training it evaluates (None: its own)."""
        if run_id in self.seen:
            return self.trainers.get(train_key) if self.trainers.get(train_key) != run_id else None
        self.seen.add(run_id)
        full, alone = float(cost.split()[0]), float(eval_cost.split()[0])
        trainer = self.trainers.setdefault(train_key, run_id)  # the store's claim, else the first run planned
        pays = full if trainer == run_id else min(alone, full)
        if pays < full:
            self.shared, self.saved = self.shared + 1, self.saved + full - pays
        self.runs, self.all, self.peak = self.runs + 1, self.all + pays, max(self.peak, gpus)
        if not done:
            self.todo, self.left = self.todo + 1, self.left + pays
        return trainer if trainer != run_id else None

    def saved_line(self, unit: str) -> str:
        return (f"; {self.shared} runs evaluate a training planned or done once (same training key): "
                f"{self.saved:.4g} {unit} saved") if self.shared else ""


def _plan_with_layout(args, be) -> None:
    """`plan` through a backend that previews its job layout: the run lines, then what it would submit."""
    from semcl.estimate.cost import estimate_cost
    from semcl.registry.plan import plan_runs

    store = open_store(args)
    for table in tables_named(args):
        runs = plan_runs(table, args.profile)
        width = max([24, *(len(r.row_label) for r in runs)])
        print(f"# {table.id} profile={args.profile}: {len(runs)} runs")
        for run in runs:
            status, detail = store.status(run.run_id)
            cost = estimate_cost(run.config, args.profile, table.resources_for(run.row_label, args.profile).gpus)
            print(_run_line(run.run_id, run.row_label, width, run.seed, status, cost, run.depends_on,
                            detail if args.verbose else ""))
        print(be.preview([(r, table.resources_for(r.row_label, args.profile)) for r in runs], store, args.cluster))
        skipped = [r.label for r in table.rows if not r.implemented]
        if skipped:
            print(f"# not implemented (not planned): {', '.join(skipped)}")


def cmd_status(args) -> None:
    from semcl.report.older_configs import status_lines

    store = open_store(args)
    if args.watch:
        _watch(args, store)
    rows = _statuses(args, store)
    shown: dict[str, list] = {}
    for t, run, _, _ in rows:
        shown.setdefault(t.id, []).append(run)
    # finished runs no plan reaches (older configs, variants) are named under each table, never reused
    extra = status_lines(store, shown, args.profile, subset=bool(args.set or args.row), verbose=args.verbose)
    for table_id in shown:
        print(f"# {table_id} profile={args.profile}")
        counts: dict[str, int] = {}
        mine = [(run, status, detail) for t, run, status, detail in rows if t.id == table_id]
        width = max([24, *(len(run.row_label) for run, _, _ in mine)])  # variant labels are long
        for run, status, detail in mine:
            counts[status] = counts.get(status, 0) + 1
            if status != "done" or args.verbose:
                print(f"{run.run_id}  {run.row_label:<{width}} seed={run.seed:<4} {status:<8} {detail}")
        print("# " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        for line in extra[table_id]:
            print(line)


def _runs_with_resources(args, tables: list) -> list:
    if args.row and not args.set:  # a misspelt label would select nothing and report "0 runs to submit"
        for label in args.row:
            if not any(label in (r.label for r in t.rows) for t in tables):
                listing = "; ".join(f"{t.id}: {', '.join(repr(r.label) for r in t.rows)}" for t in tables)
                raise ConfigError(f"unknown row {label!r} (rows of {listing})")
    from semcl.registry.plan import plan_runs

    return [(r, t.resources_for(r.row_label, args.profile)) for t in tables
            for r in plan_runs(t, args.profile, None if args.set else args.row)]  # --set: the tables hold the variants


def cmd_run(args) -> None:
    from semcl.launch.backends import check_data_root
    from semcl.runtime.tracking import check_backends

    check_backends()  # $SEMCL_TRACKING: a typo or a missing package is one line before anything is written
    be, store = backend(args.executor), open_store(args)
    if args.progress:  # read by each run's training loop (semcl.runtime.progress), inherited by local jobs
        os.environ["SEMCL_PROGRESS"] = "1"
    named = tables_named(args)
    pairs = _runs_with_resources(args, named)
    runs = [r for r, _ in pairs]
    if be.needs_preflight and not args.no_check:  # before anything is checked or written
        from semcl.preflight.check import distinct_runs
        from semcl.preflight.report import require_passed

        for table in named:
            why = require_passed(preflight_file(args), table, {r.run_id for r in distinct_runs(table, args.profile)})
            if why:
                raise SemclError(f"refusing to submit: {why}")
    root = data_root(args)
    options = LaunchOptions(data_root=root, retry_failed=args.retry_failed, workers=args.workers,
                            cluster=args.cluster, allow_cpu=args.allow_cpu)
    be.check(pairs, store, options)
    check_data_root(runs, root)
    be.submit(pairs, store, options)
    for table in named:  # rows that show another table's best row have no runs here: name the command that has
        selects = {r.label: r.select.table for r in table.rows if r.select}
        for line in selects_lines(selects, {t.id for t in named}, "run", args.profile):
            print(line.replace("# ", "semcl: ", 1), file=sys.stderr)


def _statuses(args, store):
    """(table, run, status, detail) for every planned run, reattaching to jobs a backend submitted earlier."""
    from semcl.launch.backends import run_states
    from semcl.registry.plan import plan_runs

    tables = tables_named(args)
    runs = [(t, r) for t in tables for r in plan_runs(t, args.profile)]
    return [(t, r, *state) for (t, r), state in zip(runs, run_states(store, [r for _, r in runs]), strict=True)]


def _watch(args, store, timeout: float | None = None) -> dict[str, str]:
    """The live lines of the planned runs (semcl.launch.live) until none is queued or running (or `timeout`
    seconds); the states read at every --poll, the progress files every second. Ctrl-C ends the watch."""
    from semcl.launch.backends import run_states
    from semcl.launch.live import LiveView, follow
    from semcl.registry.plan import plan_runs

    runs = list({r.run_id: r for t in tables_named(args) for r in plan_runs(t, args.profile)}.values())

    def states() -> dict[str, str]:
        return {r.run_id: state for r, (state, _) in zip(runs, run_states(store, runs), strict=True)}

    with LiveView(runs, store) as view:
        try:
            return follow(view, states, args.poll, timeout=timeout)
        except KeyboardInterrupt:
            return {}


def cmd_wait(args) -> None:
    import time

    store = open_store(args)
    t0 = time.time()
    _watch(args, store, args.timeout)
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
    raise SemclError(f"interrupted with {len(active)} run(s) still queued or running")


def add_parser(sub) -> None:
    for name, func, hlp in (("plan", cmd_plan, "one line per run: id, row, seed, status, cost"),
                            ("status", cmd_status, "done / pending / running / requeued / failed / missing per run"),
                            ("wait", cmd_wait, "block until no run of these tables is queued or running")):
        sp = sub.add_parser(name, help=hlp)
        add_tables(sp, "every table in the registry")
        sp.add_argument("-v", "--verbose", action="store_true", help="also the detail of each run (error, lock owner)")
        add_profile(sp)
        if name == "plan":
            sp.add_argument("--executor", choices=sorted(BACKENDS), default=DEFAULT_EXECUTOR,
                            help="a backend that previews its job layout (slurm: the arrays and sbatch scripts) "
                                 "shows it under the runs")
            sp.add_argument("--cluster", default=DEFAULT_CLUSTER, help="cluster profile slurm/profiles/<name>.yaml")
            add_set(sp, "only this row label and the rows it builds on (repeatable)")
            add_json(sp)
        else:  # the runs of variants (and of some rows) are followed as `plan` lists them
            add_set(sp, "only this row label and the rows it builds on (repeatable); with --set: the rows it varies")
        if name == "wait":
            sp.add_argument("--timeout", type=positive_float, default=None, help="give up after this many seconds")
        if name == "status":
            sp.add_argument("--watch", action="store_true",
                            help="one live line per running run (epoch k/N, loss, it/s, ETA), refreshed until no run "
                                 "is queued or running (Ctrl-C ends it); then the status")
        if name != "plan":
            sp.add_argument("--poll", type=positive_float, default=10.0 if name == "wait" else 5.0,
                            help=f"seconds between status checks (default {10 if name == 'wait' else 5}); "
                                 "the progress lines refresh every second")
        sp.set_defaults(func=func)
    sp = sub.add_parser("run", help="submit the missing runs of one or more tables")
    add_tables(sp)
    add_profile(sp)
    sp.add_argument("--executor", choices=sorted(BACKENDS), default=DEFAULT_EXECUTOR,
                    help="local: processes on this machine (default); debug: inside this process (submitit debug), "
                         "tracebacks shown; slurm: job arrays on a cluster (after `semcl check`)")
    sp.add_argument("--cluster", default=DEFAULT_CLUSTER, help="cluster profile for --executor slurm (slurm/profiles/)")
    sp.add_argument("--workers", type=positive_int, default=None,
                    help="local executor: parallel processes (default: CPU count, at most 4)")
    sp.add_argument("--row", action="append", help="only this row label (repeatable)")
    add_set(sp, None)
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--retry-failed", action="store_true", help="also resubmit runs that failed")
    sp.add_argument("--allow-cpu", action="store_true",
                    help="local executors: train rows that ask for a GPU on a machine without CUDA (refused otherwise)")
    sp.add_argument("--no-check", action="store_true",
                    help="--executor slurm: submit even without a passed `semcl check` of the table")
    sp.add_argument("--progress", action="store_true",
                    help="a step-level progress line (epoch, step, loss, it/s) even where stderr is not a terminal "
                         "(local jobs: in their stderr logs); sets $SEMCL_PROGRESS=1")
    sp.set_defaults(func=cmd_run)
