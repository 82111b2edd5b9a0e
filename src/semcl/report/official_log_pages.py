"""`semcl report <paper> --html --official-log <table>=<file>`: per such table, the curves figure of
semcl.report.curves with the authors' training log (semcl.report.official_logs) drawn beside our runs, for the page.

Every log is read before anything is drawn, so a log of no known format, a pair without `=` or a table of another
paper stops the command in one line with nothing written. The figures go to <out>/curves/ (PNG + CSV)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from semcl.errors import ConfigError
from semcl.registry.tables import Table

HEADING = "Training curves beside the authors' logs"


@dataclass
class OfficialCurve:
    """One table's loss curves beside one official log: what the page embeds and names."""

    table: Table
    log: Path  # the authors' log, as the user named it
    fmt: str  # its format (official_logs.FORMATS)
    epochs: int  # epochs the log holds
    png: Path


def split_pairs(pairs: list[str], tables: list[Table]) -> list[tuple[Table, Path]]:
    """`--official-log TABLE=FILE` values onto the paper's tables; ConfigError naming the value otherwise."""
    by_id = {t.id: t for t in tables}
    out = []
    for pair in pairs:
        table_id, eq, file = pair.partition("=")
        if not eq or not table_id or not file:
            raise ConfigError(f"--official-log {pair!r}: expected TABLE=FILE, e.g. gpaco/imagenet-lt=train.log")
        if table_id not in by_id:
            raise ConfigError(f"--official-log {pair!r}: {table_id!r} is no table of this paper "
                              f"(its tables: {', '.join(sorted(by_id))})")
        if any(t.id == table_id for t, _ in out):  # one figure per table: a second log would overwrite it
            raise ConfigError(f"--official-log {pair!r}: table {table_id} is named twice; one log per table")
        out.append((by_id[table_id], Path(file)))
    return out


def read_official_logs(pairs: list[str], tables: list[Table]) -> list[tuple[Table, Path, str, object]]:
    """(table, file, format, per-epoch frame) per pair, every log read before anything is written."""
    from semcl.report.official_logs import parse_log

    return [(table, path, *parse_log(path, hint="")) for table, path in split_pairs(pairs, tables)]  # detected


def official_curves(logs: list[tuple], profile: str, store, out_dir: Path, metric: str = "loss") -> list[OfficialCurve]:
    """Per log read, write_curves of its table (our runs of `profile`, none yet is fine) with the log beside."""
    from semcl.report.curves import write_curves

    out = []
    for table, path, fmt, log in logs:
        _, png = write_curves(table, profile, store, Path(out_dir) / "curves", metric=metric,
                              official=(fmt, log, str(path)))
        out.append(OfficialCurve(table, path, fmt, len(log), png))
    return out


def caption(curve: OfficialCurve) -> str:
    """The line under the figure: which file the authors' curve is, in what format, where the points are."""
    return (f"{curve.table.id}: our training loss per epoch (mean, min–max over seeds) beside the authors' log "
            f"`{curve.log}` (format {curve.fmt}, {curve.epochs} epochs, dashed black); the points also in "
            f"`curves/{curve.png.with_suffix('.csv').name}`")
