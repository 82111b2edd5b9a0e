"""`--set` on the commands that read several tables at once (`claims`, `report`) and on one run (`export`):
each table some key applies to is shown with its variants beside the registered rows (as `table --set`), and,
for a single variant, which variant label stands for which registered row (a claim on a varied row reads the
variant's runs; `export <table> <row> --set` exports the variant's run)."""

from __future__ import annotations

from semcl.errors import ConfigError
from semcl.registry.set_options import parse_grid, sweep_text
from semcl.registry.variant_rows import no_row_has, print_notes, unknown_row, vary_grid

__all__ = ["one_variant", "vary_tables"]


def vary_tables(tables: list, texts: list[str], rows: list[str] | None, profile: str) -> tuple[list, dict]:
    """(the tables, each one a key applies to with its variants beside its rows; {table id: {registered label:
    variant label}} when the settings make one variant, {} for a sweep). Tables without `profile` stay as they
    are; no table varied at all is the error `table --set` gives."""
    for label in rows or []:
        if not any(label in (r.label for r in t.rows) for t in tables):
            raise unknown_row(label, tables)
    grid, notes, out, labels_of, any_varied = parse_grid(texts), [], [], {}, False
    for table in tables:
        mine = [r.label for r in table.rows if r.label in rows] if rows else None
        if profile not in table.profiles or (rows and not mine):
            out.append(table)
            continue
        varied, labels = vary_grid(table, grid, mine, profile, notes)
        out.append(varied if labels else table)
        any_varied = any_varied or bool(labels)
        if labels and len(grid) == 1:  # vary_grid keeps each variant right after its registered row
            names = [r.label for r in varied.rows]
            labels_of[table.id] = {names[names.index(v) - 1]: v for v in labels}
    if not any_varied:
        raise no_row_has(texts, grid, ", ".join(t.id for t in tables))
    print_notes(notes)
    return out, labels_of


def one_variant(texts: list[str], command: str) -> None:
    """A command that reads one variant per row refuses a sweep with one line."""
    if len(parse_grid(texts)) > 1:
        raise ConfigError(f"--set {sweep_text(texts)}: `semcl {command}` reads one variant at a time; give one "
                          "value per key (one command per value)")
