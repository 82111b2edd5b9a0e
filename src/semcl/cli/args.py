"""How the CLI modules turn arguments into objects: the results root, the tables a command names (with
--all, --row and --set), the tables that have a profile. Shared by cli.py and its sub-command modules, so
that none of them imports cli.py back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from semcl.errors import ConfigError, SemclError


def results_root(args) -> Path:
    from_env = os.environ.get("SEMCL_RESULTS", "results")  # = semcl.runs.results_root
    return Path(args.results) if args.results else Path(from_env)


def get_table(table_id: str):
    from semcl.registry.tables import get_table as get

    return get(table_id)


def load_registry():
    from semcl.registry.tables import load_registry as load

    return load()


def with_profile(tables: list, profile: str) -> list:
    """The tables that have `profile`; the others are skipped with one line on stderr."""
    say_skipped([t.id for t in tables if profile not in t.profiles], profile)
    return [t for t in tables if profile in t.profiles]


def say_skipped(ids: list[str], profile: str) -> None:
    """One stderr line naming the tables left out for lacking `profile` (sorted ids)."""
    if ids:
        print(f"semcl: skipped {len(ids)} table(s) without profile '{profile}': {', '.join(sorted(ids))}",
              file=sys.stderr)


def tables_named(args) -> list:
    if getattr(args, "all", False):
        return selected(args, with_profile(list(load_registry().values()), args.profile))
    if not args.table:
        raise SemclError("name a table (e.g. rince/tab2) or pass --all")
    return selected(args, [get_table(t) for t in args.table])


def selected(args, tables: list) -> list:
    """--set: the tables' variant rows instead of their registered ones; --row: only those rows (semcl.registry.variant_rows)."""
    if args.command == "check" and args.row and not args.set:
        raise ConfigError("--row selects the rows --set varies in `semcl check`; add --set key=value")
    if not getattr(args, "set", None) and not (args.command == "plan" and args.row):
        return tables
    from semcl.registry.variant_rows import select_tables

    return select_tables(tables, args.set, args.row, args.profile)
