"""The method seam: a method is its own package plus one registry line, and the spine never names one.

A toy method defined in this file is registered in the dict and trained + evaluated through
`semcl run --profile smoke` without touching any other file."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from semcl.cli import main as cli
from semcl.data.views.recipes import AUGMENT_RECIPES
from semcl.errors import ConfigError
from semcl.evals.protocols.accuracy import THRESHOLDS
from semcl.methods.base import Batch, Method, makes_own_views
from semcl.methods.clips import ClipMethod, plans_clips
from semcl.methods.registry import METHODS, PLANNED_METHODS
from semcl.methods.spec import MethodSpec, StandIn
from semcl.models import LinearClassifier, build_backbone
from semcl.registry.entry import RowEntry
from semcl.run_config import build_config

SRC = Path(__file__).resolve().parents[2] / "src" / "semcl"
SPINE = ["cli", "registry", "config.py", "run_config.py", "store", "launch", "engine", "runtime", "estimate",
         "preflight", "report"]


def _spine_files() -> list[Path]:
    out = []
    for name in SPINE:
        path = SRC / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_every_spec_loads_its_class_and_its_schema_builds():
    for name, spec in METHODS.items():
        cls = spec.load()
        assert issubclass(cls, Method), name
        try:
            assert build_config({"method": {"name": name}}, where="test").method.name == name
        except ConfigError as err:  # a schema with a required knob (a teacher's network) names it
            assert "is required" in str(err) and "'method." in str(err), (name, err)
        for field_name, allowed in spec.choices.items():  # choices name real string fields
            assert field_name in {f.name for f in dataclasses.fields(spec.schema)}, (name, field_name)
            assert allowed and all(isinstance(v, str) for v in allowed)
    assert not set(METHODS) & set(PLANNED_METHODS)


def test_no_spine_file_names_a_method():
    # augmentation recipes and shot-group conventions share a few names with methods ("supcon" views,
    # "paco" thresholds): those vocabularies are not methods
    # a registry row's own keys ("ensemble:", a row field) are not method names either
    row_keys = {f.name for f in dataclasses.fields(RowEntry)}
    names = (set(METHODS) | set(PLANNED_METHODS)) - AUGMENT_RECIPES - set(THRESHOLDS) - row_keys
    classes = {spec.load().__name__ for spec in METHODS.values()}
    for path in _spine_files():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, f"{path}:{node.lineno} names method {node.value!r}"
            if isinstance(node, ast.Name | ast.Attribute):
                ident = node.id if isinstance(node, ast.Name) else node.attr
                assert ident not in classes, f"{path}:{node.lineno} names method class {ident}"
        text = path.read_text()
        assert not re.search(r"semcl\.methods\.(?!base|clips|registry|spec)\w+", text), f"{path} imports a method family"


def _probes(path: Path, root: Path = SRC) -> list[str]:
    """hasattr/getattr calls on a method (or a method config) in one file: every hook they would read is
    declared on Method / MethodSpec instead, with a default."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
            target = node.args[0]
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if "method" in name:
                out.append(f"{path.relative_to(root)}:{node.lineno} probes the method with {node.func.id}")
    return out


def test_no_caller_outside_methods_probes_a_method():
    # the engine, the evaluation protocols, the preflight and every other caller: all of src/semcl but methods/
    callers = [p for p in sorted(SRC.rglob("*.py")) if "methods" not in p.relative_to(SRC).parts]
    assert SRC / "preflight" / "check.py" in callers and any("protocols" in p.parts for p in callers)
    assert [line for path in callers for line in _probes(path)] == []


