"""`semcl results import | list | remove`: results of runs made by another tool (the user's MMSegmentation runs of
the configs semcl exports, detectron2 transfer logs), kept under <results>/imports/ apart from semcl's runs and from
the paper-numbers overlay (semcl.report.imported)."""

from __future__ import annotations

import sys
from pathlib import Path


def _profile(p) -> None:
    from semcl.cli.args import PROFILE_NAMES

    p.add_argument("--profile", choices=PROFILE_NAMES, default="paper",
                   help="the profile the results belong to (default paper: the configs semcl exports run at paper "
                        "scale)")


def cmd_import(args) -> None:
    from semcl.cli.args import get_table, open_store, with_seeds
    from semcl.report.import_check import commit, run_measured, stage

    store = open_store(args)
    path = Path(args.file)
    tables = lambda table_id: with_seeds(args, get_table(table_id))  # noqa: E731 (--seeds: a one-seed table's others)
    staged = stage(path, tables, args.profile, store.root, run_measured(store, args.profile),
                   replace=args.replace)  # every line checked before anything is written
    for line in commit(staged, store.root):
        print(line)
    print(f"({len(staged)} result(s) from {path} written under {store.root / 'imports'})", file=sys.stderr)


def cmd_list(args) -> None:
    from semcl.cli.args import open_store
    from semcl.report.imported import load_imported

    store = open_store(args)
    recs = load_imported(store.root, args.table, args.profile)
    for r in recs:
        print(f"{r.table}  {r.profile}  {r.row!r}  {r.column}  seed {r.seed}  {r.value:g}  source: {r.source}  "
              f"(from {r.file}, sha256 {r.sha256[:12]}, {r.imported_at})")
    print(f"({len(recs)} imported result(s) in {store.root / 'imports'})", file=sys.stderr)


def cmd_remove(args) -> None:
    from semcl.cli.args import get_table, open_store
    from semcl.errors import ConfigError
    from semcl.report.imported import record_path, set_aside
    from semcl.report.user_numbers import checked

    store = open_store(args)
    column = checked(get_table(args.table), args.row, args.column, "semcl results remove")
    path = record_path(store.root, (args.table, args.row, column, args.seed, args.profile))
    if not path.exists():
        raise ConfigError(f"{path}: no imported result for {args.table} row {args.row!r} column {column!r} "
                          f"seed {args.seed} ({args.profile})")
    to = set_aside(path)
    print(f"removed: {args.table} row {args.row!r} column {column!r} seed {args.seed} ({args.profile}); "
          f"the record is kept as {to}")


def add_parser(sub) -> None:
    from semcl.cli.args import add_seeds

    sp = sub.add_parser("results", help="results of runs made by another tool (mmseg, detectron2): imported from a "
                                        "CSV, kept apart from semcl's runs, marked as imported in every table")
    cmds = sp.add_subparsers(dest="results_command", required=True)
    p = cmds.add_parser("import", help="import a CSV with columns table,row,column,seed,value,source (all lines or "
                                       "none)")
    p.add_argument("file", help="CSV file, one line per (table, row, column, seed)")
    p.add_argument("--replace", action="store_true", help="take cells imported before (the old records are set "
                                                          "aside, never deleted)")
    _profile(p)
    add_seeds(p)
    p.set_defaults(func=cmd_import)
    p = cmds.add_parser("list", help="the imported results, with their source file and its sha256")
    p.add_argument("table", nargs="?", default=None, help="only this table's")
    p.add_argument("--profile", default=None, help="only this profile's")
    p.set_defaults(func=cmd_list)
    p = cmds.add_parser("remove", help="set one imported result aside (renamed, never deleted)")
    p.add_argument("table", help="table id, e.g. gpaco/seg")
    p.add_argument("--row", required=True, help="row label (see `semcl show <table>`)")
    p.add_argument("--column", required=True, help="column key or label")
    p.add_argument("--seed", type=int, required=True, help="the seed of the imported value")
    _profile(p)
    p.set_defaults(func=cmd_remove)
