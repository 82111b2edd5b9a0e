"""The authors' released checkpoints (semcl.engine.released):

  semcl weights check <table> <row> <file>   load the file into the row's network; print what loaded (or one line
                                              naming the first offending keys) and the file's sha256
  semcl verify <paper|table> --weights DIR    evaluate every released checkpoint found in DIR with its row's own
                                              evaluations, locally or on SLURM (one GPU each), as runs keyed by the
                                              file's sha256; `semcl table` then shows them as their own rows; with
                                              --students, also the rows that learn from them (KD from the authors'
                                              teachers)
"""

from __future__ import annotations

import sys
from pathlib import Path

from semcl.errors import ConfigError


def cmd_weights_check(args) -> None:
    from semcl.engine.released import load_released_summary

    method, loaded, net = load_released_summary(args.table, args.row, Path(args.file), args.profile)
    print(f"{args.file}: loaded into {args.row!r} of {args.table} (the network of {net!r}, profile {args.profile})")
    print(f"  {loaded.tensors} tensors, {loaded.parameters:,} float values")
    if loaded.dropped:
        print(f"  dropped by the layout ({len(loaded.dropped)}): {', '.join(loaded.dropped[:4])}"
              + (" ..." if len(loaded.dropped) > 4 else ""))
    if loaded.kept:
        print(f"  semcl's own, not in the file: {', '.join(loaded.kept)}")
    print(f"  sha256 {loaded.sha256}")


def _tables(name: str) -> list:
    from semcl.cli.args import load_registry
    from semcl.registry.tables import unknown_table

    tables = load_registry()
    if name in tables:
        return [tables[name]]
    mine = [t for t in tables.values() if t.paper == name]
    if not mine:
        raise unknown_table(name, tables)
    return sorted(mine, key=lambda t: t.id)


def cmd_verify(args) -> None:
    from semcl.cli.args import data_root, open_store
    from semcl.engine.released import find_files, released_run, remember
    from semcl.files import sha256_file
    from semcl.launch.backends import backend, check_data_root
    from semcl.launch.base import LaunchOptions
    from semcl.registry.plan import plan_runs
    from semcl.registry.resources import Resources

    store, folder = open_store(args), Path(args.weights)
    be = backend(args.executor)
    pairs = []
    if args.teachers == "released" and not args.students:
        raise ConfigError("--teachers released picks the students --students trains: add --students")
    for table in _tables(args.what):
        if args.profile not in table.profiles:
            continue
        files = {}
        for row, path, how in find_files(table, folder):
            if path is None:
                print(f"{table.id}: {row.label}: not found ({how})", file=sys.stderr)
                continue
            sha = sha256_file(path)
            run = released_run(table, row, args.profile, path, sha)
            own = table.resources_for(row.released.network, args.profile)
            # evaluation only: one GPU where the row's training holds any, one process
            res = Resources(gpus=min(own.gpus, 1), cpus=own.cpus, mem_gb=own.mem_gb)
            print(f"{table.id}: {row.label}: {path} ({how}; sha256 {sha[:12]}) -> run {run.run_id}")
            pairs.append((run, res))
            files[row.label] = run.released
        if args.students and files:  # the rows learning from these files (KD students of the authors' teachers)
            from semcl.registry.released_teachers import released_twins, with_released_teachers

            if args.teachers == "released" and any(r.teacher in released_twins(table) for r in table.rows):
                table = with_released_teachers(table, files)  # every student of those teachers, not only twins
            learners = [r.label for r in table.rows if set(r.depends_on) & set(files)]
            for run in plan_runs(table, args.profile, learners, released=files):
                if run.released is None:
                    print(f"{table.id}: {run.row_label} seed={run.seed}: learns from {', '.join(run.depends_on)} "
                          f"-> run {run.run_id}")
                    pairs.append((run, table.resources_for(run.row_label, args.profile)))
    if not pairs:
        print(f"no released checkpoint of {args.what} found in {folder}", file=sys.stderr)
        return
    # the file is read, and refused in one line, before anything is submitted
    from semcl.engine.released import check_file

    for run, _ in pairs:
        if run.released is not None:
            check_file(run)
    root = data_root(args)
    options = LaunchOptions(data_root=root, retry_failed=args.retry_failed, workers=args.workers,
                            cluster=args.cluster, allow_cpu=args.allow_cpu)
    runs = [r for r, _ in pairs]
    be.check(pairs, store, options)
    check_data_root(runs, root)
    remember(store, [r for r in runs if r.released is not None])
    be.submit(pairs, store, options)


def add_parser(sub) -> None:
    from semcl.cli.args import add_profile, add_teachers
    from semcl.launch.backends import BACKENDS, DEFAULT_EXECUTOR
    from semcl.launch.base import DEFAULT_CLUSTER

    sp = sub.add_parser("weights", help="the authors' released checkpoints: `weights check <table> <row> <file>`")
    wsub = sp.add_subparsers(dest="weights_command", required=True)
    c = wsub.add_parser("check", help="load an official checkpoint file into a released row's network; print what loaded")
    c.add_argument("table", help="table id, e.g. gpaco/imagenet-lt")
    c.add_argument("row", help="the released row's label (`semcl show <table>` lists them)")
    c.add_argument("file", help="the checkpoint file as the authors released it")
    add_profile(c)
    c.set_defaults(func=cmd_weights_check)

    v = sub.add_parser("verify", help="evaluate the authors' released checkpoints found in --weights with their "
                                      "rows' evaluations (one GPU each), shown as their own rows by `semcl table`")
    v.add_argument("what", help="a paper (e.g. gpaco) or a table id (e.g. gpaco/imagenet-lt)")
    v.add_argument("--weights", required=True, help="folder holding the released files (by the registry's file "
                                                    "names, or found by their sha256)")
    add_profile(v)
    v.add_argument("--executor", choices=sorted(BACKENDS), default=DEFAULT_EXECUTOR,
                   help=f"where the evaluations run (default: {DEFAULT_EXECUTOR})")
    v.add_argument("--cluster", default=DEFAULT_CLUSTER, help="cluster profile for --executor slurm (slurm/profiles/)")
    v.add_argument("--workers", type=int, help="local executor: parallel processes (default: CPU count, at most 4)")
    v.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    v.add_argument("--retry-failed", action="store_true", help="resubmit failed evaluations")
    v.add_argument("--allow-cpu", action="store_true",
                   help="local executors: evaluate rows that ask for a GPU on a machine without CUDA")
    v.add_argument("--students", action="store_true",
                   help="also train the rows that learn from the found files (the KD students of the authors' "
                        "teachers: their run ids and training keys hold the teacher file's sha256)")
    add_teachers(v)
    v.set_defaults(func=cmd_verify)
