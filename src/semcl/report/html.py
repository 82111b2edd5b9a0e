"""`semcl report <paper> --html`: the reproduction report as one self-contained static page.

The page is rendered from the same ReportData as the Markdown report (semcl.report.reproduction
.collect_report), and every table cell is the very string the Markdown shows (tables.wide_cells,
claim_verdicts.claim_cells): the page adds only presentation. On top of the Markdown it gives each
cell with a paper value a title (hover) naming the number's provenance and source, numbers those
sources under the table, marks flagged cells (* = |Δ| > 2 std), colours every entry by its status and
every claim by its verdict, and embeds each figure as a base64 PNG. Nothing is fetched: CSS inline,
no script, no external image (semcl.report.html_template).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from semcl.files import write_text_atomic
from semcl.locations import shown_path
from semcl.registry.tables import Reported, Table
from semcl.report.html_template import STATE_LEGEND, page
from semcl.report.reproduction import (
    LEGEND,
    OVERVIEW_HEADER,
    ReportData,
    Section,
    against_options,
    collect_report,
    provenance,
    render_report_md,
)
from semcl.report.tables import DASH, notes, table_title, wide_cells

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def inline(text: str) -> str:
    """The Markdown the reports' prose uses (`code`, **bold**) as HTML; everything else escaped."""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_BOLD.sub(r"<strong>\1</strong>", html.escape(text[last:m.start()])))
        out.append(f"<code>{html.escape(m.group(1))}</code>")
        last = m.end()
    out.append(_BOLD.sub(r"<strong>\1</strong>", html.escape(text[last:])))
    return "".join(out)


def _attrs(cls: str = "", title: str = "") -> str:
    return (f' class="{cls}"' if cls else "") + (f' title="{html.escape(title)}"' if title else "")


def html_row(cells: list[str], tag: str = "td", classes: list[str] | None = None, titles: list[str] | None = None,
         row_cls: str = "", raw: bool = False) -> str:
    """One <tr>; cells are escaped (`raw`: already HTML) so the DOM's text is the Markdown cell."""
    classes = classes or [""] * len(cells)
    titles = titles or [""] * len(cells)
    tds = "".join(f"<{tag}{_attrs(c, t)}>{x if raw else html.escape(x)}</{tag}>"
                  for x, c, t in zip(cells, classes, titles, strict=True))
    return f"<tr{_attrs(row_cls)}>{tds}</tr>"


def provenance_text(rep: Reported) -> str:
    """Where a paper value comes from, for the cell's title and the table's list of sources."""
    std = "" if rep.std is None else f" ± {rep.std:g}"
    text = f"paper {rep.value:g}{std} [{rep.provenance}]: {rep.source}"
    if rep.same_as:
        text += f" (held in {rep.same_as})"
    text += "".join(f"; also {a.value:g} [{a.provenance}]: {a.source}" for a in rep.also)
    if rep.overrides is not None:
        text += f"; overrides the registry's {rep.overrides.value:g} [{rep.overrides.provenance}]: {rep.overrides.source}"
    return text


def _cell_class(text: str) -> str:
    if text.startswith("not implemented"):
        return "ni"
    if text == DASH:
        return "empty"
    return "flag" if text.endswith("*") else ""


def results_table(table: Table, profile: str, sec: Section) -> str:
    """The table of `semcl table` as HTML: the Markdown cells, each paper value's provenance on its cell."""
    wide = wide_cells(table, sec.summ)
    by_key = {c.key: c for c in table.columns}
    head = html_row(["Row", *[by_key[k].label for k in wide.columns]], tag="th")
    body, sources = [], []
    for row in table.rows:
        cells = list(wide.loc[row.label])
        classes, titles = [""], [""]
        for key, text in zip(wide.columns, cells, strict=True):
            rep = row.reported.get(key)
            if rep is None:
                classes.append(_cell_class(text))
                titles.append("")
                continue
            sources.append(f"{row.label} / {by_key[key].label}: {provenance_text(rep)}")
            classes.append(" ".join(x for x in ("paper", _cell_class(text)) if x))
            titles.append(f"[{len(sources)}] {provenance_text(rep)}")
        body.append(html_row([row.label, *cells], classes=classes, titles=titles))
    parts = [f"<p><strong>{html.escape(table_title(table, profile))}</strong></p>",
             f'<div class="scroll"><table class="results" data-table="{html.escape(table.id)}">'
             f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>",
             "<ul class=\"notes\">" + "".join(f"<li>{inline(n)}</li>" for n in notes(table, profile, sec.summ)) + "</ul>"]
    if sources:
        parts.append("<details><summary>Sources of the paper values (also on each cell's hover)</summary>"
                     '<ol class="sources">' + "".join(f"<li>{html.escape(s)}</li>" for s in sources) + "</ol></details>")
    return "\n".join(parts)


