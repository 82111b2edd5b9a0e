"""Judge a paper's claims from the stored runs and render the verdict table (Markdown / CSV).

The per-seed values are read exactly as `semcl table` reads them (semcl.report.tables.long_table:
one value per finished run of the profile, at the column's metric key). A claim with no finished
run on a side, on a table not registered yet, on a row without training code or on a column the
profile does not measure says so instead of a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from semcl.csv_files import csv_text
from semcl.errors import ConfigError
from semcl.evals.protocols import is_measured
from semcl.files import write_text_atomic
from semcl.locations import shown_path
from semcl.registry.tables import Table, load_registry
from semcl.report.claim_seeds import seeds_lines
from semcl.report.claim_stats import CONTRADICTED, INCONCLUSIVE, INCONCLUSIVE_FEW, SUPPORTED, Judgement, holm, judge, rule_text
from semcl.report.claims import Claim, ClaimsFile, load_claims
from semcl.report.escape import md_cell, md_text
from semcl.store import Store

USER = "user-supplied"  # = semcl.report.user_numbers.USER

MISSING = "missing runs"
NOT_MEASURED = "not measured"
DASH = "—"
ORDER = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, INCONCLUSIVE_FEW, MISSING, NOT_MEASURED)


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str  # one of ORDER
    detail: str = ""  # why there is no test (missing / not measured)
    judgement: Judgement | None = None
    same_as: str | None = None  # an earlier claim of the file that makes the very same comparison: counted once
    p_holm: float = math.nan  # Welch's p adjusted by Holm over the file's distinct tested comparisons


def _values(long, row: str, column: str) -> list[float]:
    if not len(long):
        return []
    sel = long[(long.row == row) & (long.column == column)].sort_values("seed")
    return [float(v) for v in sel.value]


def judge_claim(claim: Claim, profile: str, store: Store, registry: dict[str, Table], longs: dict) -> Verdict:
    """One claim's verdict; `longs` caches each table's long table across the claims of a file."""
    from semcl.report.tables import long_table

    table = registry.get(claim.table)
    if table is None:
        return Verdict(claim, MISSING, f"table {claim.table} is not registered yet")
    if profile not in table.profiles:
        return Verdict(claim, MISSING, f"table {claim.table} has no profile {profile!r}")
    if claim.table not in longs:
        longs[claim.table] = long_table(table, profile, store)
    for label in (claim.a, claim.b):
        # a row without training code is judged on results imported from another tool (semcl results import)
        if label is not None and not table.row(label).implemented and not _values(longs[claim.table], label, claim.column):
            return Verdict(claim, MISSING, f"row {label!r} is not implemented")
    col = next(c for c in table.columns if c.key == claim.column)
    if not is_measured(col, table.columns, table.profile(profile).substitute):
        why = "the suite does not measure it" if col.eval == "reported" else f"profile {profile!r} does not measure it"
        return Verdict(claim, NOT_MEASURED, f"column {claim.column}: {why}")
    a = _values(longs[claim.table], claim.a, claim.column)
    # a derived row (a difference per seed) against 0: Welch's t with a zero-variance side is the one-sample t
    b = _values(longs[claim.table], claim.b, claim.column) if claim.b is not None else [0.0] * len(a)
    if not a or not b:
        return Verdict(claim, MISSING, f"finished runs: A n={len(a)}, B n={len(b)}")
    j = judge(a, b, claim.direction, claim.margin)
    return Verdict(claim, j.verdict, "", j)


def judge_claims(cf: ClaimsFile, profile: str, store: Store, registry: dict[str, Table] | None = None) -> list[Verdict]:
    """Every claim's verdict. Two sentences that read the very same comparison (table, column, rows, direction,
    margin) are one test: the later carries `same_as` and is not counted again, in the tally or in Holm's m."""
    registry = load_registry() if registry is None else registry
    longs: dict = {}
    first: dict[tuple, str] = {}
    verdicts = []
    for c in cf.claims:
        key = (c.table, c.column, c.a, c.b, c.direction, c.margin)
        v = judge_claim(c, profile, store, registry, longs)
        verdicts.append(v if key not in first else replace(v, same_as=first[key]))
        first.setdefault(key, c.id)
    tested = [i for i, v in enumerate(verdicts) if v.same_as is None and v.judgement is not None
              and not math.isnan(v.judgement.p)]
    adjusted = dict(zip(tested, holm([verdicts[i].judgement.p for i in tested]), strict=True))
    by_id = {verdicts[i].claim.id: p for i, p in adjusted.items()}
    return [replace(v, p_holm=adjusted[i] if i in adjusted else by_id.get(v.same_as or "", math.nan))
            for i, v in enumerate(verdicts)]


