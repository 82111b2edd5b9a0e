"""Optional experiment trackers, fed one entry per finished epoch (semcl.runtime.history.EpochLog) and, once
the record is written, the evaluation metrics and the run's settings (`log_results`, from semcl.engine.job).

$SEMCL_TRACKING picks them, comma-separated: tensorboard, wandb (offline mode, files under
results/runs/<id>/wandb/) and mlflow (a file store, results/mlruns/ unless $MLFLOW_TRACKING_URI says otherwise).
Each tracked run is named `table/row/seed` (read off the run folder's config.yaml); TensorBoard names a run by
its folder, so its events go to results/tensorboard/<profile>/<table>/<row>/<seed>/ (`tensorboard --logdir
results/tensorboard/mini`). Each is keyed by the run id, so a requeued run (a kill and a resume) leaves every
epoch once: TensorBoard's folder holds a file naming its run id (a run of an older config with the same label gets
<seed>.<run id> beside it) and purges the steps after the checkpoint's epoch; MLflow finds its run by the tag
semcl.run_id and skips an epoch it already holds (a resumed run retrains it bit for bit); W&B's offline mode cannot
resume a run (wandb/wandb#2423, #3841: each init with the same id writes a new offline-run-*-<id> folder), so each
attempt's folder replays the history up to the checkpoint first and is complete by itself, and the finished run's
results go to one more folder holding every epoch, the settings and the evaluation: sync the newest folder of a
run (`wandb sync` of the newest results/runs/<id>/wandb/offline-run-*-<id>). None of them reaches the network.
Each package is imported only when chosen; a missing one is a one-line ConfigError saying what to install (the
`tracking` extra: tensorboard; the `test` extra: all three)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from semcl.errors import ConfigError
from semcl.store.run_folder import RunFolder

ENV = "SEMCL_TRACKING"
TB_ROOT = "tensorboard"  # beside runs/ in the results folder
TB_OWNER = "semcl_run_id"  # in a TensorBoard folder: the run id whose events it holds


def _missing(backend: str, package: str) -> ConfigError:
    how = "pip install 'semcl[tracking]'" if package == "tensorboard" else f"pip install {package}"
    return ConfigError(f"${ENV}: backend {backend!r} needs the {package} package: {how}")


def _scalars(entry: dict) -> dict[str, float]:
    return {k: float(v) for k, v in entry.items()
            if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _flat(doc: dict, prefix: str = "") -> dict:
    """Nested keys joined by dots ({"optim": {"lr": 0.1}} -> {"optim.lr": 0.1})."""
    out = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def settings(config: dict, label: dict) -> dict[str, str | int | float | bool]:
    """The run's settings as tracker hyperparameters: table, row, seed, profile, run id, then every config key that
    is set (None left out; a list as its text)."""
    flat = {k: v for k, v in _flat(config).items() if v is not None}
    return {**label, **{k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in flat.items()}}


def eval_scalars(metrics: dict) -> dict[str, float]:
    """The finite numbers of a record's metrics, as "eval/<key>"."""
    return {f"eval/{k}": float(v) for k, v in _flat(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def run_label(folder: Path) -> dict:
    """table, row, seed, profile and run id of a run folder, from its config.yaml (the folder name alone where that
    is missing or unreadable: a tracker never stops a run)."""
    import yaml

    run_id = Path(folder).name
    try:
        doc = yaml.safe_load(RunFolder(Path(folder)).config.read_text())
        found = {k: doc[k] for k in ("table", "row", "seed", "profile")}
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return {"run_id": run_id}
    return {**found, "run_id": run_id}


def run_name(label: dict) -> str:
    """"table/row/seed" (the run id where the folder does not say)."""
    if "table" not in label:
        return label["run_id"]
    return f"{label['table']}/{label['row']}/{label['seed']}"


def tensorboard_dir(results: Path, label: dict) -> Path:
    """results/tensorboard/<profile>/<table>/<row>/<seed>/, or <seed>.<run id> when a run of another config (an
    older one with the same label) holds that folder; a row label's slashes become '∕' (one folder per row)."""
    if "table" not in label:
        return results / TB_ROOT / label["run_id"]
    base = results / TB_ROOT / str(label["profile"]) / str(label["table"]) / str(label["row"]).replace("/", "∕")
    path = base / str(label["seed"])
    try:
        owner = (path / TB_OWNER).read_text().strip()
    except OSError:
        owner = label["run_id"]
    return path if owner == label["run_id"] else base / f"{label['seed']}.{label['run_id']}"


class TensorBoard:
    def __init__(self, folder: Path, run_id: str, start_epoch: int, history: list[dict] = ()):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise _missing("tensorboard", "tensorboard") from None
        label = run_label(folder)
        path = tensorboard_dir(folder.parent.parent, label)
        path.mkdir(parents=True, exist_ok=True)
        (path / TB_OWNER).write_text(run_id + "\n")
        # a resumed run: events of epochs after the checkpoint (logged before a crash) are dropped
        self.writer = SummaryWriter(str(path), purge_step=start_epoch + 1 if start_epoch else None)
        self.writer.add_text("run", f"{run_name(label)} (run {run_id})", 0)

    def log(self, entry: dict) -> None:
        for key, value in _scalars(entry).items():
            self.writer.add_scalar(f"train/{key}", value, int(entry["epoch"]))
        self.writer.flush()

    def results(self, hparams: dict, metrics: dict[str, float], step: int) -> None:
        """The HParams dashboard's entry (settings against evaluation) and each metric as a scalar."""
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        for summary in hparams_summary(hparams, metrics):
            self.writer.file_writer.add_summary(summary)
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, folder: Path, run_id: str, start_epoch: int, history: list[dict] = ()):
        try:
            import wandb
        except ImportError:
            raise _missing("wandb", "wandb") from None
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "semcl"), id=run_id,
                              name=run_name(run_label(folder)), resume="allow", mode="offline", dir=str(folder))
        for entry in history[:start_epoch] if start_epoch else history:  # this attempt's folder is complete alone
            self.log(entry)

    def log(self, entry: dict) -> None:
        self.run.log(_scalars(entry), step=int(entry["epoch"]))

    def results(self, hparams: dict, metrics: dict[str, float], step: int) -> None:
        self.run.config.update(hparams, allow_val_change=True)
        self.run.summary.update(metrics)

    def close(self) -> None:
        self.run.finish()


