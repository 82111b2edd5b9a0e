"""`semcl report --index`: one HTML page over every table of the four papers.

One line per registry entry: its paper, source and title, then per profile (paper, mini, smoke) its runs done of
planned (coloured as the reports colour an entry), then the verdicts of the claims that read it under the chosen
profile, and a link to the entry's section in its paper's report page where that page exists beside the index
(`semcl report <paper> --profile P --html` writes them). Self-contained like the reports (semcl.report.html_template).
"""

from __future__ import annotations

import html
import time
from pathlib import Path

from semcl.files import write_text_atomic
from semcl.locations import shown_path
from semcl.registry.plan import plan_runs
from semcl.registry.tables import PROFILE_NAMES, Table, load_registry
from semcl.report.html import html_row, table_anchor, verdict_class
from semcl.report.html_template import STATE_LEGEND, page
from semcl.store import Store

INDEX_FILE = "index.html"


def run_counts(table: Table, profile: str, store: Store) -> tuple[int, int] | None:
    """(runs done, runs planned) of the table under `profile`; None when it has no such profile."""
    if profile not in table.profiles:
        return None
    ids = {r.run_id for r in plan_runs(table, profile)}
    return sum(store.metrics_path(i).exists() for i in ids), len(ids)


def state_of(counts: tuple[int, int] | None) -> str:
    if counts is None:
        return "no-profile"
    done, planned = counts
    return "done" if planned and done == planned else "partial" if done else "none"


def claim_verdicts(profile: str, store: Store, registry: dict[str, Table]) -> dict[str, list[tuple[str, str]]]:
    """table id -> [(claim id, verdict)] of every paper's claims under `profile` (each comparison once)."""
    from semcl.report.claim_verdicts import judge_claims
    from semcl.report.claims import claims_path, load_claims

    out: dict[str, list[tuple[str, str]]] = {}
    for paper in sorted({t.paper for t in registry.values()}):
        if not claims_path(paper).exists():
            continue
        for v in judge_claims(load_claims(paper), profile, store, registry):
            if v.same_as is None:
                out.setdefault(v.claim.table, []).append((v.claim.id, v.verdict))
    return out


def _verdict_cell(verdicts: list[tuple[str, str]]) -> str:
    if not verdicts:
        return ""
    tally: dict[str, int] = {}
    for _, verdict in verdicts:
        tally[verdict] = tally.get(verdict, 0) + 1
    return "<br>".join(f'<span class="{verdict_class(k)}">{n} {html.escape(k)}</span>' for k, n in tally.items())


def render_index(store: Store, profile: str, out_dir: Path, registry: dict[str, Table] | None = None) -> str:
    registry = load_registry() if registry is None else registry
    verdicts = claim_verdicts(profile, store, registry)
    header = ["Table", "Source", "Title", *[f"{p}: runs done" for p in PROFILE_NAMES], f"Claims ({profile})"]
    body = []
    for table in sorted(registry.values(), key=lambda t: t.id):
        report = out_dir / f"{table.paper}.{profile}.html"
        name = f"<code>{html.escape(table.id)}</code>"
        first = f'<a href="{report.name}#{table_anchor(table.id)}">{name}</a>' if report.exists() else name
        cells, classes = [first, html.escape(table.source), html.escape(table.title)], ["", "", ""]
        for p in PROFILE_NAMES:
            counts = run_counts(table, p, store)
            cells.append("—" if counts is None else f"{counts[0]} / {counts[1]}")
            classes.append(f"state-{state_of(counts)}")
        cells.append(_verdict_cell(verdicts.get(table.id, [])))
        classes.append("")
        body.append(html_row(cells, classes=classes, raw=True))
    legend = "".join(f'<span class="swatch" style="background:{color}"></span>{html.escape(text)}'
                     for _, color, text in STATE_LEGEND)
    title = f"semcl: every table of the four papers (claims under profile {profile})"
    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="meta">Rebuilt by <code>semcl report --index --profile {html.escape(profile)}</code> on '
             f"{time.strftime('%Y-%m-%d %H:%M')} from <code>{html.escape(shown_path(store.root))}</code>. A table "
             f"links to its section of the paper's report where that page is in this folder.</p>",
             f'<p class="legend">Runs:{legend}</p>',
             f'<div class="scroll"><table class="index"><thead>{html_row(header, tag="th")}</thead>'
             f"<tbody>{''.join(body)}</tbody></table></div>"]
    return page(html.escape(title), "\n".join(parts))


def write_index(store: Store, profile: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / INDEX_FILE
    write_text_atomic(path, render_index(store, profile, out_dir))
    return path
