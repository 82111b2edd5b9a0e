"""`semcl numbers add | import | list | remove`: the user's own paper numbers (semcl.report.user_numbers), and the
--numbers option with which `show`, `table`, `report` and `claims` read them."""

from __future__ import annotations

import sys
from pathlib import Path

NUMBERS_HELP = "the user's paper numbers (default: $SEMCL_NUMBERS, else <results>/numbers.yaml)"


def overlay(args):
    """The Overlay that --numbers / $SEMCL_NUMBERS / <results>/numbers.yaml names."""
    from semcl.cli.args import results_root as _results_root
    from semcl.report.user_numbers import Overlay, overlay_path

    return Overlay(overlay_path(getattr(args, "numbers", None), _results_root(args)))


def say_warnings(ov) -> None:
    for line in ov.warnings:
        print(f"semcl: {line}", file=sys.stderr)


def overlaid(args, table):
    """`table` with the user's numbers; a number it cannot show is one stderr line."""
    ov = overlay(args)
    out = ov.apply(table)
    say_warnings(ov)
    return out


def _table(table_id: str):
    from semcl.cli.args import get_table

    return get_table(table_id)


def cmd_add(args) -> None:
    from semcl.report.user_numbers import UserNumber, merge, save_numbers

    ov = overlay(args)
    std = args.std
    if std is not None and std < 0:
        from semcl.errors import ConfigError

        raise ConfigError(f"--std {std:g} is negative")
    new = UserNumber(args.table, args.row, args.column, args.value, std, args.source)
    for line in merge(ov.numbers, [new], _table, args.force, "semcl numbers add"):
        print(line)
    save_numbers(ov.path, ov.numbers)
    print(f"(written to {ov.path})", file=sys.stderr)


def cmd_import(args) -> None:
    from semcl.report.numbers_csv import read_csv
    from semcl.report.user_numbers import merge, save_numbers

    ov = overlay(args)
    path = Path(args.file)
    lines = merge(ov.numbers, read_csv(path), _table, args.force, str(path))  # all lines checked before writing
    if lines:  # a template with every cell still blank writes nothing
        save_numbers(ov.path, ov.numbers)
    for line in lines:
        print(line)
    print(f"({len(lines)} number(s) from {path} written to {ov.path}; blank cells skipped)" if lines else
          f"({path}: every cell blank; nothing written)", file=sys.stderr)


def cmd_template(args) -> None:
    from semcl.report.numbers_csv import write_template

    cells = write_template(_table(args.table), sys.stdout)
    print(f"({cells} cell(s) of {args.table} without a registry number; fill value, std and source, then "
          "`semcl numbers import FILE`: blank lines are skipped)", file=sys.stderr)


def cmd_list(args) -> None:
    from semcl.errors import ConfigError
    from semcl.report.user_numbers import registry_value

    ov = overlay(args)
    shown = [n for n in ov.numbers if args.table is None or n.table == args.table]
    if args.table is not None:
        _table(args.table)  # an unknown table is an error, not an empty list
    for n in shown:
        try:
            reg = registry_value(_table(n.table), n)
            state = ("" if reg is None else f"  [overrides the registry's {reg.value:g} {reg.provenance}]" if n.override
                     else f"  [NOT SHOWN: the registry has {reg.value:g} {reg.provenance}; add --force to override]")
        except ConfigError as err:
            state = f"  [NOT SHOWN: {err}]"
        std = f" ± {n.std:g}" if n.std is not None else ""
        print(f"{n.table}  {n.row!r}  {n.column}  {n.value:g}{std}  source: {n.source}{state}")
    print(f"({len(shown)} user-supplied number(s) in {ov.path})", file=sys.stderr)


def cmd_remove(args) -> None:
    from semcl.errors import ConfigError
    from semcl.report.user_numbers import checked, save_numbers

    ov = overlay(args)
    table = _table(args.table)
    column = checked(table, args.row, args.column, "semcl numbers remove")
    kept = [n for n in ov.numbers if n.cell != (args.table, args.row, column)]
    if len(kept) == len(ov.numbers):
        raise ConfigError(f"{ov.path}: no user number for {args.table} row {args.row!r} column {column!r}")
    save_numbers(ov.path, kept)
    print(f"removed: {args.table} row {args.row!r} column {column!r} (from {ov.path})")


def add_numbers_option(sp) -> None:
    sp.add_argument("--numbers", metavar="PATH", help=NUMBERS_HELP)


def add_parser(sub) -> None:
    sp = sub.add_parser("numbers", help="your own paper numbers: an overlay shown as user-supplied in show, table, "
                                        "report and claims (never in the registry or a run id)")
    cmds = sp.add_subparsers(dest="numbers_command", required=True)

    def cell(p, what: str) -> None:
        p.add_argument("table", help="table id, e.g. rince/tab2")
        p.add_argument("--row", required=True, help=f"row label of the cell {what} (see `semcl show <table>`)")
        p.add_argument("--column", required=True, help="column key or label (see `semcl show <table>`)")
        add_numbers_option(p)

    p = cmds.add_parser("add", help="add (or replace) one paper value")
    cell(p, "to fill")
    p.add_argument("--value", type=float, required=True, help="the paper's number, in the column's unit")
    p.add_argument("--std", type=float, default=None, help="the paper's spread, when it gives one")
    p.add_argument("--source", required=True, help='where it is printed, e.g. "RINCE paper, Table 2, p. 6"')
    p.add_argument("--force", action="store_true", help="override a value the registry already has")
    p.set_defaults(func=cmd_add)
    p = cmds.add_parser("import", help="add the numbers of a CSV file with columns table,row,column,value,std,source")
    p.add_argument("file", help="CSV file (std may be empty)")
    p.add_argument("--force", action="store_true", help="override values the registry already has")
    add_numbers_option(p)
    p.set_defaults(func=cmd_import)
    p = cmds.add_parser("template", help="print a CSV of every cell of a table the registry has no number for, "
                                         "value/std/source empty, for `semcl numbers import`")
    p.add_argument("table", help="table id, e.g. rince/tab2")
    p.set_defaults(func=cmd_template)
    p = cmds.add_parser("list", help="the user's numbers, with the registry value each overrides")
    p.add_argument("table", nargs="?", default=None, help="only this table's")
    add_numbers_option(p)
    p.set_defaults(func=cmd_list)
    p = cmds.add_parser("remove", help="remove one user number")
    cell(p, "to clear")
    p.set_defaults(func=cmd_remove)