class MLflow:
    def __init__(self, folder: Path, run_id: str, start_epoch: int, history: list[dict] = ()):
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise _missing("mlflow", "mlflow") from None
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # our default, a file store (no server); MLflow >= 3.x refuses one unless allowed
            uri = (folder.parent.parent / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name("semcl")
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment("semcl")
        found = self.client.search_runs([exp_id], filter_string=f"tags.`semcl.run_id` = '{run_id}'", max_results=1)
        self.mlflow_id = (found[0].info.run_id if found else
                          self.client.create_run(exp_id, run_name=run_name(run_label(folder)),
                                                 tags={"semcl.run_id": run_id}).info.run_id)
        # (key, epoch) pairs an earlier attempt logged: a kill between an epoch's log and its checkpoint retrains
        # that epoch, and MLflow appends rather than replaces a step's value
        resumed = found and start_epoch
        self.logged = {(key, m.step) for key in (self.client.get_run(self.mlflow_id).data.metrics if resumed else {})
                       for m in self.client.get_metric_history(self.mlflow_id, key)}

    def log(self, entry: dict) -> None:
        for key, value in _scalars(entry).items():
            if (key, int(entry["epoch"])) not in self.logged:
                self.client.log_metric(self.mlflow_id, key, value, step=int(entry["epoch"]))

    def results(self, hparams: dict, metrics: dict[str, float], step: int) -> None:
        # MLflow keys allow letters, digits and _-. /; a parameter, once logged, keeps its value (a rerun logs the same)
        for key, value in hparams.items():
            self.client.log_param(self.mlflow_id, mlflow_key(key), str(value)[:6000])
        for key, value in metrics.items():
            self.client.log_metric(self.mlflow_id, mlflow_key(key), value, step=step)

    def close(self) -> None:
        pass  # the run stays open for a requeue; its metrics are already on disk


BACKENDS = {"tensorboard": TensorBoard, "wandb": WandB, "mlflow": MLflow}


def chosen_backends(value: str | None = None) -> list[str]:
    value = os.environ.get(ENV, "") if value is None else value
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ConfigError(f"${ENV}: unknown backend {unknown[0]!r} (known: {', '.join(BACKENDS)})")
    return names


PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}  # what each backend imports


def check_backends(value: str | None = None) -> list[str]:
    """The chosen backends, each known and its package installed; the one-line ConfigError otherwise. `semcl
    run` calls it before any job goes out, so a typo costs one line instead of every run (after a queue wait)."""
    import importlib.util

    names = chosen_backends(value)
    for name in names:
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise _missing(name, PACKAGES[name])
    return names


def open_trackers(folder: Path, run_id: str, start_epoch: int, history: list[dict] = ()) -> list:
    """The trackers $SEMCL_TRACKING names, opened for this run (`start_epoch`: the epochs already done, whose
    entries `history` holds)."""
    return [BACKENDS[name](folder, run_id, start_epoch, history) for name in chosen_backends()]


def mlflow_key(key: str) -> str:
    return re.sub(r"[^\w\-. /]", "_", key)


def log_results(folder: Path, metrics: dict, config: dict, history: list[dict] = ()) -> None:
    """A finished run's evaluation metrics and settings, to each chosen tracker (the same tracked run its epochs
    went to), at the step of its last epoch; W&B's new offline folder gets the run's `history` first."""
    names = chosen_backends()
    if not names:
        return
    label = run_label(Path(folder))
    step = int(config.get("schedule", {}).get("epochs") or 0)
    hparams, scalars = settings(config, label), eval_scalars(metrics)
    for name in names:
        tracker = BACKENDS[name](Path(folder), Path(folder).name, 0, history if name == "wandb" else ())
        try:
            tracker.results(hparams, scalars, step)
        finally:
            tracker.close()
