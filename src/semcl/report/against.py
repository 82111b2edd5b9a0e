"""`semcl table --against`: per cell, ours and each other origin's mean ± std (n), Welch's p and a verdict.

The verdict is the claims' decision (semcl.report.claim_stats.judge) of "ours − theirs" against 0: "differs" when
the claims code would decide the difference (two-sided Welch p < alpha and the bootstrap interval of the
difference excluding 0, either sign: its `supported` or `contradicted`); "consistent" otherwise; "n too small"
when a side has fewer than two seeds (the claims' "inconclusive (n < 2)"), never a verdict; no verdict where a
side has no finished run.

Frame (`compare`): one line per (row, column, origin): origin, row, column, paper, mean, std, n and, on the other
origins' lines, p and verdict against ours. Markdown / LaTeX show it one line per cell, the origins side by side.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from semcl.csv_files import frame_csv_text
from semcl.registry.tables import Table
from semcl.report.claim_stats import ALPHA, CONTRADICTED, INCONCLUSIVE_FEW, RESAMPLES, SUPPORTED, judge
from semcl.report.escape import md_cell, md_text, tex_comment, tex_text
from semcl.report.origins import OURS, Origin

CONSISTENT, DIFFERS, FEW = "consistent", "differs", "n too small"
DASH = "—"
COMPARE_COLUMNS = ["origin", "row", "column", "paper", "mean", "std", "n", "p", "verdict"]


def cell_verdict(ours: list[float], theirs: list[float]) -> tuple[float, str]:
    """(Welch's two-sided p, verdict) of ours against theirs; (nan, "") when a side has no value."""
    if not ours or not theirs:
        return math.nan, ""
    j = judge(ours, theirs, "greater", 0.0)  # margin 0: H0 is "no difference", either sign decides
    if j.verdict == INCONCLUSIVE_FEW:
        return math.nan, FEW
    return j.p, DIFFERS if j.verdict in (SUPPORTED, CONTRADICTED) else CONSISTENT


def compare(table: Table, profile: str, long: pd.DataFrame, origins: list[str]) -> pd.DataFrame:
    """The per-cell comparison (module docstring) of the long table with an `origin` column (semcl.report.origins)."""
    values: dict[tuple[str, str, str], list[float]] = {}
    for rec in long.sort_values("seed").itertuples(index=False):
        values.setdefault((rec.origin, rec.row, rec.column), []).append(float(rec.value))
    out = []
    for row in table.rows:
        if not row.implemented:
            continue
        for col in table.columns:
            rep = row.reported.get(col.key)
            mine = values.get((OURS, row.label, col.key), [])
            for origin in origins:
                vals = values.get((origin, row.label, col.key), [])
                x = np.asarray(vals, dtype=np.float64)
                p, verdict = cell_verdict(mine, vals) if origin != OURS else (math.nan, "")
                out.append({"origin": origin, "row": row.label, "column": col.key,
                            "paper": rep.value if rep else math.nan,
                            "mean": float(x.mean()) if len(x) else math.nan,
                            "std": float(x.std(ddof=1)) if len(x) > 1 else math.nan, "n": len(x), "p": p,
                            "verdict": verdict})
    return pd.DataFrame(out, columns=COMPARE_COLUMNS)


def _side(s) -> str:
    if s["n"] == 0:
        return DASH
    return f"{s['mean']:.2f}" + (f" ± {s['std']:.2f}" if s["n"] > 1 else "") + f" (n={s['n']})"


def _p(p: float) -> str:
    return DASH if math.isnan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def cell_lines(table: Table, comp: pd.DataFrame, origins: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header, one line of cells per (row, column) with a finished run in some origin)."""
    labels = {c.key: c.label for c in table.columns}
    paper = bool(comp["paper"].notna().any()) if len(comp) else False
    head = ["Row", "Column", *(["Paper"] if paper else []), OURS]
    for name in origins[1:]:
        head += [name, f"p (Welch, {name})", f"{name} vs {OURS}"]
    body = []
    for (row, col), cell in comp.groupby(["row", "column"], sort=False):
        by = {s["origin"]: s for _, s in cell.iterrows()}
        if not any(by[o]["n"] for o in origins):
            continue
        first = by[OURS]
        line = [row, labels[col], *([DASH if math.isnan(first["paper"]) else f"{first['paper']:.2f}"] if paper else []),
                _side(first)]
        for name in origins[1:]:
            s = by[name]
            line += [_side(s), _p(s["p"]), s["verdict"] or DASH]
        body.append(line)
    return head, body


def tally(comp: pd.DataFrame) -> str:
    """"n consistent, m differs, k n too small" over the cells with a verdict."""
    parts = [f"{int((comp['verdict'] == v).sum())} {v}" for v in (CONSISTENT, DIFFERS, FEW)]
    return ", ".join(parts)


def against_notes(origins: list[Origin], comp: pd.DataFrame, long: pd.DataFrame) -> list[str]:
    level = round(100 * (1 - ALPHA))
    lines = ["Cell: mean ± sample std (ddof=1) over seeds (n) of each origin's runs of the same run ids, kept apart "
             "by origin (equal run ids from two origins are two runs). — = no finished run.",
             f"Verdict of ours − theirs: differs = Welch's t-test (two-sided, unequal variances) p < {ALPHA} and the "
             f"bootstrap {level}% interval of the difference ({RESAMPLES:,} resamples) excluding 0, the decision "
             "`semcl claims` makes (semcl.report.claim_stats); consistent otherwise; n too small with fewer than 2 "
             "seeds on a side."]
    lines += [f"Origin {o.describe()}." for o in origins]
    commits = long.attrs.get("commits") or {}
    for o in origins:
        seen = sorted({(c or "unknown")[:10] for (name, _), c in commits.items() if name == o.name})
        if seen:
            lines.append(f"Origin {o.name}: its runs' code commit(s): {', '.join(seen)}.")
    for name in dict.fromkeys(comp.loc[comp["origin"] != OURS, "origin"]):
        lines.append(f"{name} vs {OURS}: {tally(comp[comp['origin'] == name])}.")
    return lines


def render_against(table: Table, profile: str, comp: pd.DataFrame, fmt: str, origins: list[Origin],
                   long: pd.DataFrame) -> str:
    """The comparison in `fmt` (md, tex, csv, json)."""
    from semcl.report.tables import table_title

    order = [OURS, *(o.name for o in origins)]
    title = f"{table_title(table, profile)}, {' vs '.join(order)}"
    if fmt == "csv":
        return frame_csv_text(comp)
    if fmt == "json":
        cells = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()}
                 for rec in comp.to_dict("records")]
        return json.dumps({"table": table.id, "profile": profile, "origins": [
            {"name": OURS, "kind": "results root", "path": None}, *[
                {"name": o.name, "kind": o.kind, "path": str(o.root)} for o in origins]],
            "cells": cells, "notes": against_notes(origins, comp, long)}, indent=1, default=_json_default) + "\n"
    head, body = cell_lines(table, comp, order)
    notes = against_notes(origins, comp, long)
    if fmt == "md":
        lines = [f"**{md_text(title)}**", "", "| " + " | ".join(md_cell(h) for h in head) + " |",
                 "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(md_cell(c) for c in line) + " |" for line in body]
        return "\n".join([*lines, "", *[f"- {md_text(n)}" for n in notes]]) + "\n"
    if fmt == "tex":
        lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\caption{{{tex_text(title)}}}",
                 r"\begin{tabular}{ll" + "c" * (len(head) - 2) + "}", r"\toprule",
                 " & ".join(tex_text(h) for h in head) + r" \\", r"\midrule"]
        lines += [" & ".join(tex_text(c) for c in line) + r" \\" for line in body]
        lines += [r"\bottomrule", r"\end{tabular}", "", *[tex_comment(n) for n in notes], r"\end{table}"]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown format {fmt!r}")


def write_against(table: Table, profile: str, ours, origins: list[Origin], fmt: str, out_dir=None):
    """Render the comparison and write it to <out_dir>/<table>.<profile>.<fmt> (default: <your store>/tables/
    against-<names>/): (text, path). Nothing is written into an origin."""
    from pathlib import Path

    from semcl.files import write_text_atomic
    from semcl.report.origins import long_with_origins, names, slug

    long = long_with_origins(table, profile, ours, origins)
    text = render_against(table, profile, compare(table, profile, long, names(origins)), fmt, origins, long)
    out_dir = Path(out_dir) if out_dir else ours.folders.tables() / slug(origins)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{table.id.replace('/', '_')}.{profile}.{fmt}"
    write_text_atomic(path, text)
    return text, path


def _json_default(value):
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    raise TypeError(f"not JSON: {type(value).__name__}")
