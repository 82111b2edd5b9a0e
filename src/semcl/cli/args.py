"""How the CLI modules turn arguments into objects (the results root, the store, the data root, the tables a
command names with --all, --row and --set) and the options several commands share (--profile, --set, --format).
Shared by semcl.cli.main and every command module, so that none of them imports main back."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from semcl.errors import ConfigError, SemclError
from semcl.locations import results_root as default_results_root

NAME_A_TABLE = "name a table (e.g. rince/tab2) or pass --all"


def results_root(args) -> Path:
    """--results, else $SEMCL_RESULTS, else ./results (semcl.locations.results_root)."""
    return Path(args.results) if args.results else default_results_root()


def results_folders(args):
    """The folders under the results root (semcl.store.ResultsRoot)."""
    from semcl.store.root import ResultsRoot

    return ResultsRoot(results_root(args))


PROFILE_NAMES = ("paper", "mini", "smoke")  # = semcl.registry.tables.PROFILE_NAMES (tests/e2e/test_first_hour.py)


def open_store(args):
    from semcl.store import Store

    return Store(Path(args.results) if args.results else None)


def data_root(args) -> Path:
    """--data-root, else $SEMCL_DATA, else ./data (every command that reads datasets)."""
    return Path(getattr(args, "data_root", None) or os.environ.get("SEMCL_DATA", "data"))


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


def add_profile(sp, default="paper") -> None:
    sp.add_argument("--profile", choices=PROFILE_NAMES, default=default,
                    help=f"paper (the paper's scale), mini (real small data, CPU minutes) or smoke "
                         f"(synthetic data, seconds); default: {default}")


def add_set(sp, rows: str | None, seeds: bool = True) -> None:
    sp.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="a variant: this config key (dotted, as rows' overrides, e.g. optim.lr=0.1; value as YAML) "
                         "on the selected rows, after every registry layer; own run ids, labelled "
                         "'<row> [KEY=VALUE]' (repeatable). A sweep: KEY=A,B,C (or the key repeated) makes one "
                         "variant per value, two swept keys their grid; only commas outside [...], {...} and quotes "
                         "split, so probe.milestones=[30,60] is one value (a string with a comma: KEY='\"a,b\"')")
    if rows:
        sp.add_argument("--row", action="append", help=rows)
    if seeds:
        add_seeds(sp)


def add_seeds(sp) -> None:
    sp.add_argument("--seeds", metavar="N|A,B,..", help="the seeds the runs use: a count (the table's own seeds first, "
                                                       "then 123, 546, 937, 1, 2, ...) or a list; which runs exist, "
                                                       "nothing else (a seed's run keeps its id)")


def seeds_of(args):
    """--seeds parsed (a count or a list), None when not given."""
    text = getattr(args, "seeds", None)
    if not text:
        return None
    from semcl.registry.seeds import parse_seeds

    return parse_seeds(text)


def with_seeds(args, table):
    """`table` with --seeds applied to the profile (unchanged without --seeds)."""
    wanted = seeds_of(args)
    if wanted is None:
        return table
    from semcl.registry.seeds import with_seeds as apply

    return apply(table, args.profile, wanted)


def add_teachers(sp) -> None:
    from semcl.registry.released_teachers import TEACHERS

    sp.add_argument("--teachers", choices=TEACHERS, default="trained",
                    help="released: every row taught by a teacher the authors released (the CRD teachers) learns "
                         "from the authors' file where it is verified (semcl verify), its sha256 in the run ids; "
                         "the others keep the teacher trained here; the notes say which (default: trained, the "
                         "registered rows)")


def add_against(sp) -> None:
    sp.add_argument("--against", action="append", metavar="[NAME=]PATH",
                    help="another lab's results root (a folder with runs/) or bundle (semcl publish; its SHA256SUMS "
                         "checked first), read only, beside yours under NAME (default: the folder's name); repeatable")


def against_of(args) -> list:
    """--against opened (semcl.report.origins), [] without it."""
    if not getattr(args, "against", None):
        return []
    from semcl.report.origins import open_origins

    return open_origins(args.against, results_root(args))


def add_json(sp) -> None:
    sp.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json (for scripts)")


def add_tables(sp, every: str = "every table in the registry that has the profile") -> None:
    sp.add_argument("table", nargs="*", help="table ids, e.g. rince/tab2")
    sp.add_argument("--all", action="store_true", help=every)


def get_table(table_id: str):
    from semcl.registry.tables import get_table as get

    return get(table_id)


def load_registry():
    from semcl.registry.tables import load_registry as load

    return load()


def having_profile(tables: list, profile: str) -> list:
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
        return selected(args, having_profile(list(load_registry().values()), args.profile))
    if not args.table:
        raise SemclError(NAME_A_TABLE)
    return selected(args, [get_table(t) for t in args.table])


def selected(args, tables: list) -> list:
    """--set: the tables' variant rows instead of their registered ones; --row: only those rows (semcl.registry.variant_rows)."""
    if args.command == "check" and args.row and not args.set:
        raise ConfigError("--row selects the rows --set varies in `semcl check`; add --set key=value")
    tables = [with_seeds(args, t) for t in tables]
    if not getattr(args, "set", None) and not (args.command in ("plan", "status", "wait") and args.row):
        return tables
    from semcl.registry.variant_rows import variant_tables

    return variant_tables(tables, args.set, args.row, args.profile)
