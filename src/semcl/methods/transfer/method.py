"""detectron2_transfer: export -> one entry-point run per trial -> the mean of the trials' final metrics
(see semcl.methods.transfer)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from semcl.errors import ConfigError, DataError
from semcl.methods.base import Dependency, Method
from semcl.methods.transfer import BENCHMARK_OPTS, METRIC_KEYS
from semcl.methods.transfer.train_net import require_detectron2

ENTRY_POINT = "semcl.methods.transfer.train_net"


def train_net_command(python: str, train_net: Path | None, config_file: str | None, weights: Path, output_dir: Path,
                      num_gpus: int, opts: list[str], *, seed: int | None = None, resume: bool = False) -> list[str]:
    """detectron2's command line: [--config-file F] --num-gpus N [--resume], then KEY VALUE overrides, the
    trial's SEED, the weights and the output folder last (they win). train_net None: our entry point."""
    head = [python, "-m", ENTRY_POINT] if train_net is None else [python, str(train_net)]
    cmd = [*head, *(["--config-file", config_file] if config_file else []), "--num-gpus", str(num_gpus)]
    cmd += ["--resume"] if resume else []
    return [*cmd, *opts, *(["SEED", str(seed)] if seed is not None else []),
            "MODEL.WEIGHTS", str(weights), "OUTPUT_DIR", str(output_dir)]


def read_final_metrics(output_dir: Path, benchmark: str = "voc") -> dict[str, float]:
    """The last evaluation in detectron2's `metrics.json` (JSON lines) under the table's keys."""
    path = output_dir / "metrics.json"
    if not path.is_file():
        raise DataError(f"{path}: detectron2 wrote no metrics")
    last: dict[str, float] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise DataError(f"{path}: line {n} is not JSON") from None
        if "bbox/AP" in rec:
            last = {key: float(rec[name]) for name, key in METRIC_KEYS[benchmark].items() if name in rec}
    if not last:
        raise DataError(f"{path}: no line with 'bbox/AP' (no evaluation finished)")
    return last


def mean_over_trials(trials: list[dict[str, float]]) -> dict[str, float]:
    """Per metric the mean over the trials (the number reported), its sample std (ddof 1; 0 for one trial)
    under `<key>_std`, and the trial count as `trials`. Every trial must have every metric of the first."""
    if not trials:
        raise ValueError("mean_over_trials: no trial")
    keys = list(trials[0])
    for i, t in enumerate(trials[1:], 2):
        if set(t) != set(keys):
            raise DataError(f"detectron2 trial {i} reports {sorted(t)}, trial 1 {sorted(keys)}")
    out: dict[str, float] = {}
    for k in keys:
        values = [t[k] for t in trials]
        out[k] = statistics.fmean(values)
        out[f"{k}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    out["trials"] = float(len(trials))
    return out


def _trial_done(out: Path, benchmark: str) -> dict[str, float] | None:
    try:
        return read_final_metrics(out, benchmark)
    except DataError:
        return None


class Detectron2Transfer(Method):
    """No training here: `transfer_metrics` (the spec's `computes`) runs the whole transfer."""


def transfer_metrics(cfg, deps: list[Dependency]) -> dict[str, float]:
    """Every detectron2 trial of the base run's backbone, resumed where done; their mean metrics."""
    from semcl.models.weight_formats import write_detectron2

    m = cfg.method
    train_net = m.train_net or os.environ.get("SEMCL_DETECTRON2_TRAIN_NET")
    if train_net and not Path(train_net).is_file():
        raise ConfigError(f"detectron2_transfer: key 'method.train_net' = {train_net!r} is not a file "
                          f"(unset it for the suite's entry point {ENTRY_POINT})")
    if m.config_file and not Path(m.config_file).is_file():
        raise ConfigError(f"detectron2_transfer: key 'method.config_file' = {m.config_file!r} is not a file")
    (base,) = deps
    out = base.run_dir / "detectron2" / m.benchmark
    out.mkdir(parents=True, exist_ok=True)
    weights = write_detectron2(base.load_state(), out / "backbone.pkl", prefix="backbone.")
    python, script = m.python or sys.executable, Path(train_net) if train_net else None
    commands = [train_net_command(python, script, m.config_file, weights, out / f"trial{t}", m.num_gpus,
                                  BENCHMARK_OPTS[m.benchmark], seed=t,
                                  resume=(out / f"trial{t}" / "last_checkpoint").is_file())
                for t in range(m.trials)]
    if cfg.data.synthetic:  # the preflight's stand-in is no detection set: the commands are checked, not run
        (out / "commands.json").write_text(json.dumps(commands, indent=1))
        return {}
    if script is None:
        require_detectron2()
    trials = []
    for t, cmd in enumerate(commands):
        done = _trial_done(out / f"trial{t}", m.benchmark)  # a requeued job keeps its finished trials
        if done is None:
            subprocess.run(cmd, check=True)
            done = read_final_metrics(out / f"trial{t}", m.benchmark)
        trials.append(done)
    return mean_over_trials(trials)
