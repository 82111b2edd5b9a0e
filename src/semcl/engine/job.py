"""One run, start to finish: data -> method -> train (resumable) -> evaluate -> metrics.json.

A run is two stages. `train` ends with the final checkpoint and trained.json (how it was trained:
ranks, threads, device, time); `evaluate` rebuilds the method from that checkpoint and evaluates. On
SLURM a multi-GPU run sends them as two jobs (the evaluation on one GPU, after the training job);
`all` (the local executors, and single-GPU jobs) runs both in one process, in the same order.
metrics.json is written atomically, and only once the run is complete; a failure writes
failed.json (error + traceback) instead and leaves any checkpoint for the next attempt.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import yaml

from semcl.config import config_to_dict
from semcl.data import describe_split, ensure_synthetic, load
from semcl.engine.evaluate import select_on_validation
from semcl.engine.harness import Env, RunHarness
from semcl.engine.provenance import cpu_isa, device_name, git_state, mkl_mode, open_run_log, versions
from semcl.errors import ResultsError
from semcl.files import write_json_atomic, write_text_atomic
from semcl.methods.registry import method_spec
from semcl.registry.plan import Run
from semcl.runtime import distributed, rank_errors
from semcl.runtime.checkpoint import save_atomic
from semcl.runtime.environment import environment
from semcl.runtime.precision import effective_config
from semcl.runtime.progress import write_phase
from semcl.runtime.tracking import log_results
from semcl.store import Store
from semcl.store.run_folder import STORE_FORMAT, RunFolder

STAGES = ("all", "train", "evaluate")


def load_released_weights(method, run: Run) -> None:
    """A released run's file into its network (semcl.engine.released.load_weights: whole or not at all)."""
    from semcl.engine.released import load_weights
    from semcl.registry.tables import get_table

    table = get_table(run.table_id)
    load_weights(method, table.id, table.row(run.row_label), Path(run.released.path), run.released.sha256)


def synthetic_root(store: Store, run: Run) -> Path:
    """One folder per generator setting: tables with other sizes never rewrite data a job is reading."""
    d = run.config.data
    return store.folders.synthetic / f"train{d.synthetic_train_per_class}-test{d.synthetic_test_per_class}"


def prepare_synthetic(run: Run, store: Store) -> Path:
    d = run.config.data
    return ensure_synthetic(synthetic_root(store, run), [d.name, *run.config.eval.ood],
                            train_per_class=d.synthetic_train_per_class, test_per_class=d.synthetic_test_per_class)


