"""`semcl claims --against`: each claim judged on ours and on each other origin's runs, side by side.

Every origin's claims are judged exactly as `semcl claims` judges ours (semcl.report.claim_verdicts.judge_claims on
that origin's read-only store, Holm over each origin's own tests); a claim whose verdicts differ between ours and
an origin gets a line saying so under the table.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from semcl.csv_files import csv_text
from semcl.files import write_text_atomic
from semcl.report.claim_stats import rule_text
from semcl.report.claim_verdicts import Verdict, counts, judge_claims
from semcl.report.escape import md_cell, md_text
from semcl.report.origins import OURS, Origin


def judge_origins(paper: str, profile: str, ours, origins: list[Origin], registry=None, cf=None) -> dict[str, list[Verdict]]:
    """origin name -> its verdicts of the paper's claims (`cf`, default experiments/<paper>/claims.yaml), ours first."""
    from semcl.report.claims import load_claims

    cf = load_claims(paper) if cf is None else cf
    out = {OURS: judge_claims(cf, profile, ours, registry)}
    for o in origins:
        out[o.name] = judge_claims(cf, profile, o.store, registry)
    return out


def verdict_summary(v: Verdict) -> str:
    """Δ (p): the side's difference and Welch's p, or why there is none."""
    j = v.judgement
    if j is None:
        return f"— ({v.detail})" if v.detail else "—"
    p = "—" if math.isnan(j.p) else "< 0.001" if j.p < 0.001 else f"{j.p:.3f}"
    return f"{j.diff:+.2f} (n={j.n_a}/{j.n_b}, p={p})"


def disagreements(sides: dict[str, list[Verdict]]) -> list[str]:
    """One line per (claim, origin) whose verdict is not ours."""
    ours = sides[OURS]
    out = []
    for name, verdicts in sides.items():
        if name == OURS:
            continue
        for mine, theirs in zip(ours, verdicts, strict=True):
            if mine.verdict != theirs.verdict:
                out.append(f"`{mine.claim.id}`: {OURS} {mine.verdict}, {name} {theirs.verdict}: the origins disagree.")
    return out


def render_md(cf, profile: str, sides: dict[str, list[Verdict]], origins: list[Origin]) -> str:
    tallies = "; ".join(f"{name}: {', '.join(f'{n} {k}' for k, n in counts(v).items()) or 'no claims'}"
                        for name, v in sides.items())
    lines = [f"**Claims of {cf.paper} — profile {profile}, {' vs '.join(sides)}**: {tallies}", "",
             f"Rule (each origin's runs alone): {rule_text()}", "",
             *[f"- Origin {o.describe()}." for o in origins], ""]
    head = ["Claim", "Comparison"]
    for name in sides:
        head += [f"{name}: Δ = A − B (n, p)", f"{name}: verdict"]
    lines += ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for k, v in enumerate(sides[OURS]):
        cells = [f"`{v.claim.id}`", md_cell(v.claim.describe())]
        for verdicts in sides.values():
            cells += [md_cell(verdict_summary(verdicts[k])), md_cell(verdicts[k].verdict)]
        lines.append("| " + " | ".join(cells) + " |")
    differ = disagreements(sides)
    lines += ["", *([f"- {md_text(d)}" for d in differ] or ["- Every origin's verdicts agree with ours."])]
    return "\n".join(lines) + "\n"


FIELDS = ["id", "origin", "verdict", "agrees", "mean_a", "n_a", "mean_b", "n_b", "diff", "p", "p_holm", "detail"]


def claims_frame(sides: dict[str, list[Verdict]]) -> pd.DataFrame:
    """One line per (claim, origin): FIELDS; `agrees`: the verdict is ours (True on ours' own lines)."""
    out = []
    for name, verdicts in sides.items():
        for mine, v in zip(sides[OURS], verdicts, strict=True):
            j = v.judgement
            out.append({"id": v.claim.id, "origin": name, "verdict": v.verdict, "agrees": v.verdict == mine.verdict,
                        "mean_a": j.mean_a if j else math.nan, "n_a": j.n_a if j else 0,
                        "mean_b": j.mean_b if j else math.nan, "n_b": j.n_b if j else 0,
                        "diff": j.diff if j else math.nan, "p": j.p if j else math.nan, "p_holm": v.p_holm,
                        "detail": v.detail})
    return pd.DataFrame(out, columns=FIELDS)


def render_csv(sides: dict[str, list[Verdict]]) -> str:
    return csv_text(FIELDS, [[("" if isinstance(x, float) and math.isnan(x) else x) for x in rec.values()]
                             for rec in claims_frame(sides).to_dict("records")])


def render(cf, profile: str, sides: dict[str, list[Verdict]], origins: list[Origin], fmt: str) -> str:
    if fmt == "md":
        return render_md(cf, profile, sides, origins)
    if fmt == "csv":
        return render_csv(sides)
    raise ValueError(f"unknown format {fmt!r}")


def write_claims_against(paper: str, profile: str, store, fmt: str, origins: list[Origin], out_dir: Path | None = None,
                         overlay=None, seeds=None, sets=None, rows=None) -> tuple[str, Path]:
    """`semcl claims --against`: as semcl.report.claim_verdicts.write_claims (the same options), each claim judged
    on ours and on each origin, written to <out_dir or <store>/claims>/against-<names>/."""
    from semcl.report.claim_verdicts import claims_file_path, claims_inputs, with_variant_line
    from semcl.report.origins import slug

    cf, registry, variant = claims_inputs(paper, profile, overlay, seeds, sets, rows)
    sides = judge_origins(paper, profile, store, origins, registry, cf)
    text = render(cf, profile, sides, origins, fmt)
    text = with_variant_line(text, variant) if fmt == "md" else text
    path = claims_file_path(store, paper, profile, fmt, (out_dir or store.folders.claims()) / slug(origins), seeds, sets)
    write_text_atomic(path, text)
    return text, path