def _num(x: float, fmt: str = ".2f") -> str:
    return DASH if x is None or math.isnan(x) else format(x, fmt)


def _side(mean: float, std: float, n: int) -> str:
    return f"{mean:.2f}" + (f" ± {std:.2f}" if n > 1 else "") + f" (n={n})"


def _p(p: float) -> str:
    return DASH if math.isnan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    """Verdicts per kind, each distinct comparison once."""
    return {k: n for k in ORDER if (n := sum(v.verdict == k and v.same_as is None for v in verdicts))}


def holm_line(verdicts: list[Verdict], alpha: float = 0.05) -> str:
    """How many of the distinct tested comparisons keep p < alpha after Holm's correction."""
    tested = [v for v in verdicts if v.same_as is None and not math.isnan(v.p_holm)]
    if not tested:
        return ""
    kept = sum(v.p_holm < alpha and v.verdict in (SUPPORTED, CONTRADICTED) for v in tested)
    return (f"Corrected for testing {len(tested)} comparisons at once (Holm, column p (Holm)): {kept} of the "
            f"{sum(v.verdict in (SUPPORTED, CONTRADICTED) for v in tested)} decided verdicts keep p < {alpha}.")


def user_paper_diff(c: Claim, registry: dict[str, Table]) -> tuple[str, list[str]]:
    """(" (+x.xx†)", source lines) when the claim states no difference but the user supplied the paper's values
    of its rows (semcl numbers): the paper's A − B from them (− 0 for a derived row); else ("", [])."""
    table = registry.get(c.table)
    if c.stated is not None or table is None:
        return "", []
    reps = [r.reported.get(c.column) for label in (c.a, c.b) if label is not None
            for r in table.rows if r.label == label]
    if len(reps) != (2 if c.b is not None else 1) or None in reps or not any(r.provenance == USER for r in reps):
        return "", []
    diff = reps[0].value - (reps[1].value if c.b is not None else 0.0)
    srcs = [f"{label}: {r.value:g} [{r.provenance}] ({r.source})" for label, r in zip((c.a, c.b), reps, strict=False)]
    return f" ({diff:+.2f}†)", [f"`{c.id}`: † paper Δ from the paper values {'; '.join(srcs)}"]


CLAIM_HEADER = ["Claim", "Comparison", "A: mean ± std (n)", "B: mean ± std (n)", "Δ = A − B (paper)", "p (Welch)",
                "p (Holm)", "95% CI of Δ", "Verdict"]


def claim_cells(v: Verdict, registry: dict[str, Table]) -> tuple[list[str], list[str]]:
    """The cells after Claim and Comparison (CLAIM_HEADER), and the user-supplied source lines they cite."""
    c, j = v.claim, v.judgement
    paper, said = user_paper_diff(c, registry)
    paper = f" ({c.stated:+g})" if c.stated is not None else paper
    if j is None:
        return [DASH, DASH, DASH + paper, DASH, DASH, DASH, f"{v.verdict}: {v.detail}"], said
    verdict = v.verdict + (f" (the comparison of `{v.same_as}`, counted once)" if v.same_as else "")
    return [_side(j.mean_a, j.std_a, j.n_a), _side(j.mean_b, j.std_b, j.n_b), f"{j.diff:+.2f}{paper}", _p(j.p),
            _p(v.p_holm), f"[{_num(j.ci_low)}, {_num(j.ci_high)}]" if j.n_a > 1 and j.n_b > 1 else DASH, verdict], said


