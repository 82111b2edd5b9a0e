"""`semcl data check`: every dataset some tables need at a profile, checked under the data root in one
report (semcl.data.check_report); exit 2 when any is missing or incomplete."""

from __future__ import annotations

import os
from pathlib import Path


def cmd_data_check(args) -> None:
    from semcl.cli.args import tables_named as _tables
    from semcl.data.check_report import check_all, failure, needed_datasets, render
    from semcl.runs import plan_runs

    runs = [r for t in _tables(args) for r in plan_runs(t, args.profile)]
    root = Path(args.data_root or os.environ.get("SEMCL_DATA", "data"))
    need = needed_datasets(runs)
    checks = check_all(need, root, checksums=not args.no_checksums)
    print(render(checks, need, root, args.profile), end="")
    err = failure(checks, root)
    if err is not None:
        raise err


def add_parser(sub, with_profile) -> None:
    sp = sub.add_parser("data", help="check the datasets tables need under the data root")
    data = sp.add_subparsers(dest="data_command", required=True)
    sp = data.add_parser("check", help="every dataset the tables read at a profile: the layout expected and "
                                       "present / missing / incomplete (exit 2 unless all are present)")
    sp.add_argument("table", nargs="*", help="table ids, e.g. rince/tab2")
    sp.add_argument("--all", action="store_true", help="every table in the registry that has the profile")
    with_profile(sp)
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--no-checksums", action="store_true", help="skip the md5 of files whose official md5 is known")
    sp.set_defaults(func=cmd_data_check)
