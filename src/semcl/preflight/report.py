"""What a preflight found, per row (`RowCheck`), its table (`render`) and the per-table status file that
`semcl run --executor slurm` reads before submitting (`write_status`, `require_passed`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from semcl.errors import ResultsError
from semcl.files import write_json_atomic


@dataclass
class RowCheck:
    table: str
    row: str
    run_id: str
    params: int | None = None  # all parameters of the method (trainable ones in `trainable`)
    trainable: int | None = None
    act_bytes_per_sample: float | None = None
    batch_per_gpu: float | None = None
    gpus: int = 0
    est_gpu_gb: float | None = None
    gpu_mem_gb: float | None = None  # the cluster profile's
    error: str | None = None  # first error: "<file>: key '<key>': ..." where known
    same_as: str | None = None  # "table / row" of an identical config checked earlier
    seconds: float = 0.0
    same_shape_as: str | None = None  # "table / row" whose check of the same shape (semcl.preflight.shapes) this is
    cached: bool = False  # read from the preflight cache (a passed check of this shape and code version)
    fake_gpu_gb: float | None = None  # the fake-tensor step's peak at the real batch per GPU (semcl.preflight.fake)
    mining_gpu_gb: float | None = None  # of it, the peak during HSA's kNN mining; None: the row does not mine
    fake_note: str | None = None  # why the fake step could not run (the estimate is then the formula's)
    fake_seconds: float | None = None
    step_as: str | None = None  # "table / row" whose small real step covered this row's code path (plan.py)
    real_step_px: int | None = None  # the side the small real step ran at, below the row's (check.real_step_size)
    memory_note: str | None = None  # where a figure with no fake step comes from (published; no GPU)
    reduced: str | None = None  # what the real step and evaluations ran below the row's config (check.reductions)
    input_px: int | None = None  # the row's own input side, the fake step's (check.own_side); None: native

    @property
    def fits(self) -> bool | None:
        if self.est_gpu_gb is None or self.gpu_mem_gb is None:
            return None
        return self.est_gpu_gb <= self.gpu_mem_gb

    @property
    def ok(self) -> bool:
        return self.error is None and self.fits is not False

    def status(self) -> str:
        if self.error:
            return "ERROR"
        if self.fits is False:
            return "TOO BIG"
        return "ready"


def read_status(path: Path) -> dict:
    """The status file's {table: {...}}; {} if there is none; a damaged one is a one-line error naming it."""
    if not path.exists():
        return {}
    try:
        status = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); rerun `semcl check` "
                           "for its tables or delete the file") from None
    if not isinstance(status, dict):
        raise ResultsError(f"{path}: expected a mapping of table ids, got {type(status).__name__}")
    return status


def render(results: list[RowCheck]) -> str:
    """One line per row: status, parameters, activation memory, batch per GPU, GPU memory, error."""
    head = f"{'table':<24} {'row':<32} {'status':<8} {'params':>9} {'act/sample':>11} {'batch/GPU':>9} " \
           f"{'GPU mem est / have':>20}  first error / note"
    lines = [head]
    for r in results:
        params = f"{r.params / 1e6:.2f}M" if r.params is not None else "—"
        act = f"{r.act_bytes_per_sample / 2**20:.1f} MiB" if r.act_bytes_per_sample is not None else "—"
        bpg = f"{r.batch_per_gpu:g}" if r.batch_per_gpu is not None else "—"
        have = f"{r.gpu_mem_gb:g}" if r.gpu_mem_gb is not None else "n/a"
        mem = f"{r.est_gpu_gb:.1f} / {have} GiB" if r.est_gpu_gb is not None else "—"
        note = r.error or _note(r)
        lines.append(f"{r.table:<24} {r.row[:32]:<32} {r.status():<8} {params:>9} {act:>11} {bpg:>9} {mem:>20}  {note}")
    n_bad = sum(not r.ok for r in results)
    lines.append(f"# {len(results)} row(s): {len(results) - n_bad} ready, {n_bad} with an error or too big")
    return "\n".join(lines) + "\n"


def _note(r: RowCheck) -> str:
    return "; ".join(n for n in (_origin(r), _memory(r)) if n)


def _origin(r: RowCheck) -> str:
    if r.same_as:
        return f"same config as {r.same_as}"
    parts = []
    if r.same_shape_as:
        parts.append(f"memory as {r.same_shape_as} (same networks and batch)")
    if r.step_as:
        parts.append(f"real step as {r.step_as} (same code path)")
    if r.reduced:
        parts.append(f"reduced: {r.reduced}")
    if r.cached:
        parts.append("cached: passed with this code")
    return "; ".join(parts)


def _memory(r: RowCheck) -> str:
    """Where the GPU memory figure comes from: the fake-tensor step at the real batch, or the formula and why."""
    if r.fake_gpu_gb is not None:
        mining = f", kNN mining {r.mining_gpu_gb:.1f} GiB" if r.mining_gpu_gb is not None else ""
        side = f", {r.input_px} px" if r.input_px else ""
        return f"memory: fake-tensor step at batch {r.batch_per_gpu:g}{side}{mining}"
    if r.fake_note:
        return f"memory: formula from the small real step; {r.fake_note}"
    return r.memory_note or ""


def write_status(path: Path, profile: str, results: list[RowCheck]) -> None:
    """results/preflight/<profile>.json: per table, whether its last preflight passed (what
    `semcl run --executor slurm` reads)."""
    old = read_status(path)
    for table in dict.fromkeys(r.table for r in results):
        rows = [r for r in results if r.table == table]
        old[table] = {"ok": all(r.ok for r in rows), "run_ids": sorted(r.run_id for r in rows),
                      "errors": [f"{r.row}: {r.error or 'too big'}" for r in rows if not r.ok],
                      "rows": {r.row: _row_doc(r) for r in rows}}
    write_json_atomic(path, old)  # readers never see half a file


def _row_doc(r: RowCheck) -> dict:
    """A row's line of the status file: its figure, the side it was measured at, and what its real step reduced."""
    return {"run_id": r.run_id, "status": r.status(), "est_gpu_gb": r.est_gpu_gb,
            "memory": "fake step" if r.fake_gpu_gb is not None else ("formula" if r.fake_note else r.memory_note),
            "memory_batch_per_gpu": r.batch_per_gpu, "memory_px": r.input_px, "real_step_px": r.real_step_px,
            "reduced": r.reduced}


def require_passed(path: Path, table, run_ids: set[str]) -> str | None:
    """None when the table's last preflight passed for exactly these runs, else why not (one line). The
    advice names the profile of `path` (results/preflight/<profile>.json), the file `semcl check` writes."""
    check = f"`semcl check {table.id} --profile {path.stem}`"
    info = read_status(path).get(table.id)
    if info is None:
        return f"{table.id}: no preflight on record ({path}); run {check}"
    if not info["ok"]:
        return f"{table.id}: its preflight failed ({info['errors'][0]}); fix it and rerun {check}, or pass --no-check"
    if not run_ids <= set(info["run_ids"]):
        return f"{table.id}: its config changed since the last preflight; rerun {check}"
    return None
