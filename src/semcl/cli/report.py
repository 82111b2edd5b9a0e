"""`semcl table`, `claims`, `figure`, `report` and `readme`: the results store rendered beside the paper."""

from __future__ import annotations

import sys
from pathlib import Path

from semcl.cli.args import (
    add_against,
    add_profile,
    add_set,
    add_teachers,
    against_of,
    get_table,
    load_registry,
    open_store,
    results_folders,
    results_root,
    seeds_of,
    with_seeds,
)
from semcl.cli.numbers import add_numbers_option, overlaid, overlay, say_warnings
from semcl.errors import ConfigError, SemclError


def cmd_table(args) -> None:
    from semcl.report.tables import write_table

    table, out_dir = with_seeds(args, get_table(args.table)), None
    if args.set or args.row:  # the registered rows and each one's variant, in a folder of its own
        from semcl.registry.variant_rows import slug, table_view

        table = table_view(table, args.set, args.row, args.profile)
        out_dir = open_store(args).folders.tables(slug(args.set))
    table = overlaid(args, table)  # the user's paper numbers (semcl numbers) as user-supplied
    origins = against_of(args)
    if args.teachers == "released":  # the students of the authors' teachers whose files are verified here
        from semcl.engine.released import released_files
        from semcl.registry.released_teachers import with_released_teachers

        if args.set or args.row or origins:
            raise ConfigError("--teachers released shows the registered rows with the authors' teachers: "
                              "without --set, --row or --against")
        store = open_store(args)
        table = with_released_teachers(table, released_files(table, args.profile, store))
        out_dir = store.folders.tables("teachers-released")  # beside the default file, never over it
    if origins:  # beside the others' runs: both sides per cell, Welch's p and a verdict
        from semcl.report.against import write_against
        from semcl.report.origins import slug as against_slug

        store = open_store(args)
        text, path = write_against(table, args.profile, store, origins, args.format,
                                   (out_dir or store.folders.tables()) / against_slug(origins))
    else:
        text, path = write_table(table, args.profile, open_store(args), args.format, out_dir)
    print(text, end="")
    print(f"(written to {path})", file=sys.stderr)


def cmd_claims(args) -> None:
    from semcl.report.claim_verdicts import write_claims

    if args.plan:  # what the undecided claims need and cost; nothing judged is written
        from semcl.report.claim_plan import claims_plan

        if args.set or args.row or args.format != "md" or against_of(args):
            raise ConfigError("--plan lists the runs the registered rows need: without --set, --row, --against "
                              "or --format")
        print(claims_plan(args.paper, args.profile, open_store(args), seeds_of(args)), end="")
        return
    ov, origins = overlay(args), against_of(args)
    if origins:  # each claim judged on ours and on each origin, side by side
        from semcl.report.against_claims import write_claims_against

        text, path = write_claims_against(args.paper, args.profile, open_store(args), args.format, origins,
                                          overlay=ov, seeds=seeds_of(args), sets=args.set, rows=args.row)
    else:
        text, path = write_claims(args.paper, args.profile, open_store(args), args.format, overlay=ov,
                                  seeds=seeds_of(args), sets=args.set, rows=args.row)
    say_warnings(ov)
    print(text, end="")
    print(f"(written to {path})", file=sys.stderr)


def cmd_figure(args) -> None:
    from semcl.report.figures import write_figure

    table = get_table(args.table)
    if table.figure is None:
        with_figure = sorted(t.id for t in load_registry().values() if t.figure)
        raise ConfigError(f"{table.path}: table {table.id} has no 'figure' entry (tables with one: {', '.join(with_figure)})")
    table, out = with_seeds(args, table), None
    if args.set or args.row:  # the registered rows and each one's variant(s), drawn together in a folder of their own
        from semcl.registry.variant_rows import slug, table_view

        if table.figure.get("kind") == "analytic":
            raise ConfigError(f"{table.path}: figure of {table.id} is analytic (no runs); --set has nothing to vary")
        table = table_view(table, args.set, args.row, args.profile)
        out = open_store(args).folders.figures(slug(args.set))
    origins = against_of(args)
    if origins:  # beside the default files, never over them
        from semcl.report.origins import slug as against_slug

        out = (out or open_store(args).folders.figures()) / against_slug(origins)
    points, path = write_figure(table, args.profile, open_store(args), out, origins)
    print(points.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"(written to {path} and {path.with_suffix('.csv')})", file=sys.stderr)


def cmd_report(args) -> None:
    from semcl.report.reproduction import build_report

    if args.index and (args.set or args.row):
        raise ConfigError("--set / --row vary a paper's tables: name the paper instead of --index")
    if args.index:  # one page over every table, beside the per-paper reports
        from semcl.report.index_page import write_index

        path = write_index(open_store(args), args.profile, Path(args.out) if args.out else results_folders(args).reports())
        print(f"(written to {path})", file=sys.stderr)
        return
    if not args.paper:
        raise ConfigError("name a paper (rince, gpaco, paco, hsa, scns), or --index for the page over every table")
    try:
        out = Path(args.out) if args.out else results_folders(args).reports()  # never the tracked reproduce/ by default
        if args.set:  # the variant tables' page beside the default one, never over it
            from semcl.registry.variant_rows import slug
            from semcl.store.root import VARIANTS

            out = out / VARIANTS / slug(args.set)
        ov, origins = overlay(args), against_of(args)
        if origins:  # beside the default page, never over it
            from semcl.report.origins import slug as against_slug

            out = out / against_slug(origins)
        if args.runs_file and args.html:
            raise ConfigError("--runs-file keeps the Markdown page's runs beside it: drop --html")
        if args.official_log and not args.html:
            raise ConfigError("--official-log draws the authors' log into the HTML page: add --html")
        if args.html:  # the page and, from the same data, the Markdown beside it
            from semcl.report.html import build_html_report

            page, path = build_html_report(args.paper, args.profile, open_store(args), out, overlay=ov,
                                           sets=args.set, rows=args.row, origins=origins,
                                           official_logs=args.official_log)
        else:
            text, path = build_report(args.paper, args.profile, open_store(args), out, overlay=ov, sets=args.set,
                                      rows=args.row, origins=origins, runs_file=args.runs_file)
        say_warnings(ov)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if args.html:
        print(page)
        print(f"(written to {page} and {path})", file=sys.stderr)
        return
    print(text, end="")
    also = f" and {path.with_suffix('.runs.json')}" if args.runs_file else ""
    print(f"(written to {path}{also})", file=sys.stderr)


