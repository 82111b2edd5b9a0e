"""Paper-vs-ours tables: all run records -> one long pandas table -> Markdown / LaTeX / CSV.

Per cell: ours as mean ± sample std (ddof=1) with n seeds, then, in a column where the paper gives
at least one value, the paper's value ("—" when unknown for that row) and the difference; a column
(or a whole table) without any paper value shows ours alone. A missing seed lowers n; it never
breaks the table.

A derived row (registry `derived: {pairs: [[A, B], ...]}`, e.g. the SCNS gains the paper reports
as "+1.72 over KD") gets, per seed s and column c, d_s = (1/P) Σ_p (A_p[s, c] − B_p[s, c]) over
its P pairs, only for seeds where every pair has both runs; its cell is then mean ± std of d_s.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from semcl.csv_files import frame_csv_text
from semcl.errors import ResultsError
from semcl.evals.protocols import EVALUATIONS, describe, metric_key
from semcl.files import write_text_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Row, Table
from semcl.report.environment_notes import MIXED_ENV, environment_notes, mixed_environments
from semcl.report.escape import md_cell, md_text, tex_comment, tex_text
from semcl.runtime.environment import results_key
from semcl.store import Store

DASH = "—"


def _number(store: Store, run_id: str, key: str, value: object) -> float:
    """A metric value as a float; ResultsError naming the record and key when it is not a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):  # pandas would drop a NaN ("n=1") and show inf as "inf ± nan"
            raise ResultsError(f"{store.metrics_path(run_id)}: key 'metrics.{key}' is {value!r}, not a finite "
                               "number; move the file away to rerun this run")
        return float(value)
    raise ResultsError(f"{store.metrics_path(run_id)}: key 'metrics.{key}' is {value!r}, not a number; "
                       "move the file away to rerun this run")


LONG_COLUMNS = ["table", "row", "column", "seed", "value", "run_id", "source"]
IMPORTED = "imported"  # = semcl.report.imported.RUN_ID: the run_id of a line imported from another tool


def select_row(long: pd.DataFrame, column: str, best: str) -> str | None:
    """The row label whose mean over seeds of `column` is the largest (best="max") or smallest
    ("min") in `long`; the first in table order on a tie; None when no row has that column."""
    vals = long[long["column"] == column]
    if not len(vals):
        return None
    means = vals.groupby("row", sort=False)["value"].mean()
    return str(means.idxmax() if best == "max" else means.idxmin())


def _selected(table: Table, row: Row, profile: str, store: Store) -> list[dict]:
    """The lines of a `select` row: every cell of the chosen row of the linked table (same column
    keys), relabelled; `source` names the chosen row."""
    sel = row.select
    src = table.linked[sel.table]
    src_long = long_table(src, profile, store)
    chosen = select_row(src_long, sel.column, sel.best)
    if chosen is None:
        return []
    keys = {c.key for c in table.columns}
    picked = src_long[(src_long["row"] == chosen) & src_long["column"].isin(keys)]
    return [{**line, "table": table.id, "row": row.label, "source": f"{src.id}: {chosen}"}
            for line in picked.to_dict("records")]


def long_table(table: Table, profile: str, store: Store) -> pd.DataFrame:
    """One line per (row, column, seed) with a finished value: table, row, column, seed, value, run_id,
    source (for a `select` row, "<table>: <chosen row>"; else empty)."""
    runs = plan_runs(table, profile)
    if any(r.released for r in table.rows):  # the released rows' evaluations: the file verified last for each,
        from semcl.engine.released import released_runs  # and the rows learning from them (a KD teacher's file)

        shown, files = released_runs(table, profile, store)
        runs = list({r.run_id: r for r in [*plan_runs(table, profile, released=files), *shown]}.values())
    records = store.records([r.run_id for r in runs])
    check_world_sizes(table, profile, runs, records)
    subst = table.profile(profile).substitute
    lines = []
    for run in runs:
        rec = records.get(run.run_id)
        if rec is None:
            continue
        for col in table.columns:
            key = metric_key(col, subst)
            if key is not None and rec["metrics"].get(key) is not None:
                lines.append({"table": table.id, "row": run.row_label, "column": col.key, "seed": run.seed,
                              "value": _number(store, run.run_id, key, rec["metrics"][key]), "run_id": run.run_id,
                              "source": ""})
    lines += imported_lines(table, profile, store, lines)
    for row in table.rows:
        if row.select:
            lines += _selected(table, row, profile, store)
    lines += derived_lines(table, lines)
    lines += computed_lines(table, lines)
    long = pd.DataFrame(lines, columns=LONG_COLUMNS)
    # the code commit each record ran at (metrics.json `git.commit`): a table says when its cells mix commits
    long.attrs["commits"] = {rid: ((rec.get("git") or {}).get("commit") if isinstance(rec.get("git"), dict) else None)
                             for rid, rec in records.items()}
    # ... and the environment's fields that change numbers (runtime.environment.SAME_RESULTS; None: not recorded)
    long.attrs["environments"] = {rid: results_key(rec.get("environment")) for rid, rec in records.items()}
    return long


