"""What makes a preflight fast: keys that let rows share checks, a result cache, and parallel processes.

Three keys: the *shape* (below); the *memory key* (the shape and the GPUs, not the runs a row builds on:
which rows share one fake step) and the *code key* (the shape without the networks' names and sizes, counts
as 0 / 1 / n, the small step's batch: which rows share one real step); semcl.preflight.plan uses the last two.

A shape is a row config with the values that cannot change what is built or which code runs taken out:
the loss scalars and the lr / schedule numbers (`optim`, `schedule`, `method` and `probe` floats, epoch
counts and milestones). A dropped float keeps whether it is zero, since a zero weight switches a term off
(KD's alpha, RIDE's lambda) and so changes the code path; `schedule.epochs` keeps whether it is zero
(rows that train nothing). Rows of one shape share one check. The key also holds the GPUs the row's
job asks for, the shapes of the runs it builds on, the reduction and the step's batch.

Results are cached by shape key under <results>/preflight/cache/<code version>/, the code version being
the digest of the package source (semcl.snapshot), so any code change starts a fresh cache. Only passed
checks are cached: an error is always looked at again (it may come from the environment, a missing
optional package).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

from semcl.preflight.report import RowCheck

SCALAR_SECTIONS = ("optim", "schedule", "method", "probe")
# integers that are schedule numbers, not sizes
SCHEDULE_INTS = {"optim.warmup_epochs", "optim.step_milestones", "optim.plateau_patience", "probe.epochs",
                 "probe.milestones", "schedule.epochs"}
CACHED_FIELDS = ("params", "trainable", "act_bytes_per_sample", "est_gpu_gb", "fake_gpu_gb", "mining_gpu_gb",
                 "fake_note", "real_step_px", "memory_note")


def _scalar(value):
    """'0' or 'x' for a number, element-wise for a list; None where `value` is not a number (kept)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return "0" if value == 0 else "x"
    if isinstance(value, list) and value and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return ["0" if v == 0 else "x" for v in value]
    return None


def shape_of(hashed: dict) -> dict:
    """The hashable config (semcl.config.hashable_config) without the scalars (module docstring)."""
    out = {}
    for section, values in hashed.items():
        if section not in SCALAR_SECTIONS or not isinstance(values, dict):
            out[section] = values
            continue
        kept = {}
        for name, value in values.items():
            key = f"{section}.{name}"
            is_float = isinstance(value, float) or (isinstance(value, list) and any(isinstance(v, float) for v in value))
            scalar = _scalar(value) if is_float or key in SCHEDULE_INTS else None
            kept[name] = value if scalar is None else scalar
        out[section] = kept
    return out


def shape_key(run, gpus: int, dep_keys: list[str], extra: dict) -> str:
    """16 hex digits naming the run's shape; `extra`: what else the check depends on (reduction, batch)."""
    from semcl.config import hashable_config

    key = {"shape": shape_of(hashable_config(run.config)), "gpus": gpus, "after": dep_keys, "extra": extra}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


# what only sizes the networks (their width, depth, input): the fake step at the real batch measures it, the
# real small step does not need to see each one (semcl.preflight.plan: the code-path key)
NETWORK_FIELDS = {"model.backbone", "model.head_hidden", "model.head_dim", "method.arch", "method.backbone",
                  "method.segmenter", "method.checkpoint", "model.pretrained"}


def code_of(hashed: dict, batch: int) -> dict:
    """The shape (shape_of) without the networks' names and sizes (NETWORK_FIELDS, method fields naming an
    architecture: teacher_arch, student_arch) and with the batch the small real step runs at: what decides which
    code the real step, its checkpoint and its evaluations run."""
    out = shape_of(hashed)
    for section, values in out.items():
        if not isinstance(values, dict):
            continue
        out[section] = {k: v for k, v in values.items()
                        if f"{section}.{k}" not in NETWORK_FIELDS and not (section == "method" and k.endswith("_arch"))}
    for section in ("method", "model"):  # a count or size: 0 and 1 often switch a branch, larger ones do not
        if isinstance(out.get(section), dict):
            out[section] = {k: _count(v) for k, v in out[section].items()}
    optim = out.get("optim")
    if isinstance(optim, dict):
        from semcl.preflight.check import REAL_STEP_ACCUM

        # the real step's batch, and its accumulation (4 and 8 are one code path: GPaCo ViT-B and ViT-L shared no
        # real step, and ViT-L's wrote a 3.6 GB checkpoint for nothing)
        for name, cap in (("batch_size", batch), ("accum_steps", REAL_STEP_ACCUM)):
            if isinstance(optim.get(name), int):
                optim[name] = min(cap, optim[name])
    return out


