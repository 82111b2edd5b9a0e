"""detectron2_transfer: the trials' command lines, the mean of 5 trials, a requeue keeping finished trials,
the preflight's dry run, the missing-package error, and our entry point's Res5ROIHeadsExtraNorm (on a stub of
detectron2's registry, so no detectron2 is needed)."""

import json
import pickle
import statistics
import sys
import types
from pathlib import Path

import pytest
import torch

from semcl.errors import ConfigError, DataError
from semcl.methods.base import Dependency
from semcl.methods.transfer import BENCHMARK_OPTS, train_net
from semcl.methods.transfer import method as transfer
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

# a stand-in for the entry point: records its argv and the call, writes detectron2's metrics.json with
# AP = 50 + SEED (and the COCO mask metrics)
FAKE = """\
import json, sys
from pathlib import Path
argv = sys.argv[1:]
out = Path(argv[argv.index("OUTPUT_DIR") + 1])
out.mkdir(parents=True, exist_ok=True)
seed = int(argv[argv.index("SEED") + 1])
(out / "argv.json").write_text(json.dumps(argv))
with open(out.parent / "calls.txt", "a") as f:
    f.write(out.name + "\\n")
final = {"iteration": 199, "bbox/AP": 50.0 + seed, "bbox/AP50": 80.0, "bbox/AP75": 55.0 + 2 * seed,
         "segm/AP": 40.0 + seed, "segm/AP50": 60.0, "segm/AP75": 42.0}
lines = [{"iteration": 10, "total_loss": 1.0}, final]
(out / "metrics.json").write_text("\\n".join(json.dumps(x) for x in lines) + "\\n")
"""


def _state() -> dict[str, torch.Tensor]:
    from torchvision.models import resnet50

    torch.manual_seed(0)
    return {f"backbone.{k}": v for k, v in resnet50().state_dict().items() if not k.startswith("fc.")}


STATE = None


def _dep(base: Path) -> Dependency:
    global STATE
    STATE = STATE if STATE is not None else _state()
    return Dependency("init_from", "r", base, lambda: STATE, dict, dict)


def _cfg(script: Path | None, **method):
    return build_config({"method": {"name": "detectron2_transfer", "num_gpus": 2, **method,
                                    **({"train_net": str(script)} if script else {})}}, where="test")


def test_five_trials_run_with_the_registered_values_and_their_mean_is_reported(tmp_path):
    script = tmp_path / "fake_train_net.py"
    script.write_text(FAKE)
    metrics = transfer.transfer_metrics(_cfg(script), [_dep(tmp_path / "base")])
    ap = [50.0 + t for t in range(5)]  # trial seeds 0..4
    assert metrics["ap"] == 52.0 and metrics["ap50"] == 80.0 and metrics["ap75"] == 59.0
    assert metrics["ap_std"] == pytest.approx(statistics.stdev(ap)) == pytest.approx(1.5811388300841898)
    assert metrics["ap50_std"] == 0.0 and metrics["trials"] == 5.0
    out = tmp_path / "base" / "detectron2" / "voc"
    argv = json.loads((out / "trial3" / "argv.json").read_text())
    assert argv[:2] == ["--num-gpus", "2"]  # no --config-file: detectron2's defaults + the registered values
    assert argv[2:2 + len(BENCHMARK_OPTS["voc"])] == BENCHMARK_OPTS["voc"]
    opts = dict(zip(argv[2::2], argv[3::2], strict=False))
    assert opts["MODEL.ROI_HEADS.NAME"] == "Res5ROIHeadsExtraNorm" and opts["TEST.PRECISE_BN.ENABLED"] == "True"
    assert opts["SOLVER.MAX_ITER"] == "24000" and opts["SOLVER.BASE_LR"] == "0.02"
    assert argv[-6:] == ["SEED", "3", "MODEL.WEIGHTS", str(out / "backbone.pkl"), "OUTPUT_DIR", str(out / "trial3")]
    weights = pickle.loads((out / "backbone.pkl").read_bytes())["model"]
    assert weights["stem.conv1.weight"].shape == (64, 3, 7, 7) and "res5.2.conv3.weight" in weights
    # a requeued job runs only the trials without a final evaluation
    (out / "trial4" / "metrics.json").unlink()
    (out / "calls.txt").unlink()
    again = transfer.transfer_metrics(_cfg(script), [_dep(tmp_path / "base")])
    assert again == metrics and (out / "calls.txt").read_text().split() == ["trial4"]