def imported_lines(table: Table, profile: str, store: Store, lines: list[dict]) -> list[dict]:
    """The cells of runs made by another tool (`semcl results import`, semcl.report.imported): run_id "imported",
    source "imported from <source>". A record of a row, column or seed the table no longer has is not shown
    (`semcl results list` names it); one that semcl's own run also measured is an error, never a mixed mean."""
    from semcl.report.imported import RUN_ID, load_imported, record_path

    keys, labels, seeds = {c.key for c in table.columns}, {r.label for r in table.rows}, set(table.seeds_for(profile))
    own = {(ln["row"], ln["column"], ln["seed"]): ln["run_id"] for ln in lines}
    out = []
    for rec in load_imported(store.root, table.id, profile):
        if rec.row not in labels or rec.column not in keys or rec.seed not in seeds:
            continue
        if (rec.row, rec.column, rec.seed) in own:
            raise ResultsError(f"{record_path(store.root, rec.cell)}: {rec.describe()} is also measured by semcl's "
                               f"run {own[(rec.row, rec.column, rec.seed)]}; `semcl results remove` one of them")
        out.append({"table": table.id, "row": rec.row, "column": rec.column, "seed": rec.seed, "value": rec.value,
                    "run_id": RUN_ID, "source": f"imported from {rec.source}"})
    return out


def check_world_sizes(table: Table, profile: str, runs: list, records: dict) -> None:
    """ResultsError (one line naming the runs) when finished runs of a row trained with a number of processes
    other than its registry row asks for (its GPUs, or its CPU tasks): a 4-GPU row trained as one process saw
    the whole global batch on one device, another optimisation under the same run id, and its cells would mix
    two readings. Records that predate the field are not checked."""
    for label in dict.fromkeys(r.row_label for r in runs):
        res = table.resources_for(label, profile)
        want = res.gpus or res.tasks
        odd = [(r.run_id, records[r.run_id].get("world_size")) for r in runs if r.row_label == label
               and r.run_id in records and records[r.run_id].get("world_size") not in (None, want)]
        if odd:
            shown = ", ".join(f"{rid} ({n} process{'es' if n != 1 else ''})" for rid, n in odd[:4])
            more = f" and {len(odd) - 4} more" if len(odd) > 4 else ""
            raise ResultsError(f"{table.id} row {label!r} ({profile}): the registry asks for {want} process(es) a run "
                               f"but {shown}{more} trained with another number; set those run folders aside and run "
                               "them again with the GPUs the row asks for (--executor slurm)")


def computed_lines(table: Table, lines: list[dict]) -> list[dict]:
    """The per-seed values of the columns the table computes from its other cells (an evaluation with `derive`,
    e.g. `eval: gain`), from the other lines."""
    computed = [(c, EVALUATIONS[c.eval].derive) for c in table.columns if EVALUATIONS[c.eval].derive is not None]
    if not computed:
        return []
    value = {(ln["row"], ln["column"], ln["seed"]): ln["value"] for ln in lines}
    seeds = sorted({ln["seed"] for ln in lines})
    keys = {c.key: c for c in table.columns}
    return [{"table": table.id, "row": row, "column": col.key, "seed": seed, "value": v, "run_id": "derived",
             "source": ""} for col, derive in computed for row, seed, v in derive(col, keys, value, seeds)]


def derived_lines(table: Table, lines: list[dict]) -> list[dict]:
    """The per-seed values of the derived rows: mean over pairs of (A − B), complete seeds only."""
    value = {(ln["row"], ln["column"], ln["seed"]): ln["value"] for ln in lines}
    seeds = sorted({ln["seed"] for ln in lines})
    out = []
    for row in table.rows:
        if not row.derived:
            continue
        for col in table.columns:
            for seed in seeds:
                diffs = [value[(a, col.key, seed)] - value[(b, col.key, seed)] for a, b in row.derived
                         if (a, col.key, seed) in value and (b, col.key, seed) in value]
                if len(diffs) == len(row.derived):  # a partial average would be a different quantity
                    out.append({"table": table.id, "row": row.label, "column": col.key, "seed": seed,
                                "value": sum(diffs) / len(diffs), "run_id": "derived", "source": ""})
    return out