def render_md(cf: ClaimsFile, profile: str, verdicts: list[Verdict], store: Store, heading: bool = True,
              registry: dict[str, Table] | None = None) -> str:
    tally = ", ".join(f"{n} {k}" for k, n in counts(verdicts).items()) or "no claims"
    lines = [f"**Claims of {cf.paper} — profile {profile}**: {tally} (runs from `{shown_path(store.root)}`, claims from "
             f"`{shown_path(cf.path)}`)", ""] if heading else [f"{tally}.", ""]
    lines += [f"Rule: {rule_text()}", ""]
    if holm_line(verdicts):
        lines += [holm_line(verdicts), ""]
    # the scale the numbers come from: a smoke or mini profile is not the paper's experiment
    registry = load_registry() if registry is None else registry  # with the user's numbers (semcl numbers)
    user_lines: list[str] = []
    for tid in dict.fromkeys(c.table for c in cf.claims):
        table = registry.get(tid)
        if table is not None and profile in table.profiles and table.profiles[profile].note:
            lines.append(f"- Profile {profile} of {tid}: {table.profiles[profile].note}")
    if lines[-1] != "":
        lines.append("")
    lines += ["| " + " | ".join(CLAIM_HEADER) + " |", "|" + "---|" * len(CLAIM_HEADER)]
    for v in verdicts:
        cells, said = claim_cells(v, registry)
        user_lines += said
        lines.append(f"| `{v.claim.id}` | {md_cell(v.claim.describe())} | " + " | ".join(md_cell(c) for c in cells) + " |")
    if user_lines:
        lines += ["", "User-supplied paper values (semcl numbers list):", *[f"- {md_text(x)}" for x in user_lines]]
    lines += ["", f"Seeds each claim needs (profile {profile}; what the undecided ones still need and cost: "
                  f"`semcl claims {cf.paper} --plan --profile {profile}`):", *[f"- {x}" for x in
                                                                              seeds_lines(cf, profile, registry)]]
    lines += ["", "Quotes (provenance; source) → claims:", *[f"- {q}" for q in quote_lines(cf)]]
    if cf.not_decidable:
        lines += ["", "Quantitative sentences no comparison of runs can decide:"]
        lines += [f"- {u}" for u in undecidable_lines(cf)]
    return "\n".join(lines) + "\n"


def quote_lines(cf: ClaimsFile) -> list[str]:
    """One line per quoted sentence: the quote, its provenance and source, and the claims it backs."""
    quotes: dict[tuple, list[Claim]] = {}
    for c in cf.claims:
        quotes.setdefault((c.quote, c.provenance, c.source), []).append(c)
    out = []
    for (quote, prov, source), cs in quotes.items():
        by_note: dict[str, list[str]] = {}
        for c in cs:
            if c.note:
                by_note.setdefault(c.note, []).append(c.id)
        # a note shared by every claim of the quote is printed once, without ids
        notes = "; ".join(n if len(ids) == len(cs) else f"{', '.join(ids)}: {n}" for n, ids in by_note.items())
        out.append(f"\"{quote.strip()}\" ({prov}; {source}) → {', '.join(f'`{c.id}`' for c in cs)}"
                   + (f". Note: {notes}" if notes else ""))
    return out


def undecidable_lines(cf: ClaimsFile) -> list[str]:
    return [f"\"{u.quote.strip()}\" ({u.provenance}; {u.source}): {u.reason}" for u in cf.not_decidable]


CSV_FIELDS = ["id", "table", "column", "a", "b", "direction", "margin", "stated", "mean_a", "std_a", "n_a", "mean_b",
              "std_b", "n_b", "diff", "p", "p_holm", "ci_low", "ci_high", "verdict", "same_as", "detail", "provenance",
              "source", "quote", "reading"]


def render_csv(verdicts: list[Verdict]) -> str:
    rows = []
    for v in verdicts:
        c, j = v.claim, v.judgement
        row = {"id": c.id, "table": c.table, "column": c.column, "a": c.a, "b": c.b or "", "direction": c.direction,
               "margin": c.margin, "stated": "" if c.stated is None else c.stated, "verdict": v.verdict,
               "detail": v.detail, "provenance": c.provenance, "source": c.source, "quote": c.quote.strip(),
               "same_as": v.same_as or "", "reading": c.reading, "p_holm": "" if math.isnan(v.p_holm) else v.p_holm}
        if j is not None:
            row.update({k: ("" if isinstance(x, float) and math.isnan(x) else x) for k, x in (
                ("mean_a", j.mean_a), ("std_a", j.std_a), ("n_a", j.n_a), ("mean_b", j.mean_b), ("std_b", j.std_b),
                ("n_b", j.n_b), ("diff", j.diff), ("p", j.p), ("ci_low", j.ci_low), ("ci_high", j.ci_high))})
        rows.append([row.get(f, "") for f in CSV_FIELDS])
    return csv_text(CSV_FIELDS, rows)


