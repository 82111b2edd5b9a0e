"""`semcl data check`: every dataset some tables need at a profile, checked under the data root in one
report (semcl.data.check_report); exit 2 when any is missing or incomplete. `semcl prepare-mini`: the mini
profile's real data laid out from installed packages."""

from __future__ import annotations

from semcl.cli.args import add_profile, add_tables, data_root, tables_named


def cmd_data_check(args) -> None:
    from semcl.data.check_report import check_all, failure, needed_datasets, render
    from semcl.registry.plan import plan_runs

    runs = [r for t in tables_named(args) for r in plan_runs(t, args.profile)]
    root = data_root(args)
    need = needed_datasets(runs)
    checks = check_all(need, root, checksums=not args.no_checksums)
    print(render(checks, need, root, args.profile), end="")
    err = failure(checks, root)
    if err is not None:
        raise err


def cmd_prepare(args) -> None:
    from pathlib import Path

    from semcl.data.prepare_mini import prepare_mini

    for line in prepare_mini(data_root(args), video=args.video, fashion_dir=args.fashion_mnist and Path(args.fashion_mnist),
                             mnist_dir=args.mnist and Path(args.mnist)):
        print(line)


def add_parser(sub) -> None:
    sp = sub.add_parser("data", help="check the datasets tables need under the data root")
    data = sp.add_subparsers(dest="data_command", required=True)
    sp = data.add_parser("check", help="every dataset the tables read at a profile: the layout expected and "
                                       "present / missing / incomplete (exit 2 unless all are present)")
    add_tables(sp)
    add_profile(sp)
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--no-checksums", action="store_true", help="skip the md5 of files whose official md5 is known")
    sp.set_defaults(func=cmd_data_check)
    sp = sub.add_parser("prepare-mini", help="lay out Fashion-MNIST and MNIST (installed packages) under the data root")
    sp.add_argument("--data-root", help="datasets folder (default: $SEMCL_DATA or ./data)")
    sp.add_argument("--video", action="store_true",
                    help="also render moving-MNIST clips (rince/tab4 mini; synthetic motion of real digits)")
    for flag, name in (("--fashion-mnist", "Fashion-MNIST"), ("--mnist", "MNIST")):
        sp.add_argument(flag, metavar="DIR", help=f"a folder holding {name}'s four standard IDX files (as published, "
                                                  ".gz, or unpacked) to copy in, instead of the installed package")
    sp.set_defaults(func=cmd_prepare)
