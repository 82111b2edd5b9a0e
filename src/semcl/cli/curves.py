"""`semcl curves <table> --profile P [--rows REGEX] [--metric loss] [--set KEY=VALUE] [--out DIR]`: the rows'
training curves (semcl.report.curves) as PNG + CSV, drawn from the runs' live history.jsonl, finished or not;
with --set, each varied row beside its variants (their files in a folder of their own, as `table --set`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def cmd_curves(args) -> None:
    from semcl.cli.args import get_table
    from semcl.report.curves import write_curves
    from semcl.runs import Store

    store = Store(Path(args.results) if args.results else None)
    out = Path(args.out) if args.out else store.root / "curves"
    table, options = get_table(args.table), ""
    if args.set:
        from semcl.registry.variant_rows import slug, table_view

        table = table_view(table, args.set, None, args.profile)
        out, options = out / "variants" / slug(args.set), "".join(f" --set {shlex.quote(s)}" for s in args.set)
    official = None
    if args.official_log:  # the authors' training log, drawn beside ours (semcl.report.official_logs)
        from semcl.report.official_logs import parse_log

        fmt, log = parse_log(Path(args.official_log), args.official_log_format)
        official = (fmt, log, args.official_log)
    data, png = write_curves(table, args.profile, store, out, rows=args.rows, metric=args.metric, options=options,
                             official=official)
    if official is not None:  # epoch by epoch, ours beside the authors' (rows as columns)
        wide = data.pivot_table(index="epoch", columns="row", values="mean", sort=False)
        print(wide.to_string(float_format=lambda v: f"{v:.4f}", na_rep="—"))
    last = data.sort_values("epoch").groupby("row", sort=False).tail(1)
    print(last.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    for row, part in data[data["nonfinite"] > 0].groupby("row", sort=False):
        first = part.iloc[0]
        print(f"semcl: {row}: {int(part['nonfinite'].max())} seed(s) with a NaN or inf {args.metric}, first at epoch "
              f"{int(first['epoch'])}; the curve averages the finite seeds (n)", file=sys.stderr)
    print(f"(written to {png} and {png.with_suffix('.csv')})", file=sys.stderr)


def add_parser(sub) -> None:
    from semcl.cli.args import add_profile, add_set

    sp = sub.add_parser("curves", help="training curves of a table's rows (mean and min-max band over seeds): PNG + CSV")
    sp.add_argument("table", help="table id, e.g. rince/tab2")
    add_profile(sp)
    sp.add_argument("--rows", help="only rows whose label matches this regular expression")
    sp.add_argument("--metric", default="loss", help="history key to plot (default: loss; also lr, seconds)")
    sp.add_argument("--out", help="folder for the PNG and CSV (default: <results>/curves; with --set: "
                                  "<results>/curves/variants/<settings>/)")
    sp.add_argument("--official-log", help="the authors' training log (as their script printed it), drawn beside ours "
                                           "epoch by epoch (docs/verify.md)")
    from semcl.report.official_logs import FORMATS

    sp.add_argument("--official-log-format", choices=sorted(FORMATS),
                    help="the log's format (default: detected from its lines)")
    add_set(sp, None)
    sp.set_defaults(func=cmd_curves)