def _config_probes(path: Path, fields: set[str], root: Path = SRC) -> list[str]:
    """getattr/hasattr asking for a method-config field by name (`getattr(m, "arch", None)`): what a run trains
    is the method's declaration (MethodSpec.networks), not a probe of whichever config happens to carry it."""
    return [f"{path.relative_to(root)}:{node.lineno} probes a method config for {node.args[1].value!r}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in fields]


def test_no_caller_outside_methods_probes_a_method_config_field():
    fields = {f.name for spec in METHODS.values() for f in dataclasses.fields(spec.schema)} - {"name"}
    assert {"arch", "backbone", "num_frames", "teacher_arch"} <= fields
    callers = [p for p in sorted(SRC.rglob("*.py")) if "methods" not in p.relative_to(SRC).parts]
    assert [line for path in callers for line in _config_probes(path, fields)] == []


def test_the_probe_scan_sees_a_probe(tmp_path):
    fake = tmp_path / "f.py"
    fake.write_text("def f(ctx, method):\n    return getattr(ctx.method, 'k', None) + hasattr(method, 'segment')"
                    " + getattr(ctx, 'y')\n")
    assert sorted(_probes(fake, tmp_path)) == ["f.py:2 probes the method with getattr",
                                               "f.py:2 probes the method with hasattr"]
    fake.write_text("def f(cfg):\n    m = cfg.method\n    return getattr(m, 'arch', None)\n")
    assert _config_probes(fake, {"arch"}, tmp_path) == ["f.py:3 probes a method config for 'arch'"]


# ---- a toy method that lives in this file only -------------------------------------------------

@dataclass
class ToyMethod:
    name: str = "toy"
    scale: float = 1.0
    mode: str = "plain"


SEEN: list[tuple[int, int, int, torch.Tensor]] = []


class ToyLinear(Method):
    """Cross-entropy on logits x scale; records what the engine hands it."""

    has_classifier = True

    def __init__(self, cfg, info):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        SEEN.append((batch.epoch, batch.step, len(batch.views), batch.indices.clone()))
        logits = self.classifier(self.backbone(batch.views[0])) * self.cfg.method.scale
        return {"loss": F.cross_entropy(logits, batch.labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.backbone(x))


TOY_TABLE = """\
id: toy/tab
paper: toy
source: "test"
title: a method registered from a test file
seeds: [7]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
  - {key: probe, label: "Probe", eval: linear_probe}
rows:
  - {label: Toy, method: toy, overrides: {method.scale: 2.0}}
profiles:
  smoke:
    overrides:
      data.name: fashion_mnist
      data.synthetic: true
      data.synthetic_train_per_class: 4
      data.synthetic_test_per_class: 2
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 8
      optim.warmup_epochs: 0
      schedule.epochs: 2
      probe.epochs: 1
"""


@pytest.fixture
def toy_registry(tmp_path, monkeypatch) -> Path:
    monkeypatch.setitem(METHODS, "toy", MethodSpec("toy", ToyMethod, ToyLinear, train_cost=1.0,
                                                   choices={"mode": frozenset({"plain"})}))
    root = tmp_path / "experiments"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "tab.yaml").write_text(TOY_TABLE)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    return root


@pytest.mark.usefixtures("single_thread")
def test_a_toy_method_trains_and_evaluates_through_semcl_run(toy_registry, tmp_path, capsys):
    SEEN.clear()
    results = tmp_path / "results"
    assert cli.main(["--results", str(results), "run", "toy/tab", "--profile", "smoke", "--executor", "debug"]) == 0
    (record_path,) = results.glob("runs/*/metrics.json")
    record = json.loads(record_path.read_text())
    assert record["row"] == "Toy" and record["config"]["method"] == {"name": "toy", "scale": 2.0, "mode": "plain"}
    assert {"head_top1", "linear_top1_last"} <= set(record["metrics"])
    # 40 synthetic training images, batches of 8: 5 steps in each of 2 epochs, one view each
    assert [(e, s, v) for e, s, v, _ in SEEN] == [(e, s, 1) for e in range(2) for s in range(5)]
    for epoch in range(2):  # every image once per epoch, as the batch's indices say
        seen = torch.cat([idx for e, _, _, idx in SEEN if e == epoch])
        assert torch.equal(seen.sort().values, torch.arange(40))
    capsys.readouterr()
    assert cli.main(["--results", str(results), "table", "toy/tab", "--profile", "smoke"]) == 0
    assert "Toy" in capsys.readouterr().out


def test_a_toy_method_choice_is_checked_by_its_spec(toy_registry):
    with pytest.raises(ConfigError, match=r"'method.mode' = 'fancy' is not one of \['plain'\]"):
        build_config({"method": {"name": "toy", "mode": "fancy"}}, where="test")


def _members(cls: type) -> set[str]:
    """What a class itself declares: its methods and attributes (annotated or assigned), dunders but __init__ aside."""
    own = {k for k in vars(cls) if not k.startswith("__") or k == "__init__"}
    return own | set(vars(cls).get("__annotations__", {}))


def test_the_method_contract_stays_narrow():
    # training, views, evaluation; video hooks live on ClipMethod and the preflight's needs on MethodSpec.stand_in
    members = _members(Method)
    assert len(members) <= 25, sorted(members)
    assert {"prepare", "loss"} <= members and "training_step" not in members
    assert not members & {"clip_plan", "decode_plan", "finish_views", "classify_clips", "host_state", "mining_search",
                          "stand_in_neighbours", "stand_in_per_class", "stand_in_batch", "write_stand_in_files"}
    assert len(_members(ClipMethod)) <= 8


def test_every_hook_a_caller_reads_is_declared_with_a_default():
    # the base's defaults: no segmenter, the engine's default views; ClipMethod's: no clip classifier, the
    # evaluations' default clip sampler; no neighbour search for the preflight's stand-in set
    assert (Method.has_segmenter, ClipMethod.has_clip_classifier, ClipMethod.clip_sampler) == (False, False, None)
    assert StandIn().neighbours_of(None) == 0 and StandIn().batch_of(None, 4) == {}
    with pytest.raises(NotImplementedError, match="ToyLinear has no"):
        ToyLinear.segment(object.__new__(ToyLinear), torch.zeros(1))
    classes = {name: spec.load() for name, spec in METHODS.items()}
    with pytest.raises(NotImplementedError, match="VideoContrastive has no"):
        ClipMethod.classify_clips(object.__new__(classes["video_rince"]), torch.zeros(1))
    made = {name: makes_own_views(object.__new__(cls)) for name, cls in classes.items()}
    assert issubclass(classes["video_finetune"], ClipMethod) and classes["video_finetune"].has_clip_classifier
    assert made["video_finetune"] and made["video_rince"] and not classes["video_rince"].has_clip_classifier
    assert plans_clips(object.__new__(classes["video_rince"])) and not plans_clips(object.__new__(ToyLinear))
    assert classes["seg_baseline"].has_segmenter and classes["gpaco_seg"].has_segmenter
    assert not made["seg_baseline"]
    assert not makes_own_views(object.__new__(ToyLinear))  # true only where make_views is overridden
    # the preflight's stand-in size: HSA's k (MoCo v2: no search), SCNS's top-k
    hsa = build_config({"method": {"name": "hsa", "k": 40}}, where="test").method
    assert METHODS["hsa"].stand_in.neighbours_of(hsa) == 40
    assert METHODS["mocov2"].stand_in.neighbours_of(build_config({"method": {"name": "mocov2"}}, where="test").method) == 0
    assert METHODS["scns_supcon"].stand_in.neighbours_of(build_config({"method": {"name": "scns_supcon"}},
                                                                      where="test").method) == 10