def test_coco_reads_box_and_mask_metrics_under_the_table_keys(tmp_path):
    script = tmp_path / "fake_train_net.py"
    script.write_text(FAKE)
    metrics = transfer.transfer_metrics(_cfg(script, benchmark="coco", trials=2),
                                                                     [_dep(tmp_path / "base")])
    assert {k: metrics[k] for k in ("ap_bb", "ap75_bb", "ap_mk", "ap50_mk")} == \
        {"ap_bb": 50.5, "ap75_bb": 56.0, "ap_mk": 40.5, "ap50_mk": 60.0}
    assert "MODEL.MASK_ON" in BENCHMARK_OPTS["coco"] and BENCHMARK_OPTS["coco"][
        BENCHMARK_OPTS["coco"].index("MODEL.MASK_ON") + 1] == "True"


def test_default_command_is_our_entry_point_and_the_preflight_only_writes_it(tmp_path):
    cmd = transfer.train_net_command("py", None, None, Path("w.pkl"), Path("o"), 8, ["A", "1"], seed=2, resume=True)
    assert cmd == ["py", "-m", "semcl.methods.transfer.train_net", "--num-gpus", "8", "--resume", "A", "1",
                   "SEED", "2", "MODEL.WEIGHTS", "w.pkl", "OUTPUT_DIR", "o"]
    with_file = transfer.train_net_command("py", Path("t.py"), "base.yaml", Path("w"), Path("o"), 1, [])
    assert with_file[:5] == ["py", "t.py", "--config-file", "base.yaml", "--num-gpus"]
    cfg = build_config({"method": {"name": "detectron2_transfer"}, "data": {"synthetic": True}}, where="test")
    assert transfer.transfer_metrics(cfg, [_dep(tmp_path / "b")]) == {}
    commands = json.loads((tmp_path / "b" / "detectron2" / "voc" / "commands.json").read_text())
    assert len(commands) == 5 and [c[c.index("SEED") + 1] for c in commands] == ["0", "1", "2", "3", "4"]
    assert commands[0][1:3] == ["-m", "semcl.methods.transfer.train_net"]


def test_mean_over_trials_by_hand_and_a_trial_missing_a_metric():
    got = transfer.mean_over_trials([{"ap": 1.0, "ap50": 4.0}, {"ap": 2.0, "ap50": 4.0}, {"ap": 6.0, "ap50": 4.0}])
    assert got == {"ap": 3.0, "ap_std": pytest.approx(2.6457513110645907), "ap50": 4.0, "ap50_std": 0.0,
                   "trials": 3.0}
    with pytest.raises(DataError, match="trial 2 reports"):
        transfer.mean_over_trials([{"ap": 1.0, "ap50": 2.0}, {"ap": 1.0}])


def test_bad_files_and_missing_detectron2_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="'method.train_net'"):
        transfer.transfer_metrics(_cfg(tmp_path / "nope.py"), [_dep(tmp_path / "b")])
    monkeypatch.setattr(train_net.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="needs detectron2, which is not installed") as err:
        transfer.transfer_metrics(_cfg(None), [_dep(tmp_path / "b")])
    assert "\n" not in str(err.value) and "git+https://github.com/facebookresearch/detectron2" in str(err.value)
    with pytest.raises(ConfigError, match="trials"):
        _cfg(None, trials=0)


def test_entry_point_registers_the_extra_norm_head_once(monkeypatch):
    class Registry(dict):
        def register(self, cls):
            self[cls.__name__] = cls

        def get(self, name):
            return self[name]

    class Res5ROIHeads:  # detectron2's builds res5 in a classmethod and returns (block, channels)
        @classmethod
        def _build_res5_block(cls, cfg):
            return torch.nn.Sequential(torch.nn.Identity()), 2048

    registry = Registry()
    layers = types.SimpleNamespace(get_norm=lambda norm, channels: torch.nn.BatchNorm2d(channels) if norm == "SyncBN"
                                   else None)
    heads = types.SimpleNamespace(ROI_HEADS_REGISTRY=registry, Res5ROIHeads=Res5ROIHeads)
    monkeypatch.setitem(sys.modules, "detectron2", types.ModuleType("detectron2"))
    monkeypatch.setitem(sys.modules, "detectron2.layers", layers)
    monkeypatch.setitem(sys.modules, "detectron2.modeling", types.ModuleType("detectron2.modeling"))
    monkeypatch.setitem(sys.modules, "detectron2.modeling.roi_heads", heads)
    head = train_net.register_extra_norm_head()
    assert registry == {"Res5ROIHeadsExtraNorm": head} and train_net.register_extra_norm_head() is head
    cfg = types.SimpleNamespace(MODEL=types.SimpleNamespace(RESNETS=types.SimpleNamespace(NORM="SyncBN")))
    seq, channels = head._build_res5_block(cfg)
    assert channels == 2048 and [n for n, _ in seq.named_children()] == ["0", "norm"]
    assert isinstance(seq.norm, torch.nn.BatchNorm2d) and seq.norm.num_features == 2048
