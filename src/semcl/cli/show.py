"""`semcl list` and `semcl show`: the registry's tables, and one table's rows, columns and files."""

from __future__ import annotations

import os

from semcl.cli.args import add_json, add_profile, get_table, results_folders, say_skipped
from semcl.cli.numbers import add_numbers_option, overlaid
from semcl.errors import ConfigError
from semcl.store.run_folder import RunFolder


def cmd_list(args) -> None:
    from semcl.registry.index import load_index

    index = load_index(args.profile)
    runs_dir = results_folders(args).runs
    papers = sorted({t["paper"] for t in index["tables"]})
    if args.paper and args.paper not in papers:
        raise ConfigError(f"unknown paper {args.paper!r} (papers: {', '.join(papers)})")
    if args.format == "json":
        from semcl.cli.format import dump, list_json

        return dump(list_json(index, args.paper, args.profile, runs_dir))
    tables = [t for t in index["tables"] if not args.paper or t["paper"] == args.paper]
    kept = [t for t in tables if t["id"] in index["runs"]]
    say_skipped([t["id"] for t in tables if t["id"] not in index["runs"]], args.profile)
    try:
        started = set(os.listdir(runs_dir))  # one directory read instead of a stat per planned run
    except OSError:
        started = set()
    lines = []
    for t in kept:
        runs = index["runs"][t["id"]]
        # a finished record present (its content is checked by `semcl status` / `semcl table`)
        done = sum(r[0] in started and RunFolder(runs_dir / r[0]).metrics.exists() for r in runs)
        lines.append((t["id"], t["paper"], f"{t['implemented']}/{t['rows']}", f"{done}/{len(runs)}", t["source"],
                      t["title"]))
    head = ("table", "paper", "rows impl/total", "runs done/planned", "source", "title")
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(4)]
    for line in [head, *lines]:
        print("  ".join(f"{x:<{w}}" for x, w in zip(line[:4], widths, strict=True)) + f"  {line[4]}: {line[5]}")
    print(f"(runs counted for profile '{args.profile}')")


def cmd_show(args) -> None:
    from semcl.cli.format import dump, matching_rows, show_json
    from semcl.evals.protocols import describe

    table = overlaid(args, get_table(args.table))  # the user's paper numbers (semcl numbers) as user-supplied
    rows = matching_rows(table, args.rows) if args.rows is not None else table.rows
    if args.row:
        from semcl.report.trail import pick_rows

        rows = [r for r in pick_rows(table, args.row) if r in rows]
    if args.files:
        from semcl.cli.format import files_json
        from semcl.report.trail import print_trails, table_trails

        trails = table_trails(table, rows)
        return dump(files_json(table, trails)) if args.format == "json" else print_trails(table, trails)
    if args.format == "json":
        return dump(show_json(table, rows))
    print(f"{table.id}: {table.title}\n  paper: {table.paper}, {table.source}; file: {table.path}")
    print(f"  seeds: {table.seeds}; profiles: {', '.join(table.profiles)}")
    print("  columns:")
    for c in table.columns:
        print(f"    {c.key:<20} {c.label:<18} {describe(c)}")
    print("  rows:")
    for row in rows:
        state = {"reference": "reference (a published number shown beside ours; never run)",
                 "not implemented": "NOT IMPLEMENTED (planned)",
                 "released": "released (the authors' checkpoint; evaluated only, `semcl verify`)"}.get(row.state, row.state)
        print(f"    {row.label:<28} method={row.method:<28} {state}")
        if row.init_from:
            print(f"      starts from: {row.init_from!r} (the same seed's final weights)")
        if row.released:
            ck = row.released
            print(f"      checkpoint: {ck.file} (layout {ck.layout}, loads into {ck.network!r}; size "
                  f"{ck.size if ck.size is not None else 'unknown'}, sha256 {ck.sha256 or 'unknown (recorded at first use)'})")
            print(f"      linked from: {ck.url}" + (f"; training log: {ck.log}" if ck.log else ""))
        if row.ensemble:
            print(f"      logit-sum ensemble of: {', '.join(repr(x) for x in row.ensemble)}")
        if row.select:
            print(f"      shows the row of {row.select.table} with the {row.select.best} mean {row.select.column} "
                  "(its runs; no runs of its own)")
        if row.overrides:
            print(f"      overrides: {row.overrides}")
        for key, rep in row.reported.items():
            if rep is not None:
                std = f" ± {rep.std}" if rep.std is not None else ""
                print(f"      reported {key}: {rep.value}{std} [{rep.provenance}] {rep.source}")
                if rep.same_as:  # the number is written in another entry (semcl.registry.same_as)
                    print(f"        same as {rep.same_as}")
                for alt in rep.also:  # the same cell from lower-ranked sources
                    print(f"        also {alt.value} [{alt.provenance}] {alt.source}")
                if rep.overrides is not None:
                    print(f"        overrides the registry's {rep.overrides.value} [{rep.overrides.provenance}] "
                          f"{rep.overrides.source}")
        if not any(row.reported.values()):
            print("      reported: none known (null)")
    for name, prof in table.profiles.items():
        if prof.overrides or prof.note or prof.substitute:
            print(f"  profile {name}: {prof.note}")
            if prof.substitute:
                print(f"    substitutes: {prof.substitute}")
            for label, over in prof.rows.items():
                if any(r.label == label for r in rows):
                    print(f"    row {label!r}: {over}")
    for d in table.deviations:
        print(f"  deviation: {d}")
    for n in table.notes:
        print(f"  note: {n}")


def add_parser(sub) -> None:
    sp = sub.add_parser("list", help="every registry entry with its status")
    sp.add_argument("paper", nargs="?", default=None, help="only this paper's entries (rince, gpaco, paco, hsa, scns)")
    add_profile(sp)
    add_json(sp)
    sp.set_defaults(func=cmd_list)
    sp = sub.add_parser("show", help="rows, columns, protocols and reported numbers of a table")
    sp.add_argument("table", help="table id, e.g. rince/tab2 (see `semcl list`)")
    sp.add_argument("--rows", metavar="REGEX", help="only the rows whose label matches (case-insensitive)")
    sp.add_argument("--row", action="append", metavar="LABEL", help="only this row, by its exact label (repeatable)")
    sp.add_argument("--files", action="store_true",
                    help="the files behind each row: registry YAML, preset, method spec and class, losses, model "
                         "builder, dataset reader, and each column's protocol and metric code")
    add_json(sp)
    add_numbers_option(sp)
    sp.set_defaults(func=cmd_show)
