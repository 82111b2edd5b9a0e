"""Per-paper reproduction reports: <out>/<paper>.<profile>.md (`semcl report`: results/reports/ unless
--out says otherwise; the curated, tracked pages live in reproduce/), rebuilt from the results store.

One page per paper and profile: an overview (every registry entry of the paper with rows implemented,
runs done / planned and how many cells differ from the paper by more than twice the seed spread),
then each table that has finished runs (the same rendering as `semcl table`) and its figure when the
entry declares one, then the verdicts of the paper's claims (the same rendering as `semcl claims`).
Tables without runs are listed, not rendered, so the page stays readable while a grid is still
running; rerunning the command replaces the page.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from semcl.files import write_text_atomic
from semcl.registry import Table, load_registry
from semcl.report.tables import long_table, render, summary
from semcl.runs import Store, plan_runs


def paper_tables(paper: str) -> list[Table]:
    tables = [t for t in load_registry().values() if t.paper == paper]
    if not tables:
        papers = sorted({t.paper for t in load_registry().values()})
        raise ValueError(f"no registry entry has paper {paper!r} (papers: {', '.join(papers)})")
    return sorted(tables, key=lambda t: t.id)


def _flagged(summ) -> int:
    """Cells whose difference to a known paper value exceeds twice the seed spread (the tables' *)."""
    return int(sum(1 for s in summ.itertuples() if not math.isnan(s.delta) and s.n > 1 and abs(s.delta) > 2 * s.std))


def _claims_section(paper: str, profile: str, store: Store, overlay=None) -> list[str]:
    """The verdict table of experiments/<paper>/claims.yaml (`semcl claims`), when the paper has one."""
    from semcl.report.claim_verdicts import judge_claims, render_md
    from semcl.report.claims import claims_path, load_claims

    if not claims_path(paper).exists():
        return ["", "## Claims", "", f"No claims file ({claims_path(paper)})."]
    cf = load_claims(paper)
    registry = load_registry() if overlay is None else overlay.apply_all(load_registry())
    body = render_md(cf, profile, judge_claims(cf, profile, store, registry), store, heading=False, registry=registry)
    return ["", "## Claims", "", f"From `semcl claims {paper} --profile {profile}` ({cf.path}):", "", body.rstrip()]


def build_report(paper: str, profile: str, store: Store, out_dir: Path, overlay=None) -> tuple[str, Path]:
    """`overlay` (semcl.numbers.Overlay): the user's paper numbers, shown as user-supplied in every table."""
    from semcl.report.figures import write_figure

    lines = [f"# Reproduction report: {paper} (profile `{profile}`)", "",
             f"Rebuilt by `semcl report {paper} --profile {profile}` on {time.strftime('%Y-%m-%d %H:%M %Z')} from "
             f"`{store.root}`. Cells: ours mean ± sample std (n), then / paper / Δ in the columns that have a paper "
             "value; * = |Δ| > 2 std.", "",
             "| Table | Source | Rows implemented | Runs done | Cells with a paper value | Cells flagged * |",
             "|---|---|---|---|---|---|"]
    sections = []
    for table in paper_tables(paper):
        table = overlay.apply(table) if overlay is not None else table
        impl = sum(r.implemented for r in table.rows)
        if profile not in table.profiles:
            lines.append(f"| `{table.id}` | {table.source} | {impl}/{len(table.rows)} | no `{profile}` profile | — | — |")
            continue
        runs = plan_runs(table, profile)
        done = sum(store.status(r.run_id)[0] == "done" for r in {r.run_id: r for r in runs}.values())
        unique = len({r.run_id for r in runs})
        summ = summary(table, profile, long_table(table, profile, store))
        known = int((~summ["paper"].isna()).sum()) if "paper" in summ else 0  # analytic figures: no cells
        lines.append(f"| `{table.id}` | {table.source} | {impl}/{len(table.rows)} | {done}/{unique} | {known} | "
                     f"{_flagged(summ) if done else '—'} |")
        if not done:
            continue
        body = render(table, profile, summ, "md")
        sections += ["", f"## `{table.id}`", "", body.rstrip()]
        if table.figure is not None:
            _, png = write_figure(table, profile, store, out_dir / "figures")
            sections += ["", f"![{table.id}](figures/{png.name})"]
    sections += _claims_section(paper, profile, store, overlay)
    text = "\n".join(lines + sections) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{paper}.{profile}.md"
    write_text_atomic(path, text)
    return text, path
