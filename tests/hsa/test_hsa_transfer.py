"""detectron2_transfer: the command line, the metrics read back, the missing-package error."""

import json
import pickle
import sys
from pathlib import Path

import pytest
import torch

from semcl.config import build_config
from semcl.errors import ConfigError
from semcl.methods.base import Dependency
from semcl.methods.transfer import BENCHMARK_OPTS
from semcl.methods.transfer import method as transfer

FAKE = """\
import json, sys
from pathlib import Path
argv = sys.argv[1:]
out = Path(argv[argv.index("OUTPUT_DIR") + 1])
(out / "argv.json").write_text(json.dumps(argv))
lines = [{"iteration": 10, "total_loss": 1.0},
         {"iteration": 99, "bbox/AP": 50.0, "bbox/AP50": 80.0, "bbox/AP75": 55.0},
         {"iteration": 199, "bbox/AP": 57.25, "bbox/AP50": 82.5, "bbox/AP75": 63.5}]
(out / "metrics.json").write_text("\\n".join(json.dumps(x) for x in lines) + "\\n")
"""


def _state() -> dict[str, torch.Tensor]:
    from torchvision.models import resnet50

    torch.manual_seed(0)
    return {f"backbone.{k}": v for k, v in resnet50().state_dict().items() if not k.startswith("fc.")}


def test_train_net_is_called_with_the_registered_values_and_metrics_come_back(tmp_path, monkeypatch):
    script = tmp_path / "train_net.py"
    script.write_text(FAKE)
    monkeypatch.setattr(transfer, "require_detectron2", lambda: None)
    cfg = build_config({"method": {"name": "detectron2_transfer", "train_net": str(script),
                                   "config_file": "base.yaml", "num_gpus": 2}}, where="test")
    state = _state()
    base = tmp_path / "base"
    dep = Dependency("init_from", "r", base, lambda: state, dict, dict)
    metrics = transfer.Detectron2Transfer.metrics_from_dependencies(cfg, [dep])
    assert metrics == {"ap": 57.25, "ap50": 82.5, "ap75": 63.5}  # the last evaluation line
    out = base / "detectron2" / "voc"
    argv = json.loads((out / "argv.json").read_text())
    assert argv[:4] == ["--config-file", "base.yaml", "--num-gpus", "2"]
    assert argv[4:4 + len(BENCHMARK_OPTS["voc"])] == BENCHMARK_OPTS["voc"]
    assert argv[argv.index("SOLVER.MAX_ITER") + 1] == "24000" and argv[argv.index("SOLVER.BASE_LR") + 1] == "0.02"
    assert argv[-4:] == ["MODEL.WEIGHTS", str(out / "backbone.pkl"), "OUTPUT_DIR", str(out)]
    weights = pickle.loads((out / "backbone.pkl").read_bytes())["model"]
    assert weights["stem.conv1.weight"].shape == (64, 3, 7, 7) and "res5.2.conv3.weight" in weights
    assert sys.executable == transfer.train_net_command(sys.executable, Path("t"), "c", Path("w"), Path("o"), 1, [])[0]


def test_missing_detectron2_is_one_line_naming_the_package(monkeypatch):
    monkeypatch.setattr(transfer.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="needs detectron2, which is not installed") as err:
        transfer.require_detectron2()
    assert "\n" not in str(err.value)
