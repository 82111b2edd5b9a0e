"""The README's result tables, regenerated from the stored runs (`semcl readme`).

A block in the README

    <!-- semcl:table rince/tab2 mini -->
    ...anything...
    <!-- /semcl -->

is replaced by the table's compact form: one line per implemented row, ours as mean ± sample std
over the seeds found (n noted in a column's cell only when a seed is missing), columns that this
profile does not measure (a substitute of null) left out, column labels with the profile's
substitute dataset. `<!-- semcl:table ID PROFILE rows=REGEX -->` keeps only the rows whose label
matches REGEX (e.g. one teacher / student pair of a distillation table). A block whose table has no
finished run of that profile in the store is left as it is (so a README filled from several stores --
the demo's, a cluster's -- is rebuilt store by store, never emptied). Every block is rendered before the
file is written (atomically), so a bad block leaves the README as it was.

Beside the page, `semcl readme` keeps the per-seed values every rewritten block averages (run id, row, seed, the
code commit it ran at, its metrics: semcl.report.run_values, as `semcl report --runs-file` keeps a paper page's) in
`reproduce/<page>.runs.json`: a test retrains some of them and compares bit
for bit, so a change of the code that moves a published number fails until the block is rebuilt.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from semcl.errors import ConfigError
from semcl.files import write_text_atomic
from semcl.report.escape import md_cell

BLOCK = re.compile(r"(?P<open><!-- semcl:table (?P<table>\S+) (?P<profile>\S+)(?: rows=(?P<rows>[^\n]*?))? -->\n)"
                   r"(?P<body>.*?)(?P<close><!-- /semcl -->)", re.S)
DASH = "—"


def compact_table(table, profile: str, store, rows: str | None = None) -> str:
    """Markdown: | Row | column labels | with `mean ± std` cells (see the module docstring)."""
    from semcl.evals.protocols import is_measured
    from semcl.report.tables import long_table, summary

    subst = table.profile(profile).substitute
    cols = [c for c in table.columns if is_measured(c, table.columns, subst)]
    summ = summary(table, profile, long_table(table, profile, store)).set_index(["row", "column"])
    seeds = len(table.seeds_for(profile))

    def label(col) -> str:
        out = getattr(col, "out", None)
        return f"{col.label} (→ {subst[out]})" if out and subst.get(out) else col.label

    def cell(row: str, key: str) -> str:
        s = summ.loc[(row, key)]
        if s["n"] == 0:
            return DASH
        spread = f" ± {s['std']:.2f}" if s["n"] > 1 and not math.isnan(s["std"]) else ""
        missing = f" (n={int(s['n'])})" if s["n"] < seeds else ""
        imported = " ‡ (imported)" if s.get("imported") else ""  # semcl results import: not a run of semcl
        return f"{s['mean']:.2f}{spread}{missing}{imported}"

    lines = ["| Row | " + " | ".join(md_cell(label(c)) for c in cols) + " |", "|" + "---|" * (len(cols) + 1)]
    keep = re.compile(rows) if rows else None
    for row in table.rows:
        imported = any(summ.loc[(row.label, c.key)].get("imported") for c in cols)  # a row run by another tool
        if (row.implemented or imported) and (keep is None or keep.search(row.label)):
            lines.append(f"| {md_cell(row.label)} | " + " | ".join(cell(row.label, c.key) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def update_readme(path: Path, store, get_table, runs: list[dict] | None = None) -> list[tuple[str, str]]:
    """Rewrite every marked block of `path` whose table has runs in `store`; returns (table, profile) of
    each rewritten block, and appends each block's runs (semcl.report.run_values.table_values) to `runs` when
    given. ConfigError naming the file and the block for an unknown table or profile."""
    from semcl.registry.plan import plan_runs

    text = path.read_text()
    done: list[tuple[str, str]] = []

    def render(m: re.Match) -> str:
        table_id, profile = m["table"], m["profile"]
        try:
            table = get_table(table_id)
            table.profile(profile)
            if m["rows"] is not None:
                re.compile(m["rows"])
        except (ConfigError, KeyError, ValueError, re.error) as err:
            line = text[:m.start()].count("\n") + 1
            raise ConfigError(f"{path}:{line}: block 'semcl:table {table_id} {profile}': {err}") from None
        if not any(store.metrics_path(r.run_id).exists() for r in plan_runs(table, profile)):
            return m.group(0)  # no runs here: keep what the block says
        done.append((table_id, profile))
        if runs is not None:
            from semcl.report.run_values import table_values

            runs.extend(table_values(table, profile, store, m["rows"]))
        return m["open"] + compact_table(table, profile, store, m["rows"]) + m["close"]

    new = BLOCK.sub(render, text)
    if new != text:
        write_text_atomic(path, new)
    return done