def against_html(table: Table, profile: str, sec: Section, origins: list) -> str:
    """--against: the cells of `semcl table --against` (semcl.report.against), each verdict coloured."""
    from semcl.report.against import against_notes, cell_lines
    from semcl.report.origins import names

    head, body = cell_lines(table, sec.against, names(origins))
    rows = []
    for line in body:
        classes = ["", "", *["" for _ in line[2:]]]
        for k, h in enumerate(head):
            if h.endswith(" vs ours"):
                classes[k] = "verdict-" + re.sub(r"[^a-z]+", "-", line[k].lower()).strip("-")
        rows.append(html_row(line, classes=classes))
    named = ", ".join(o.name for o in origins)
    return "\n".join([f"<h3>Against {html.escape(named)}</h3>",
                      f'<div class="scroll"><table class="against" data-table="{html.escape(table.id)}">'
                      f"<thead>{html_row(head, tag='th')}</thead><tbody>{''.join(rows)}</tbody></table></div>",
                      '<ul class="notes">' + "".join(f"<li>{inline(n)}</li>"
                                                    for n in against_notes(origins, sec.against, sec.long)) + "</ul>"])


def figure_html(table: Table, png: Path) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(table.id)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(table.id)} ({html.escape(table.source)}); the points also in "
            f"<code>figures/{html.escape(png.with_suffix('.csv').name)}</code></figcaption></figure>")


def official_html(data: ReportData) -> str:
    """Per --official-log, the curves figure inline with the line naming the authors' file."""
    from semcl.report.official_log_pages import HEADING, caption

    parts = [f'<h2 id="official-logs">{html.escape(HEADING)}</h2>']
    for curve in data.official:
        data64 = base64.b64encode(curve.png.read_bytes()).decode("ascii")
        parts.append(f'<figure class="official-log"><img alt="{html.escape(curve.table.id)}: {html.escape(str(curve.log))}"'
                     f' src="data:image/png;base64,{data64}"><figcaption>{inline(caption(curve))}</figcaption></figure>')
    return "\n".join(parts)


def table_anchor(table_id: str) -> str:
    return "t-" + re.sub(r"[^A-Za-z0-9_-]", "-", table_id)


def overview(data: ReportData) -> str:
    rendered = {sec.table.id for sec in data.sections}
    body = []
    for cells, state in zip(data.overview, data.state, strict=True):
        tid = cells[0].strip("`")
        first = (f'<a href="#{table_anchor(tid)}"><code>{html.escape(tid)}</code></a>' if tid in rendered
                 else f"<code>{html.escape(tid)}</code>")
        body.append(html_row([first, *[inline(c) for c in cells[1:]]], row_cls=state, raw=True))
    legend = "".join(f'<span class="swatch" style="background:{color}"></span>{html.escape(text)}'
                     for _, color, text in STATE_LEGEND)
    return (f'<p class="legend">Status:{legend}</p><div class="scroll"><table class="overview">'
            f"<thead>{html_row(OVERVIEW_HEADER, tag='th')}</thead><tbody>{''.join(body)}</tbody></table></div>")


def verdict_class(verdict: str) -> str:
    return "verdict-" + re.sub(r"[^a-z]+", "-", verdict.split(":")[0].split(" (")[0].strip().lower()).strip("-")


def claims_html(data: ReportData) -> str:
    from semcl.report.claim_stats import rule_text
    from semcl.report.claim_verdicts import CLAIM_HEADER, claim_cells, counts, quote_lines, undecidable_lines
    from semcl.report.claims import claims_path

    if data.claims is None:
        return f"<p>No claims file (<code>{html.escape(str(claims_path(data.paper)))}</code>).</p>"
    cf, verdicts, registry = data.claims
    tally = ", ".join(f"{n} {k}" for k, n in counts(verdicts).items()) or "no claims"
    parts = [f"<p>From <code>semcl claims {html.escape(data.paper)} --profile {html.escape(data.profile)}</code> "
             f"(<code>{html.escape(shown_path(cf.path))}</code>): <strong>{html.escape(tally)}</strong>.</p>",
             f'<p class="legend">Rule: {inline(rule_text())}</p>']
    scale = [f"Profile {data.profile} of {tid}: {registry[tid].profiles[data.profile].note}"
             for tid in dict.fromkeys(c.table for c in cf.claims)
             if tid in registry and data.profile in registry[tid].profiles and registry[tid].profiles[data.profile].note]
    if scale:
        parts.append('<ul class="notes">' + "".join(f"<li>{inline(s)}</li>" for s in scale) + "</ul>")
    rows, user_lines = [], []
    for v in verdicts:
        cells, said = claim_cells(v, registry)
        user_lines += said
        tds = [f"<code>{html.escape(v.claim.id)}</code>", *[html.escape(x) for x in (v.claim.describe(), *cells)]]
        rows.append(html_row(tds, classes=[""] * (len(tds) - 1) + [verdict_class(v.verdict)],
                         titles=[f"{v.claim.provenance}: {v.claim.source}"] + [""] * (len(tds) - 1), raw=True))
    parts.append(f'<div class="scroll"><table class="claims"><thead>{html_row(CLAIM_HEADER, tag="th")}</thead>'
                 f"<tbody>{''.join(rows)}</tbody></table></div>")
    lists = [("User-supplied paper values (semcl numbers list):", user_lines),
             ("Quotes (provenance; source) → claims:", quote_lines(cf)),
             ("Quantitative sentences no comparison of runs can decide:", undecidable_lines(cf))]
    for head, items in lists:
        if items:
            parts.append(f"<p>{html.escape(head)}</p><ul class=\"notes\">"
                         + "".join(f"<li>{inline(x)}</li>" for x in items) + "</ul>")
    return "\n".join(parts)


