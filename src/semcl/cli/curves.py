"""`semcl curves <table> --profile P [--rows REGEX] [--metric loss] [--set KEY=VALUE] [--out DIR]`: the rows'
training curves (semcl.report.curves) as PNG + CSV, drawn from the runs' live history.jsonl, finished or not;
with --set, each varied row beside its variants (their files in a folder of their own, as `table --set`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def cmd_curves(args) -> None:
    from semcl.cli.args import against_of, get_table
    from semcl.report.curves import write_curves
    from semcl.store import Store

    store = Store(Path(args.results) if args.results else None)
    out = Path(args.out) if args.out else store.folders.curves()
    table, options, origins = get_table(args.table), "", against_of(args)
    if args.set:
        from semcl.registry.variant_rows import slug, table_view
        from semcl.store.root import VARIANTS

        table = table_view(table, args.set, None, args.profile)
        out, options = out / VARIANTS / slug(args.set), "".join(f" --set {shlex.quote(s)}" for s in args.set)
    if origins:  # beside the default files, never over them
        from semcl.report.origins import slug as against_slug

        out = out / against_slug(origins)
    official = None
    if args.official_log:  # the authors' training log, drawn beside ours (semcl.report.official_logs)
        from semcl.report.official_logs import parse_log

        fmt, log = parse_log(Path(args.official_log), args.official_log_format)
        official = (fmt, log, args.official_log)
    data, png = write_curves(table, args.profile, store, out, rows=args.rows, metric=args.metric, options=options,
                             origins=origins, official=official)
    keys = ["origin", "row"] if origins else "row"
    if official is not None:  # epoch by epoch, ours beside the authors' (rows as columns)
        wide = data.pivot_table(index="epoch", columns=keys, values="mean", sort=False)
        print(wide.to_string(float_format=lambda v: f"{v:.4f}", na_rep="—"))
    last = data.sort_values("epoch").groupby(keys, sort=False).tail(1)
    print(last.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    for key, part in data[data["nonfinite"] > 0].groupby(keys, sort=False):
        first = part.iloc[0]
        row = f"{key[1]} [{key[0]}]" if origins else key
        print(f"semcl: {row}: {int(part['nonfinite'].max())} seed(s) with a NaN or inf {args.metric}, first at epoch "
              f"{int(first['epoch'])}; the curve averages the finite seeds (n)", file=sys.stderr)
    print(f"(written to {png} and {png.with_suffix('.csv')})", file=sys.stderr)


def add_parser(sub) -> None:
    from semcl.cli.args import add_against, add_profile, add_set

    sp = sub.add_parser("curves", help="training curves of a table's rows (mean and min-max band over seeds): PNG + CSV")
    sp.add_argument("table", help="table id, e.g. rince/tab2")
    add_profile(sp)
    sp.add_argument("--rows", help="only rows whose label matches this regular expression")
    sp.add_argument("--metric", default="loss", help="history key to plot (default: loss; also lr, seconds)")
    sp.add_argument("--out", help="folder for the PNG and CSV (default: <results>/curves; with --set: "
                                  "<results>/curves/variants/<settings>/; with --against: its against-<names>/)")
    sp.add_argument("--official-log", help="the authors' training log (as their script printed it), drawn beside ours "
                                           "epoch by epoch (docs/verify.md)")
    from semcl.report.official_logs import FORMATS

    sp.add_argument("--official-log-format", choices=sorted(FORMATS),
                    help="the log's format (default: detected from its lines)")
    add_set(sp, None)
    add_against(sp)
    sp.set_defaults(func=cmd_curves)