def cmd_readme(args) -> None:
    from semcl.report.readme import update_readme

    path = Path(args.readme)
    if not path.exists():
        raise SemclError(f"{path}: no such file")
    runs: list[dict] = []
    done = update_readme(path, open_store(args), get_table, runs)
    for table_id, profile in done:
        print(f"{path}: table {table_id} ({profile}) regenerated")
    if done:
        from semcl.report.run_values import write_runs_file

        runs_file = Path(args.runs_file or Path("reproduce") / f"{path.stem}.runs.json")
        write_runs_file(runs_file, path.name, runs)
        print(f"{runs_file}: the per-seed values of those blocks ({len(runs)} runs)")
    if not done:
        print(f"{path}: no '<!-- semcl:table <id> <profile> -->' block with runs in {results_root(args)}",
              file=sys.stderr)


def add_parser(sub) -> None:
    sp = sub.add_parser("table", help="paper vs ours table from the results store")
    sp.add_argument("table", help="table id, e.g. rince/tab2")
    add_profile(sp)
    sp.add_argument("--format", choices=("md", "tex", "csv", "json"), default="md",
                    help="md (default), tex, csv or json")
    add_set(sp, "with --set: only this row varies (repeatable); each varied row is shown beside its variant")
    add_numbers_option(sp)
    add_against(sp)
    add_teachers(sp)
    sp.set_defaults(func=cmd_table)
    sp = sub.add_parser("claims", help="judge a paper's claims (experiments/<paper>/claims.yaml) from the stored runs")
    sp.add_argument("paper", help="rince | gpaco | paco | hsa | scns (with --plan also a table id, e.g. rince/tab4)")
    add_profile(sp)
    sp.add_argument("--format", choices=("md", "csv"), default="md", help="md (default) or csv")
    sp.add_argument("--plan", action="store_true", help="instead: per undecided claim, the rows x seeds it still "
                    "needs, their cost (as `semcl plan` estimates it) and the `semcl run` lines that buy them")
    add_numbers_option(sp)
    add_set(sp, "with --set: only this row varies (repeatable); a claim on a varied row reads its variant's runs")
    add_against(sp)
    sp.set_defaults(func=cmd_claims)
    sp = sub.add_parser("figure", help="paper vs ours figure (PNG + CSV of the points) from the results store")
    sp.add_argument("table", help="table id with a 'figure' entry, e.g. rince/fig4")
    add_profile(sp)
    add_set(sp, "with --set: only this row varies (repeatable); each variant is drawn beside the registered rows "
                "(files in <results>/figures/variants/<settings>/)")
    add_against(sp)
    sp.set_defaults(func=cmd_figure)
    sp = sub.add_parser("report", help="per-paper reproduction report: every table's status, tables and figures")
    sp.add_argument("paper", nargs="?", help="rince | gpaco | paco | ... (not with --index)")
    add_profile(sp)
    sp.add_argument("--index", action="store_true", help="instead: index.html, one page over every table of the "
                    "four papers (runs done per profile, claims' verdicts, links to the paper pages beside it)")
    sp.add_argument("--out", default=None, help="folder for <paper>.<profile>.md (default: <results>/reports/; "
                                                "the curated pages are reproduce/)")
    sp.add_argument("--html", action="store_true", help="also write <paper>.<profile>.html: one self-contained page "
                    "(tables with provenance on hover, claims' verdicts, figures inline); prints its path")
    sp.add_argument("--official-log", action="append", metavar="TABLE=FILE",
                    help="with --html: the table's training curves with the authors' training log drawn beside ours "
                         "(repeatable, one per table; formats as `semcl curves --official-log`, docs/verify.md)")
    sp.add_argument("--runs-file", action="store_true", help="also write <paper>.<profile>.runs.json beside the page: "
                    "the per-seed values it shows (tests/e2e/test_reproduce_pages.py renders the tracked pages in "
                    "reproduce/ from them and retrains one seed of each)")
    add_numbers_option(sp)
    add_set(sp, "with --set: only this row varies (repeatable); the page goes to <out>/variants/<settings>/",
            seeds=False)
    add_against(sp)
    sp.set_defaults(func=cmd_report)
    sp = sub.add_parser("readme", help="regenerate the README's result tables (blocks <!-- semcl:table ID PROFILE -->"
                                       " ... <!-- /semcl -->) from the stored runs")
    sp.add_argument("--readme", default="README.md", help="the file whose blocks are rewritten (default: README.md)")
    sp.add_argument("--runs-file", default=None, help="where the blocks' per-seed values go (default: "
                    "reproduce/<page stem>.runs.json; tests/e2e/test_readme_numbers.py retrains and compares them)")
    sp.set_defaults(func=cmd_readme)
