"""Optional experiment trackers, fed one entry per finished epoch (semcl.runtime.history.EpochLog).

$SEMCL_TRACKING picks them, comma-separated: tensorboard (event files in results/runs/<id>/tb/), wandb
(offline mode, files under results/runs/<id>/wandb/) and mlflow (a file store, results/mlruns/ unless
$MLFLOW_TRACKING_URI says otherwise). Each is keyed by the run id, so a requeued run continues the same
tracked run: TensorBoard purges the steps after the checkpoint's epoch, W&B resumes its id ("allow"), MLflow
finds its run by the tag semcl.run_id. None of them reaches the network. Each package is imported only when
chosen; a missing one is a one-line ConfigError saying what to install (the `tracking` extra: tensorboard)."""

from __future__ import annotations

import os
from pathlib import Path

from semcl.errors import ConfigError

ENV = "SEMCL_TRACKING"
TB_DIR = "tb"


def _missing(backend: str, package: str) -> ConfigError:
    how = "pip install 'semcl[tracking]'" if package == "tensorboard" else f"pip install {package}"
    return ConfigError(f"${ENV}: backend {backend!r} needs the {package} package: {how}")


def _scalars(entry: dict) -> dict[str, float]:
    return {k: float(v) for k, v in entry.items()
            if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)}


class TensorBoard:
    def __init__(self, folder: Path, run_id: str, start_epoch: int):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise _missing("tensorboard", "tensorboard") from None
        # a resumed run: events of epochs after the checkpoint (logged before a crash) are dropped
        self.writer = SummaryWriter(str(folder / TB_DIR), purge_step=start_epoch + 1 if start_epoch else None)

    def log(self, entry: dict) -> None:
        for key, value in _scalars(entry).items():
            self.writer.add_scalar(f"train/{key}", value, int(entry["epoch"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, folder: Path, run_id: str, start_epoch: int):
        try:
            import wandb
        except ImportError:
            raise _missing("wandb", "wandb") from None
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "semcl"), id=run_id, name=run_id,
                              resume="allow", mode="offline", dir=str(folder))

    def log(self, entry: dict) -> None:
        self.run.log(_scalars(entry), step=int(entry["epoch"]))

    def close(self) -> None:
        self.run.finish()


class MLflow:
    def __init__(self, folder: Path, run_id: str, start_epoch: int):
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
                          self.client.create_run(exp_id, run_name=run_id, tags={"semcl.run_id": run_id}).info.run_id)

    def log(self, entry: dict) -> None:
        for key, value in _scalars(entry).items():
            self.client.log_metric(self.mlflow_id, key, value, step=int(entry["epoch"]))

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


def open_trackers(folder: Path, run_id: str, start_epoch: int) -> list:
    """The trackers $SEMCL_TRACKING names, opened for this run (`start_epoch`: the epochs already done)."""
    return [BACKENDS[name](folder, run_id, start_epoch) for name in chosen_backends()]
