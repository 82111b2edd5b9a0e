"""Per-paper reproduction reports: <out>/<paper>.<profile>.md (`semcl report`: results/reports/ unless
--out says otherwise; the curated, tracked pages live in reproduce/), rebuilt from the results store.

One page per paper and profile: an overview (every registry entry of the paper with rows implemented,
runs done / planned and how many cells differ from the paper by more than twice the seed spread),
then each table that has finished runs (the same rendering as `semcl table`) and its figure when the
entry declares one, then the verdicts of the paper's claims (the same rendering as `semcl claims`).
Tables without runs are listed, not rendered, so the page stays readable while a grid is still
running; rerunning the command replaces the page.

The page is a function of the runs it shows and the code: it names no machine path (not the results root) and no
build time, only the day its newest run finished. `--runs-file` keeps those runs' per-seed values beside it
(<out>/<paper>.<profile>.runs.json, semcl.report.run_values), once the page renders from them alone;
tests/e2e/test_reproduce_pages.py holds the tracked pages in reproduce/ to them and retrains one seed of each.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

import pandas as pd

from semcl.errors import ConfigError, ResultsError
from semcl.files import write_text_atomic
from semcl.locations import shown_path
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Table, load_registry
from semcl.report.escape import md_cell
from semcl.report.run_values import newest_finish, store_of, table_values, write_runs_file
from semcl.report.tables import long_table, render, summary
from semcl.store import Store


def paper_tables(paper: str) -> list[Table]:
    tables = [t for t in load_registry().values() if t.paper == paper]
    if not tables:
        papers = sorted({t.paper for t in load_registry().values()})
        raise ValueError(f"no registry entry has paper {paper!r} (papers: {', '.join(papers)})")
    return sorted(tables, key=lambda t: t.id)


def _flagged(summ) -> int:
    """Cells whose difference to a known paper value exceeds twice the seed spread (the tables' *)."""
    return int(sum(1 for s in summ.itertuples() if not math.isnan(s.delta) and s.n > 1 and abs(s.delta) > 2 * s.std))


@dataclass
class Section:
    """One rendered table of the page: its (overlaid) entry, the per-cell summary, and its figure's PNG."""

    table: Table
    summ: pd.DataFrame
    figure: Path | None = None
    against: pd.DataFrame | None = None  # --against: the per-cell comparison (semcl.report.against.compare)
    long: pd.DataFrame | None = None  # --against: the long table with its origin column


@dataclass
class ReportData:
    """What both renderings of the page (Markdown, semcl.report.html) show, computed once."""

    paper: str
    profile: str
    store: Store
    built: str | None  # the day the newest run shown finished (YYYY-MM-DD), None without runs
    overview: list[list[str]]  # one line per registry entry: OVERVIEW_HEADER's cells
    state: list[str]  # per overview line: "done" | "partial" | "none" | "no-profile"
    sections: list[Section] = field(default_factory=list)
    claims: tuple | None = None  # (ClaimsFile, verdicts, registry) when the paper has a claims file
    options: str = ""  # the command's --set / --row options, as typed back (the page's header names them)
    variant_line: str = ""  # with --set: how the claims read the variant rows
    origins: list = field(default_factory=list)  # --against (semcl.report.origins.Origin)
    against_claims: dict | None = None  # --against: origin name -> its verdicts of the claims, ours first
    official: list = field(default_factory=list)  # --official-log: semcl.report.official_log_pages.OfficialCurve
    runs: list[dict] = field(default_factory=list)  # the per-seed values the page shows (semcl.report.run_values)


OVERVIEW_HEADER = ["Table", "Source", "Rows implemented", "Runs done", "Cells with a paper value", "Cells flagged *"]
LEGEND = "Cells: ours mean ± sample std (n), then / paper / Δ in the columns that have a paper value; * = |Δ| > 2 std."


def provenance(data: ReportData) -> str:
    """Where the numbers come from, as the page's header says it: never the machine's path or the build time."""
    if data.built is None:
        return "from a results root without a finished run of these tables"
    return f"from a results root (the newest run shown finished on {data.built})"


def _claims(paper: str, profile: str, store: Store, overlay=None, varied: dict | None = None,
            labels_of: dict | None = None) -> tuple | None:
    """`varied` / `labels_of` (--set): the varied tables by id, and per table which variant stands for which row."""
    from semcl.report.claim_verdicts import judge_claims
    from semcl.report.claims import claims_path, load_claims

    if not claims_path(paper).exists():
        return None
    cf = load_claims(paper)
    registry = load_registry() if overlay is None else overlay.apply_all(load_registry())
    if varied:
        from dataclasses import replace

        registry = {**registry, **varied}
        swap = {(tid, a): v for tid, m in (labels_of or {}).items() for a, v in m.items()}
        cf = replace(cf, claims=tuple(replace(c, a=swap.get((c.table, c.a), c.a),
                                              b=swap.get((c.table, c.b), c.b)) for c in cf.claims))
    return cf, judge_claims(cf, profile, store, registry), registry


def _claims_section(data: ReportData) -> list[str]:
    """The verdict table of experiments/<paper>/claims.yaml (`semcl claims`), when the paper has one."""
    from semcl.report.claim_verdicts import render_md
    from semcl.report.claims import claims_path

    if data.claims is None:
        return ["", "## Claims", "", f"No claims file ({shown_path(claims_path(data.paper))})."]
    cf, verdicts, registry = data.claims
    body = render_md(cf, data.profile, verdicts, data.store, heading=False, registry=registry)
    command = f"semcl claims {data.paper} --profile {data.profile}{data.options}"
    out = ["", "## Claims", "", f"From `{command}` ({shown_path(cf.path)}):", "", body.rstrip()]
    if data.against_claims:
        from semcl.report.against_claims import render_md as against_md

        out += ["", "### Claims against the other origins", "",
                f"From `{command}{against_options(data)}`:", "",
                against_md(cf, data.profile, data.against_claims, data.origins).rstrip()]
    return out


def _page_runs(tables: list[Table], profile: str, store: Store) -> list[dict]:
    """The per-seed values of every finished run the tables show, the tables their `select` rows read included."""
    seen, out = set(), []
    for table in [*tables, *(t for tab in tables for t in tab.linked.values())]:
        if profile in table.profiles:
            for entry in table_values(table, profile, store):
                if (entry["table"], entry["row"], entry["seed"]) not in seen:
                    seen.add((entry["table"], entry["row"], entry["seed"]))
                    out.append(entry)
    return out


def collect_report(paper: str, profile: str, store: Store, out_dir: Path, overlay=None, sets: list[str] | None = None,
                   rows: list[str] | None = None, origins: list | None = None, draw: bool = True) -> ReportData:
    """Every entry's status, the tables with finished runs (their figures drawn into <out_dir>/figures) and the
    claims' verdicts. `overlay` (semcl.report.user_numbers.Overlay): the user's paper numbers, shown as user-supplied.
    `sets` / `rows` (--set / --row): each table with its variant rows beside the registered ones (as `table --set`);
    with one variant, the claims on a varied row read the variant's runs (as `claims --set`). `origins` (--against):
    each table's cells compared with the origins' (as `table --against`), figures of a table's cells drawn with
    them, the claims judged on each origin too (as `claims --against`). `draw=False`: the figures are named, not
    drawn (the page's text is the same)."""
    from semcl.report.figure_names import figure_png
    from semcl.report.figures import AGAINST_KINDS, write_figure

    data = ReportData(paper, profile, store, None, [], [], origins=list(origins or []))
    tables, varied, labels_of = paper_tables(paper), {}, {}
    if sets:
        import shlex

        from semcl.registry.set_options import sweep_text
        from semcl.registry.variant_views import vary_tables

        tables, labels_of = vary_tables(tables, sets, rows, profile)
        data.options = "".join(f" --set {shlex.quote(s)}" for s in sets) + "".join(
            f" --row {shlex.quote(r)}" for r in rows or [])
        data.variant_line = (f"Variant `--set {sweep_text(sets)}`: each varied row is followed by its variant(s). "
                             + ("A claim on a varied row reads its variant's runs." if labels_of else
                                "A sweep: the claims read the registered rows (`semcl claims --set` per value)."))
    elif rows:
        raise ValueError("--row selects the rows --set varies in `semcl report`; add --set key=value")
    for table in tables:
        table = overlay.apply(table) if overlay is not None else table
        varied[table.id] = table  # what the claims read with --set: the variant rows, the user's numbers
        paper_rows = [r for r in table.rows if not r.released]  # the authors' checkpoints are no rows of the paper
        impl = sum(r.implemented for r in paper_rows)
        if profile not in table.profiles:
            data.overview.append([f"`{table.id}`", table.source, f"{impl}/{len(paper_rows)}",
                                  f"no `{profile}` profile", "—", "—"])
            data.state.append("no-profile")
            continue
        runs = plan_runs(table, profile)
        done = sum(store.status(r.run_id)[0] == "done" for r in {r.run_id: r for r in runs}.values())
        unique = len({r.run_id for r in runs})
        summ = summary(table, profile, long_table(table, profile, store))
        known = int((~summ["paper"].isna()).sum()) if "paper" in summ else 0  # analytic figures: no cells
        imported = "imported" in summ and bool((summ["imported"] != "").any())  # semcl results import
        data.overview.append([f"`{table.id}`", table.source, f"{impl}/{len(paper_rows)}", f"{done}/{unique}",
                              str(known), str(_flagged(summ)) if done or imported else "—"])
        data.state.append("none" if not done and not imported else "done" if done == unique else "partial")
        if not done and not imported:
            continue
        with_them = data.origins if table.figure is not None and table.figure.get("kind") in AGAINST_KINDS else None
        png = None
        if table.figure is not None:  # draw=False: the same name, nothing drawn
            png = write_figure(table, profile, store, out_dir / "figures", with_them)[1] if draw else \
                figure_png(table, profile, out_dir / "figures")
        sec = Section(table, summ, png)
        if data.origins:
            from semcl.report.against import compare
            from semcl.report.origins import long_with_origins, names

            sec.long = long_with_origins(table, profile, store, data.origins)
            sec.against = compare(table, profile, sec.long, names(data.origins))
        data.sections.append(sec)
    data.runs = _page_runs(list(varied.values()), profile, store)
    data.built = newest_finish(data.runs)
    data.claims = _claims(paper, profile, store, overlay, varied if labels_of else None, labels_of)
    if data.origins and data.claims is not None:
        from semcl.report.claim_verdicts import judge_claims

        cf, verdicts, registry = data.claims
        data.against_claims = {"ours": verdicts, **{o.name: judge_claims(cf, profile, o.store, registry)
                                                    for o in data.origins}}
    return data


def against_options(data: ReportData) -> str:
    """The --against options as typed back (the page's header and commands name them)."""
    import shlex

    return "".join(f" --against {shlex.quote(f'{o.name}={o.root}')}" for o in data.origins)


def render_report_md(data: ReportData) -> str:
    lines = [f"# Reproduction report: {data.paper} (profile `{data.profile}`)", "",
             f"Rebuilt by `semcl report {data.paper} --profile {data.profile}{data.options}{against_options(data)}` "
             f"{provenance(data)}. {LEGEND}", "", *([data.variant_line, ""] if data.variant_line else []),
             "| " + " | ".join(OVERVIEW_HEADER) + " |", "|" + "---|" * len(OVERVIEW_HEADER)]
    lines += ["| " + " | ".join(md_cell(c) for c in cells) + " |" for cells in data.overview]
    sections = []
    for sec in data.sections:
        body = render(sec.table, data.profile, sec.summ, "md")
        sections += ["", f"## `{sec.table.id}`", "", body.rstrip()]
        if sec.against is not None:
            from semcl.report.against import render_against

            sections += ["", f"### Against {', '.join(o.name for o in data.origins)}", "",
                         render_against(sec.table, data.profile, sec.against, "md", data.origins, sec.long).rstrip()]
        if sec.figure is not None:
            sections += ["", f"![{sec.table.id}](figures/{sec.figure.name})"]
    if data.official:  # --official-log: our curves beside the authors' training logs
        from semcl.report.official_log_pages import HEADING, caption

        sections += ["", f"## {HEADING}"]
        for curve in data.official:
            sections += ["", caption(curve), "", f"![{curve.table.id}](curves/{curve.png.name})"]
    sections += _claims_section(data)
    return "\n".join(lines + sections) + "\n"


def build_report(paper: str, profile: str, store: Store, out_dir: Path, overlay=None, sets: list[str] | None = None,
                 rows: list[str] | None = None, origins: list | None = None, runs_file: bool = False) -> tuple[str, Path]:
    """`overlay` (semcl.report.user_numbers.Overlay): the user's paper numbers, shown as user-supplied in every table;
    `sets` / `rows`: the variant tables (collect_report); the caller picks the variants/<slug> folder. `runs_file`:
    the page's per-seed values go beside it (<paper>.<profile>.runs.json) once the page renders from them alone."""
    if runs_file and origins:
        raise ConfigError("--runs-file keeps this store's runs; the --against origins' pages have none to keep")
    data = collect_report(paper, profile, store, out_dir, overlay, sets, rows, origins)
    text = render_report_md(data)
    if runs_file:
        _same_from_runs(text, data, out_dir, overlay, sets, rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{paper}.{profile}.md"
    write_text_atomic(path, text)
    if runs_file:
        write_runs_file(path.with_suffix(".runs.json"), path.name, data.runs)
    return text, path


def _same_from_runs(text: str, data: ReportData, out_dir: Path, overlay, sets, rows) -> None:
    """ResultsError naming the first line that differs when the page, rendered from its per-seed values alone,
    is not `text`: it reads something the runs file does not keep (an imported cell, an authors' checkpoint)."""
    with tempfile.TemporaryDirectory(prefix="semcl-page-") as tmp:
        again = render_report_md(collect_report(data.paper, data.profile, store_of(data.runs, Path(tmp)), out_dir,
                                                overlay, sets, rows, draw=False))
    if again != text:
        line = next(a for a, b in zip_longest(text.splitlines(), again.splitlines(), fillvalue="") if a != b)
        raise ResultsError(f"{data.paper}.{data.profile}.md: the page reads more than its runs file keeps (semcl's "
                           f"finished runs); from the runs alone this line differs: {line[:200]}")
