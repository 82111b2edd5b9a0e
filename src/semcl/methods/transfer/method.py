"""detectron2_transfer: export -> `train_net.py` subprocess -> final metrics (see semcl.methods.transfer)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from semcl.errors import ConfigError, DataError
from semcl.methods.base import Dependency, Method
from semcl.methods.transfer import BENCHMARK_OPTS

# detectron2 metric name -> metrics.json key of the transfer tables
METRIC_KEYS = {"bbox/AP": "ap", "bbox/AP50": "ap50", "bbox/AP75": "ap75",
               "segm/AP": "mask_ap", "segm/AP50": "mask_ap50", "segm/AP75": "mask_ap75"}


def require_detectron2() -> None:
    if importlib.util.find_spec("detectron2") is None:
        raise ConfigError("detectron2_transfer needs detectron2, which is not installed "
                          "(pip install 'git+https://github.com/facebookresearch/detectron2.git')")


def train_net_command(python: str, train_net: Path, config_file: str, weights: Path, output_dir: Path,
                      num_gpus: int, opts: list[str]) -> list[str]:
    """detectron2's documented command line: --config-file, --num-gpus, then KEY VALUE overrides."""
    return [python, str(train_net), "--config-file", config_file, "--num-gpus", str(num_gpus),
            *opts, "MODEL.WEIGHTS", str(weights), "OUTPUT_DIR", str(output_dir)]


def read_final_metrics(output_dir: Path) -> dict[str, float]:
    """The last evaluation in detectron2's `metrics.json` (JSON lines) as {ap, ap50, ap75[, mask_*]}."""
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
            last = {key: float(rec[name]) for name, key in METRIC_KEYS.items() if name in rec}
    if not last:
        raise DataError(f"{path}: no line with 'bbox/AP' (no evaluation finished)")
    return last


class Detectron2Transfer(Method):
    """No training here: `metrics_from_dependencies` runs the whole transfer."""

    @classmethod
    def metrics_from_dependencies(cls, cfg, deps: list[Dependency]) -> dict[str, float]:
        from semcl.export import write_detectron2

        m = cfg.method
        require_detectron2()
        train_net = m.train_net or os.environ.get("SEMCL_DETECTRON2_TRAIN_NET")
        if not train_net or not Path(train_net).is_file():
            raise ConfigError(f"detectron2_transfer: key 'method.train_net' = {train_net!r} is not a train_net.py file "
                              f"(or set SEMCL_DETECTRON2_TRAIN_NET)")
        if not m.config_file:
            raise ConfigError("detectron2_transfer: key 'method.config_file' is not set (detectron2 base config)")
        (base,) = deps
        out = base.run_dir / "detectron2" / m.benchmark
        out.mkdir(parents=True, exist_ok=True)
        weights = write_detectron2(base.load_state(), out / "backbone.pkl", prefix="backbone.")
        cmd = train_net_command(m.python or sys.executable, Path(train_net), m.config_file, weights, out,
                                m.num_gpus, BENCHMARK_OPTS[m.benchmark])
        subprocess.run(cmd, check=True)
        return read_final_metrics(out)