def _count(value):
    """An integer (or a list of them) as "0", "1" or "n"; anything else unchanged."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value in (0, 1) else "n"
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [_count(v) for v in value]
    return value


def code_key(run, dep_keys: list[str], extra: dict) -> str:
    """16 hex digits naming the code a row's small real step runs (code_of); `dep_keys`: the code keys of
    the runs it builds on. Rows of one code key share one real step."""
    from semcl.config import hashable_config

    key = {"code": code_of(hashable_config(run.config), extra.get("batch", 4)), "after": dep_keys, "extra": extra}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def memory_key(run, gpus: int, extra: dict) -> str:
    """16 hex digits naming what decides a row's fake-step peak: the shape (networks, batch, input size,
    optimiser, precision, mining sizes) and the GPUs, not the runs it builds on (a teacher's weights do not
    change the peak; its architecture is a field of the row) nor its evaluations (but the per-stage probes'). Rows
    of one memory key share one fake step."""
    from semcl.config import hashable_config

    shape = shape_of(hashable_config(run.config))
    # how a row is evaluated does not change its training step's peak; the one evaluation the figure holds is the
    # per-stage probes' (HSA Fig. 3: semcl.evals.stage_probe, at the probe's batch)
    ev, probe = shape.pop("eval", None) or {}, shape.pop("probe", None) or {}
    if ev.get("stage_probe"):
        shape["stage_probe"] = {"eval": ev["stage_probe"], "batch_size": probe.get("batch_size")}
    key = {"shape": shape, "gpus": gpus, "deps": len(run.depends_on),
           "extra": {k: v for k, v in extra.items() if k != "batch"}}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def code_version() -> str:
    """Digest of the package source: a changed file of semcl is a new cache."""
    import semcl
    from semcl.snapshot import code_digest, file_hashes

    return code_digest(file_hashes(Path(semcl.__file__).parent))[:16]


class ShapeCache:
    """Passed checks by shape key, one small JSON file each, under `root`/<code version>/."""

    def __init__(self, root: Path, version: str | None = None):
        self.root = Path(root)
        self.folder = self.root / (version or code_version())

    def get(self, key: str) -> dict | None:
        path = self.folder / f"{key}.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):  # absent, or damaged: checked again and rewritten
            return None
        return doc if isinstance(doc, dict) and set(CACHED_FIELDS) <= set(doc) else None

    def put(self, key: str, result: RowCheck) -> None:
        from semcl.files import write_json_atomic

        if result.error is not None:
            return
        if not self.folder.exists():  # a new code version: the old ones can never be hit again
            for old in self.root.glob("*"):
                if old.is_dir() and old != self.folder:
                    shutil.rmtree(old, ignore_errors=True)
        write_json_atomic(self.folder / f"{key}.json", {f: getattr(result, f) for f in CACHED_FIELDS})


def from_cache(doc: dict, run, table_id: str, gpus: int, gpu_mem_gb: float | None) -> RowCheck:
    return RowCheck(table_id, run.row_label, run.run_id, gpus=gpus, gpu_mem_gb=gpu_mem_gb,
                    batch_per_gpu=run.config.optim.batch_size / max(1, gpus), cached=True,
                    **{f: doc[f] for f in CACHED_FIELDS})


def share(result: RowCheck, run, table_id: str, of: str) -> RowCheck:
    """The result of another run of the same shape, reported for `run` (`of`: "table / row" checked)."""
    return dataclasses.replace(result, table=table_id, row=run.row_label, run_id=run.run_id, seconds=0.0,
                               same_shape_as=of)


def alias_folder(store, rep_id: str, run_id: str) -> None:
    """Make `run_id`'s scratch folder stand for `rep_id`'s (same shape): rows building on it read the
    representative's checkpoint and logits, under its own record. Nothing if the representative failed."""
    try:
        record = store.read_record(rep_id)
    except Exception:  # noqa: BLE001 - a broken scratch record: dependents report the missing run
        record = None
    if record is None or rep_id == run_id:
        return
    src, dst = store.folder(rep_id), store.folder(run_id)
    for name in ("checkpoint", "logits"):  # what a dependent run reads (RunFolder properties)
        have, want = getattr(src, name), getattr(dst, name)
        if have.exists() and not want.exists():
            want.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(have, want)
    if store.read_record(run_id) is None:
        store.write_record(run_id, {"run_id": run_id, "metrics": record["metrics"]})


def release_scratch(store, run_ids: list[str]) -> None:
    """Delete the scratch checkpoints and test logits of `run_ids` (their records stay: the report and the
    status of dependents read them). Symlinks (alias_folder) go with their targets."""
    for rid in run_ids:
        folder = store.folder(rid)
        folder.logits.unlink(missing_ok=True)
        shutil.rmtree(folder.checkpoints, ignore_errors=True)