def pick_device() -> torch.device:
    """$SEMCL_DEVICE if set, else the GPU when there is one."""
    name = os.environ.get("SEMCL_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def arithmetic_threads(cpus: int) -> int:
    """Intra-op threads of a run's arithmetic: one where it runs on the CPU, whose results depend on the
    thread count (reduction order) and so must not depend on how many runs share the machine or what a job
    was given; all `cpus` where the arithmetic is on a GPU and the CPU only feeds it. Recorded as `threads`."""
    return max(1, cpus) if pick_device().type == "cuda" else 1


def _training(device: torch.device, t0: float) -> dict:
    """How this process trains: what the record keeps of the training stage."""
    return {"device": device_name(device), "threads": torch.get_num_threads(), "world_size": distributed.world_size(),
            **({"cpu_isa": cpu_isa(), "mkl_cbwr": mkl_mode()} if device.type == "cpu" else {}),
            "environment": environment(device), "train_time_s": round(time.time() - t0, 2)}


def _record(run: Run, metrics: dict, history: list, t0: float, device: torch.device,
            trained: dict | None = None) -> dict:
    """The run's record; `trained` is the training stage's (trained.json) when it ran as its own job."""
    training = trained or {}
    isa = training.get("cpu_isa") if trained else cpu_isa() if device.type == "cpu" else None
    mkl = training.get("mkl_cbwr") if trained else mkl_mode() if device.type == "cpu" else None
    return {"run_id": run.run_id, "store_format": STORE_FORMAT, "table": run.table_id, "row": run.row_label,
            "profile": run.profile,
            "seed": run.seed, "metrics": metrics, "config": config_to_dict(run.config), "history": history,
            **({"depends_on": list(run.depends_on)} if run.depends_on else {}),
            **({"released": {"file": run.released.path, "sha256": run.released.sha256,
                             "layout": run.released.layout}} if run.released else {}),
            "git": git_state(), "versions": versions(), "device": training.get("device", device_name(device)),
            "threads": training.get("threads", torch.get_num_threads()),
            "world_size": training.get("world_size", distributed.world_size()),
            # CUDA / cuDNN / NCCL / GPU / driver / lock / container of the training (runtime.environment)
            "environment": training.get("environment") or environment(device),
            **({"cpu_isa": isa} if isa else {}),  # CPU results differ by instruction set (provenance.cpu_isa)
            **({"mkl_cbwr": mkl} if mkl else {}),  # ... and by MKL's kernels where it picks them by CPU
            **({"evaluated_on": device_name(device), "train_time_s": training["train_time_s"]} if trained else {}),
            **({"trained_by": training["trained_by"]} if "trained_by" in training else {}),
            "wall_time_s": round(time.time() - t0, 2) + training.get("train_time_s", 0.0),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _read_trained(folder: RunFolder) -> dict:
    """trained.json of a run whose training stage finished (a store from before it was always written: the
    training fields of the finished record beside the final checkpoint); ResultsError naming the file otherwise."""
    path = folder.trained
    if not path.exists() and folder.metrics.exists() and folder.checkpoint.exists():
        try:
            doc = json.loads(folder.metrics.read_text())
            return {"device": doc["device"], "threads": doc["threads"], "world_size": doc["world_size"],
                    "train_time_s": doc.get("train_time_s", doc["wall_time_s"])}
        except (ValueError, KeyError, TypeError) as err:
            raise ResultsError(f"{folder.metrics}: unreadable as a training record ({type(err).__name__}: {err})") from None
    if not path.exists():
        raise ResultsError(f"{path}: the run's training stage has not finished (no {path.name}); "
                           "its training job runs first")
    if not folder.checkpoint.exists():
        raise ResultsError(f"{folder.checkpoint}: missing beside {path.name}; an evaluation does not train: "
                           "delete trained.json and rerun the training stage")
    try:
        doc = json.loads(path.read_text())
        out = {k: doc[k] for k in ("device", "threads", "world_size", "train_time_s")}
        if isinstance(doc.get("environment"), dict):  # absent from trained.json written before it was kept
            out["environment"] = doc["environment"]
    except (ValueError, KeyError, TypeError) as err:
        raise ResultsError(f"{path}: unreadable ({type(err).__name__}: {err}); delete it to retrain") from None
    # what the record copies from it must be what a training writes (a tampered file names its key)
    checks = {"run_id": doc.get("run_id") == folder.path.name, "device": isinstance(out["device"], str),
              "threads": type(out["threads"]) is int and out["threads"] >= 1,
              "world_size": type(out["world_size"]) is int and out["world_size"] >= 1,
              "train_time_s": type(out["train_time_s"]) in (int, float) and out["train_time_s"] >= 0}
    bad = next((k for k, ok in checks.items() if not ok), None)
    if bad is not None:
        raise ResultsError(f"{path}: key '{bad}' is {doc.get(bad)!r}, not what this run's training wrote; "
                           "delete it to retrain")
    return out


def _finished_record(run: Run, store: Store, device: torch.device | None) -> dict | None:
    """The run's record if it is finished, asked again once the caller holds the run's lock (every
    rank agrees). An unreadable record counts as not finished: the run goes ahead, and writing its
    record refuses to overwrite the file, as before."""
    try:
        record = store.read_record(run.run_id)
    except ResultsError:
        record = None
    if not distributed.any_rank(record is not None, device or torch.device("cpu")):
        return None
    print(f"{run.run_id}: finished by another process meanwhile; skipped", file=sys.stderr, flush=True)
    return record or {}


def _finish(run: Run, folder: RunFolder, store: Store, record: dict) -> None:
    """Write the record; then the progress file goes, and the trackers get the evaluation and the settings."""
    store.write_record(run.run_id, record)
    folder.failed.unlink(missing_ok=True)
    folder.progress.unlink(missing_ok=True)
    try:
        log_results(folder.path, record["metrics"], record["config"], record.get("history") or [])
    except Exception as err:  # the record is written: a tracker's failure costs its summary, not the run
        logging.getLogger("semcl.job").warning("trackers: the evaluation was not logged (%s: %s)",
                                               type(err).__name__, err)


def execute_run(run: Run, store: Store, data_root: Path, device: torch.device | None = None,
                stage: str = "all") -> dict:
    """Train, evaluate, write metrics.json (`stage` all); or only train, up to the final checkpoint and
    trained.json (`train`: returns {}); or only evaluate a trained run (`evaluate`). With several ranks,
    rank 0 alone evaluates and writes."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    finished = _finished_record(run, store, device)
    if finished is not None:  # finished by its owner after the caller's check, before the caller's lock
        return {} if stage == "train" or distributed.rank() != 0 else finished
    folder = store.folder(run.run_id)
    folder.path.mkdir(parents=True, exist_ok=True)
    if not folder.config.exists():
        write_text_atomic(folder.config, yaml.safe_dump({"run_id": run.run_id, "seed": run.seed, "table": run.table_id,
                                                    "row": run.row_label, "profile": run.profile,
                                                    "config": config_to_dict(run.config)}, sort_keys=False))
    handler = open_run_log(folder.log, run, stage, device or pick_device())
    if distributed.rank() == 0:  # what `semcl status --watch` shows until the first step (a stale file replaced)
        write_phase(folder.progress, "start")
    t0 = time.time()
    try:
        cfg = effective_config(run.config)  # `fast`: bf16 + channels_last; official: as the row says
        harness = RunHarness(run, Env(None, folder.checkpoint, device or pick_device()), cfg)
        cls, deps = harness.method_class(store)
        computed = None if stage == "train" else method_spec(cfg.method.name).computed_metrics(cfg, deps)
        if computed is not None:  # e.g. an ensemble of finished runs' logits: no data, no training
            record = _record(run, computed, [], t0, torch.device("cpu"))
            _finish(run, folder, store, record)
            return record
        root = prepare_synthetic(run, store) if cfg.data.synthetic else data_root
        harness.set(data_root=root)
        d, device = cfg.data, harness.device
        train_set, test_set = harness.data()
        write_json_atomic(folder.data, {"train": describe_split(train_set), "test": describe_split(test_set)})
        method = harness.build(cls, deps, train_set)
        # the training of this config: this run's own, or (runs differing only in evaluation) the claiming run's
        trainer = store.claim_training(run.train_key, run.run_id) if run.train_key else run.run_id
        train_folder, trained = store.folder(trainer), None
        if run.released is not None:  # the authors' checkpoint: nothing trains, the file's weights are evaluated
            if stage == "train":
                return {}
            load_released_weights(method, run)
            # the weights as a run's final checkpoint: a student of this teacher loads them as any teacher run's
            save_atomic({"method": method.state_dict()}, folder.checkpoint)
            history, trainer = [], None
        elif trainer != run.run_id:
            if not store.trained(trainer):
                raise ResultsError(f"{store.claim_path(run.train_key)}: this run evaluates the training of run "
                                   f"{trainer}, which has not finished ({store.status(trainer)[0]}); it runs first")
            if stage == "train":
                return {}
            trained = {**_read_trained(train_folder), "trained_by": trainer}
        elif stage == "evaluate" or (stage == "all" and folder.trained.exists()):
            # the training job's final checkpoint; the harness then only restores it, and the record keeps the
            # hardware that trained (trained.json), also when `all` finishes a run trained elsewhere
            trained = _read_trained(folder)
        if run.released is None:
            harness.set(checkpoint=train_folder.checkpoint, log_history=trainer == run.run_id,
                        restore_only=trained is not None)
            history = harness.train()
        if distributed.rank() != 0:
            return {}
        if trainer == run.run_id and not folder.trained.exists():  # what runs sharing this training read
            write_json_atomic(folder.trained, {"run_id": run.run_id, **_training(device, t0)})
        write_phase(folder.progress, "trained" if stage == "train" else "evaluate")
        if stage == "train":
            return {}
        chosen = {}
        if method.validation_grid:  # e.g. tau-norm's tau, chosen on val as Kang et al.
            val_set = load(d.name, root, "val", d.image_size)
            val_files = describe_split(val_set)["sources"]
            if (val_files and val_files == describe_split(test_set)["sources"]) or d.test_split == "val":
                raise ValueError(f"{d.name}: the val split is the test split here; choosing on it would tune on test")
            chosen = select_on_validation(method, cfg, train_set, val_set)
        metrics = {**harness.evaluate(train_set, test_set, logits_path=folder.logits, checkpoint_dir=folder.checkpoints),
                   **chosen}
        record = _record(run, metrics, history, t0, device, trained)
        _finish(run, folder, store, record)
        return record
    except Exception as err:
        logging.getLogger("semcl").exception("run %s failed", run.run_id)
        if distributed.rank() != 0:
            if not distributed.is_peer_fault(err):  # its own error: rank 0 reports it instead of "peer died"
                rank_errors.record(folder, distributed.rank(), err)
            raise
        shown = rank_errors.explain(folder, err) if distributed.is_peer_fault(err) else err
        try:
            write_json_atomic(folder.failed, {"run_id": run.run_id, "error": f"{type(shown).__name__}: {shown}",
                                              "traceback": traceback.format_exc()})
        except OSError as werr:  # a full disk: the run's own error must still reach the job's log and caller
            print(f"semcl: run {run.run_id} failed ({type(shown).__name__}: {str(shown).splitlines()[0][:300]}); "
                  f"its failed.json could not be written ({werr})", file=sys.stderr, flush=True)
        if shown is not err:
            raise shown from err
        raise
    finally:
        logging.getLogger("semcl").removeHandler(handler)
        handler.close()