def summary(table: Table, profile: str, long: pd.DataFrame) -> pd.DataFrame:
    """One line per (row, column): paper, provenance, mean, std, n, delta."""
    stats = long.groupby(["row", "column"])["value"].agg(["mean", "std", "count"]) if len(long) else None
    imported: dict[tuple[str, str], str] = {}  # (row, column) -> the sources of its imported values
    if len(long):
        for ln in long[long["run_id"] == IMPORTED].itertuples():
            said = imported.get((ln.row, ln.column), "")
            text = ln.source.removeprefix("imported from ")
            if text not in said.split("; "):
                imported[(ln.row, ln.column)] = f"{said}; {text}" if said else text
    out = []
    for row in table.rows:
        for col in table.columns:
            rep = row.reported.get(col.key)
            mean = std = float("nan")
            n = 0
            source = ""
            if row.select and len(long):
                src = long.loc[long["row"] == row.label, "source"]
                source = str(src.iloc[0]) if len(src) else ""
            if stats is not None and (row.label, col.key) in stats.index:
                s = stats.loc[(row.label, col.key)]
                mean, std, n = float(s["mean"]), float(s["std"]), int(s["count"])  # pandas std: ddof=1
            paper = rep.value if rep else float("nan")
            out.append({"row": row.label, "column": col.key, "implemented": row.implemented,
                        "paper": paper, "provenance": rep.provenance if rep else "", "mean": mean,
                        "std": std, "n": n, "delta": mean - paper, "source": source})
            if imported:  # the column exists only in a table with imported cells: other tables' CSV stays as it was
                out[-1]["imported"] = imported.get((row.label, col.key), "")
    summ = pd.DataFrame(out)
    summ.attrs["commits"] = dict(long.attrs.get("commits", {}))
    summ.attrs["mixed_env"] = mixed_environments(long)
    return summ



def _num(x: float) -> str:
    return DASH if math.isnan(x) else f"{x:.2f}"


def _ours(mean: float, std: float, n: int) -> str:
    if n == 0:
        return DASH
    spread = f" ± {std:.2f}" if n > 1 else ""
    return f"{mean:.2f}{spread} (n={n})"


USER = "†"  # marks a paper value the user supplied (semcl numbers), never the registry's
IMPORTED_MARK = "‡"  # marks ours measured by another tool (semcl results import), never a run of semcl


def _imported(s: pd.Series) -> bool:
    return bool(s.get("imported", ""))


def _paper(s: pd.Series) -> str:
    """The paper value; cross-check-only and user-supplied provenances are marked in the cell itself."""
    if math.isnan(s["paper"]):
        return DASH
    mark = (f" ({s['provenance']})" if s["provenance"] in ("secondary", "derived")
            else USER if s["provenance"] == "user-supplied" else "")
    return _num(s["paper"]) + mark


def paper_columns(summ: pd.DataFrame) -> set[str]:
    """The column keys with at least one paper value: only their cells show "/ paper / Δ"."""
    if not len(summ) or "paper" not in summ:
        return set()
    return set(summ.loc[~summ["paper"].isna(), "column"])


def _cell(s: pd.Series, with_paper: bool = True) -> str:
    """ours, plus " / paper / Δ" where the column has any paper value (`with_paper`)."""
    if not s["implemented"] and not _imported(s):
        return "not implemented" + ("" if math.isnan(s["paper"]) else f" / {_paper(s)}")
    ours = _ours(s["mean"], s["std"], s["n"]) + (f" {IMPORTED_MARK}" if _imported(s) else "")
    if not with_paper:
        return ours
    delta = _num(s["delta"])
    # flag a gap larger than twice the seed spread
    if not math.isnan(s["delta"]) and s["n"] > 1 and abs(s["delta"]) > 2 * s["std"]:
        delta += "*"
    return f"{ours} / {_paper(s)} / {delta}"


def cell_legend(table: Table, summ: pd.DataFrame | None) -> str:
    """What a cell holds, for the parts this rendering shows (`paper_columns`)."""
    ours = "ours mean ± sample std (ddof=1) over seeds (n)"
    known = paper_columns(summ) if summ is not None else {
        c.key for row in table.rows for c in table.columns if row.reported.get(c.key)}
    if not known:
        return f"Cell: {ours}; no paper value is known for this table. — = not run."
    full = f"{ours} / paper / Δ = ours − paper; * marks |Δ| > 2 std"
    labels = [c.label for c in table.columns if c.key in known]
    if len(labels) == len(table.columns):
        return f"Cell: {full}. — = unknown or not run."
    return (f"Cell: {full}, in the columns with a paper value ({', '.join(labels)}); {ours} alone in the "
            "others (no paper value known). — = unknown or not run.")