def on_variants(cf: ClaimsFile, registry: dict[str, Table], profile: str, sets: list[str],
                rows: list[str] | None) -> tuple[ClaimsFile, dict[str, Table], str]:
    """`claims --set`: the claims' tables with their variant rows, each claim on a varied row reading the variant
    (its label, so its runs); the line the page's header gains."""
    from semcl.registry.set_options import sweep_text
    from semcl.registry.variant_views import one_variant, vary_tables

    one_variant(sets, "claims")
    ids = [tid for tid in dict.fromkeys(c.table for c in cf.claims) if tid in registry]
    varied, labels_of = vary_tables([registry[tid] for tid in ids], sets, rows, profile)
    registry = {**registry, **{t.id: t for t in varied}}

    def swap(c: Claim) -> Claim:
        mine = labels_of.get(c.table, {})
        return replace(c, a=mine.get(c.a, c.a), b=mine.get(c.b, c.b) if c.b is not None else None)

    n = sum(len(m) for m in labels_of.values())
    line = (f"Variant `--set {sweep_text(sets)}`: a claim on one of the {n} varied row(s) reads its variant's runs "
            "(the row's label with the settings in [...]); the other rows are the registered ones.")
    return replace(cf, claims=tuple(swap(c) for c in cf.claims)), registry, line


def claims_inputs(paper: str, profile: str, overlay=None, seeds: int | list[int] | None = None,
                  sets: list[str] | None = None, rows: list[str] | None = None) -> tuple[ClaimsFile, dict, str]:
    """(the claims, the registry they are judged on, the variant line) as `semcl claims` options ask for them."""
    cf = load_claims(paper)
    registry = load_registry() if overlay is None else overlay.apply_all(load_registry())
    if seeds is not None:  # --seeds: the runs of these seeds (semcl.registry.seeds)
        from semcl.registry.seeds import with_seeds

        registry = {tid: with_seeds(t, profile, seeds) for tid, t in registry.items()}
    variant = ""
    if sets:
        cf, registry, variant = on_variants(cf, registry, profile, sets, rows)
    elif rows:
        raise ConfigError("--row selects the rows --set varies in `semcl claims`; add --set key=value")
    return cf, registry, variant


def with_variant_line(text: str, variant: str) -> str:
    """The Markdown page with the variant line after its heading line and blank line."""
    if not variant:
        return text
    head, rest = text.split("\n\n", 1)
    return f"{head}\n\n{variant}\n\n{rest}"


def claims_file_path(store: Store, paper: str, profile: str, fmt: str, out_dir: Path | None = None,
                     seeds: int | list[int] | None = None, sets: list[str] | None = None) -> Path:
    """<out_dir>/[variants/<slug>/]<paper>.<profile>[.<seeds tag>].<fmt>, its folder made (default: <store>/claims)."""
    out_dir = out_dir or store.folders.claims()
    if sets:  # beside the default page, never over it
        from semcl.registry.set_options import slug
        from semcl.store.root import VARIANTS

        out_dir = out_dir / VARIANTS / slug(sets)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = "" if seeds is None else "." + ("seeds-" + "-".join(map(str, seeds)) if isinstance(seeds, list)
                                          else f"{seeds}-seeds")  # beside the default page, never over it
    return out_dir / f"{paper}.{profile}{tag}.{fmt}"


def write_claims(paper: str, profile: str, store: Store, fmt: str, out_dir: Path | None = None,
                 overlay=None, seeds: int | list[int] | None = None, sets: list[str] | None = None,
                 rows: list[str] | None = None) -> tuple[str, Path]:
    """Judge the paper's claims, render them and write <out_dir>/<paper>.<profile>.<fmt> (default: <store>/claims);
    `overlay` (semcl.report.user_numbers.Overlay): the user's paper numbers, shown as the paper's Δ where a claim
    states none; `sets` / `rows` (--set / --row): judged on the variant rows, written under variants/<slug>/."""
    cf, registry, variant = claims_inputs(paper, profile, overlay, seeds, sets, rows)
    verdicts = judge_claims(cf, profile, store, registry)
    if fmt == "md":
        text = with_variant_line(render_md(cf, profile, verdicts, store, registry=registry), variant)
    elif fmt == "csv":
        text = render_csv(verdicts)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    path = claims_file_path(store, paper, profile, fmt, out_dir, seeds, sets)
    write_text_atomic(path, text)
    return text, path