def against_claims_html(data: ReportData) -> str:
    """--against: each claim's verdict on ours and on each origin (semcl.report.against_claims), disagreements listed."""
    from semcl.report.against_claims import disagreements, verdict_summary

    head = ["Claim", "Comparison"]
    for name in data.against_claims:
        head += [f"{name}: Δ = A − B (n, p)", f"{name}: verdict"]
    rows = []
    for k, v in enumerate(data.against_claims["ours"]):
        cells, classes = [v.claim.id, v.claim.describe()], ["", ""]
        for verdicts in data.against_claims.values():
            cells += [verdict_summary(verdicts[k]), verdicts[k].verdict]
            classes += ["", verdict_class(verdicts[k].verdict)]
        rows.append(html_row(cells, classes=classes))
    differ = disagreements(data.against_claims) or ["Every origin's verdicts agree with ours."]
    return "\n".join(['<h3 id="claims-against">Claims against the other origins</h3>',
                      f'<div class="scroll"><table class="claims-against"><thead>{html_row(head, tag="th")}</thead>'
                      f"<tbody>{''.join(rows)}</tbody></table></div>",
                      '<ul class="notes">' + "".join(f"<li>{inline(d)}</li>" for d in differ) + "</ul>"])


def render_report_html(data: ReportData) -> str:
    title = f"Reproduction report: {data.paper} (profile {data.profile})"
    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="meta">Rebuilt by <code>semcl report {html.escape(data.paper)} --profile '
             f"{html.escape(data.profile + data.options + against_options(data))} --html</code> "
             f"{html.escape(provenance(data))}. {html.escape(LEGEND)} Hover a cell with a paper "
             "value for its provenance.</p>", *([f"<p>{html.escape(data.variant_line)}</p>"] if data.variant_line else []),
             overview(data)]
    if data.sections:
        parts.append("<nav><ul>" + "".join(f'<li><a href="#{table_anchor(s.table.id)}">{html.escape(s.table.id)}</a>'
                                           f" ({html.escape(s.table.source)})</li>" for s in data.sections)
                     + ('<li><a href="#official-logs">Authors\' logs</a></li>' if data.official else "")
                     + '<li><a href="#claims">Claims</a></li></ul></nav>')
    for sec in data.sections:
        parts += [f'<h2 id="{table_anchor(sec.table.id)}"><code>{html.escape(sec.table.id)}</code></h2>',
                  results_table(sec.table, data.profile, sec)]
        if sec.against is not None:
            parts.append(against_html(sec.table, data.profile, sec, data.origins))
        if sec.figure is not None:
            parts.append(figure_html(sec.table, sec.figure))
    if data.official:  # --official-log: our curves beside the authors' training logs
        parts.append(official_html(data))
    parts += ['<h2 id="claims">Claims</h2>', claims_html(data)]
    if data.against_claims:
        parts.append(against_claims_html(data))
    return page(html.escape(title), "\n".join(parts))


def build_html_report(paper: str, profile: str, store, out_dir: Path, overlay=None, sets=None,
                      rows=None, origins=None, official_logs=None) -> tuple[Path, Path]:
    """Write <out_dir>/<paper>.<profile>.html and, from the same data, the Markdown report beside it;
    returns (html path, md path). `sets` / `rows`: the variant tables (collect_report). `official_logs`
    (--official-log TABLE=FILE): those tables' curves beside the authors' logs (semcl.report.official_log_pages)."""
    logs = []
    if official_logs:  # every log read before anything is written
        from semcl.report.official_log_pages import read_official_logs
        from semcl.report.reproduction import paper_tables

        logs = read_official_logs(official_logs, paper_tables(paper))
    data = collect_report(paper, profile, store, out_dir, overlay, sets, rows, origins)
    if logs:
        from semcl.report.official_log_pages import official_curves

        data.official = official_curves(logs, profile, store, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page_path = out_dir / f"{paper}.{profile}.md", out_dir / f"{paper}.{profile}.html"
    write_text_atomic(md, render_report_md(data))
    write_text_atomic(page_path, render_report_html(data))
    return page_path, md