def user_notes(table: Table) -> list[str]:
    """One line per user-supplied paper value (semcl numbers): its source, and the registry value it overrides."""
    out = []
    for row in table.rows:
        for col in table.columns:
            rep = row.reported.get(col.key)
            if rep is None or rep.provenance != "user-supplied":
                continue
            over = "" if rep.overrides is None else (f"; overrides the registry's {rep.overrides.value:g} "
                                                     f"[{rep.overrides.provenance}] ({rep.overrides.source})")
            out.append(f"{USER} {row.label} / {col.label}: user-supplied paper value, source: {rep.source}{over}.")
    return out


def imported_notes(table: Table, summ: pd.DataFrame | None) -> list[str]:
    """One line per cell with values imported from another tool (semcl results import): where they came from."""
    if summ is None or "imported" not in summ:
        return []
    labels = {c.key: c.label for c in table.columns}
    return [f"{IMPORTED_MARK} {s.row} / {labels[s.column]}: imported from {s.imported} (semcl results import; "
            f"n={s.n}, not a run of semcl)." for s in summ.itertuples() if s.imported]


def same_as_notes(table: Table) -> list[str]:
    """One line per paper value shown from another entry (`same_as`): where the number is written."""
    labels = {c.key: c.label for c in table.columns}
    return [f"{row.label} / {labels[key]}: paper value {rep.value:g} [{rep.provenance}] is the number of "
            f"{rep.same_as} (held there once, shown here by reference)."
            for row in table.rows for key, rep in row.reported.items() if rep is not None and rep.same_as]


def selection_notes(table: Table, profile: str, summ: pd.DataFrame | None = None) -> list[str]:
    """One line per `select` row: the criterion and the row it chose (from `summary`'s source)."""
    labels = {c.key: c.label for c in table.columns}
    out = []
    for row in table.rows:
        if not row.select:
            continue
        sel = row.select
        crit = f"the row of {sel.table} with the {'largest' if sel.best == 'max' else 'smallest'} mean {labels[sel.column]}"
        src = ""
        if summ is not None and "source" in summ:
            found = summ.loc[(summ["row"] == row.label) & (summ["source"] != ""), "source"]
            src = str(found.iloc[0]) if len(found) else ""
        chosen = (f"chosen: {src.split(': ', 1)[1]!r} (its runs, no training of its own)" if src else
                  f"no run of {sel.table} has finished in profile {profile} (semcl run {sel.table} --profile {profile})")
        out.append(f"Row {row.label}: {crit}; {chosen}.")
    return out


def commit_notes(summ: pd.DataFrame | None) -> list[str]:
    """One line when the table's finished runs ran at more than one code commit (a record without one counts as
    'unknown'): numbers of different code side by side are the reader's to judge."""
    commits = (summ.attrs.get("commits") or {}) if summ is not None else {}
    count: dict[str, int] = {}
    for commit in commits.values():
        key = (commit or "unknown")[:10]
        count[key] = count.get(key, 0) + 1
    if len(count) < 2:
        return []
    parts = ", ".join(f"{c} ({n} run{'s' if n > 1 else ''})" for c, n in sorted(count.items(), key=lambda kv: -kv[1]))
    return [f"Code: the cells come from runs at {len(count)} commits: {parts}."]


def notes(table: Table, profile: str, summ: pd.DataFrame | None = None) -> list[str]:
    prof = table.profile(profile)
    lines = [
        cell_legend(table, summ),
        "Epoch rule: every number reads the final training checkpoint; "
        + "; ".join(f"{c.label}: {describe(c)}" for c in table.columns) + ".",
    ]
    from semcl.runtime.precision import FAST_NOTE, planned

    if planned() == "fast":  # every row of this rendering is a fast run (its own run ids)
        lines.insert(0, f"Precision of every row: {FAST_NOTE} (semcl --precision fast), not the papers' own arithmetic.")
    for out, sub in prof.substitute.items():
        lines.append(f"Profile {profile}: OOD set {out} " + (f"replaced by {sub}." if sub else "not measured."))
    if prof.note:
        lines.append(f"Profile {profile}: {prof.note}")
    for row in table.rows:
        if row.derived:
            a, b = row.derived[0]
            lines.append(f"Derived row {row.label!r}: per seed, the average over its {len(row.derived)} pair(s) of "
                         f"(method row − baseline row), e.g. {a!r} − {b!r}; then mean ± std over seeds "
                         "(a seed counts only when every pair has both runs).")
    released = [row for row in table.rows if row.released]
    if released:  # whose checkpoint each such row evaluates, and how
        lines.append("Released rows (" + ", ".join(repr(r.label) for r in released) + "): the authors' checkpoint "
                     "read into the network of the named row and evaluated here with these columns (semcl verify; "
                     "the file verified last, its sha256 in the run id); nothing of theirs is trained here. Paper "
                     "equal here: data and evaluation agree, a gap in the trained rows is training's; otherwise the "
                     "data or the evaluation differs.")
        learners = [row.label for row in table.rows if any(table.row(d).released for d in row.depends_on)]
        if learners:
            lines.append(f"Rows learning from the authors' checkpoints ({len(learners)}, e.g. {learners[0]!r}): they "
                         "distil from the released teacher file (its sha256 in their run ids and training keys; "
                         "semcl verify --students) and are the rows compared with the reported numbers; the rows of "
                         "the same label without the suffix distil from teachers trained here and stand in while the "
                         "files are absent.")
    from semcl.registry.released_teachers import NOTE

    lines += [n for n in table.notes if n.startswith(NOTE)]  # --teachers released: whose teachers these rows have
    provs = sorted({r.provenance for row in table.rows for r in row.reported.values() if r})
    lines.append("Paper values: " + (", ".join(provs) if provs else "no reported number is known for this table") + ".")
    lines += user_notes(table)
    lines += imported_notes(table, summ)
    lines += same_as_notes(table)
    lines += selection_notes(table, profile, summ)
    lines += commit_notes(summ)
    lines += environment_notes(summ)
    lines += [f"Deviation: {d}" for d in table.deviations]
    return lines


def wide_cells(table: Table, summ: pd.DataFrame) -> pd.DataFrame:
    """The rendered cell strings, rows (labels) in table order × column keys: what every format shows."""
    known = paper_columns(summ)
    mixed = summ.attrs.get("mixed_env") or {}
    cells = summ.apply(lambda s: _cell(s, s["column"] in known) + (f" {MIXED_ENV}" if (s["row"], s["column"]) in mixed
                                                                   else ""), axis=1) if len(summ) else []
    wide = summ.assign(cell=cells).pivot(index="row", columns="column", values="cell")
    return wide.loc[[r.label for r in table.rows], [c.key for c in table.columns]]


def table_title(table: Table, profile: str) -> str:
    return f"{table.id} ({table.source}): {table.title} — profile {profile}"


def render(table: Table, profile: str, summ: pd.DataFrame, fmt: str) -> str:
    labels = {c.key: c.label for c in table.columns}
    wide = wide_cells(table, summ)
    title = table_title(table, profile)
    if fmt == "csv":
        return frame_csv_text(summ)
    if fmt == "json":  # the summary's lines, NaN as null
        import json

        cells = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()}
                 for rec in summ.to_dict("records")]
        return json.dumps({"table": table.id, "profile": profile, "title": title, "cells": cells,
                           "notes": notes(table, profile, summ)}, indent=1, default=str) + "\n"
    if fmt == "md":
        head = "| Row | " + " | ".join(md_cell(labels[k]) for k in wide.columns) + " |"
        sep = "|" + "---|" * (len(wide.columns) + 1)
        body = ["| " + md_cell(r) + " | " + " | ".join(md_cell(c) for c in wide.loc[r]) + " |" for r in wide.index]
        return "\n".join([f"**{md_text(title)}**", "", head, sep, *body, "",
                          *[f"- {md_text(n)}" for n in notes(table, profile, summ)]]) + "\n"
    if fmt == "tex":
        lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\caption{{{tex_text(title)}}}",
                 r"\begin{tabular}{l" + "c" * len(wide.columns) + "}", r"\toprule",
                 "Row & " + " & ".join(tex_text(labels[k]) for k in wide.columns) + r" \\", r"\midrule"]
        lines += [tex_text(r) + " & " + " & ".join(tex_text(c) for c in wide.loc[r]) + r" \\" for r in wide.index]
        lines += [r"\bottomrule", r"\end{tabular}", "", *[tex_comment(n) for n in notes(table, profile, summ)],
                  r"\end{table}"]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown format {fmt!r}")


def write_table(table: Table, profile: str, store: Store, fmt: str, out_dir: Path | None = None) -> tuple[str, Path]:
    long = long_table(table, profile, store)
    text = render(table, profile, summary(table, profile, long), fmt)
    out_dir = out_dir or store.folders.tables()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{table.id.replace('/', '_')}.{profile}.{fmt}"
    write_text_atomic(path, text)
    return text, path
