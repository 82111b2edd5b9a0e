"""The evaluation seam: an evaluation is its own module plus one registry line, nothing else.

A toy evaluation defined in this file (what would be `src/semcl/evals/protocols/toy_nn.py`) declares
its column field, its run settings and their allowed strings; registering it is one line
(`EVALUATIONS["toy_nn"] = EVALUATION`, here through monkeypatch). A registry table then uses it, the
planned run's `eval` section carries its settings, the engine's evaluate runs it on a tiny method, and
its numbers are checked against a hand-computed case; every existing table keeps its run ids meanwhile."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from semcl.data import ImageSet
from semcl.engine.evaluate import evaluate
from semcl.errors import ConfigError
from semcl.evals import protocols
from semcl.evals.protocols import EVALUATIONS, knn, validate_column
from semcl.evals.protocols.assemble import DeclarationError, assemble
from semcl.evals.protocols.spec import Column, Evaluation
from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_registry, load_table
from semcl.run_config import build_config
from semcl.schema import POSITIVE

REPO = Path(__file__).resolve().parents[2]

# ---- the toy evaluation: the whole of its module ------------------------------------------------
# n-nearest-neighbour vote on the 1-d backbone features (distance |a - b|): a test image is a hit when
# the vote of its n nearest training images gives its label (majority), or when all n have it (unanimous)


@dataclass
class ColumnFields:
    n: int | None = field(default=None, metadata=POSITIVE)  # neighbours voting (None = 1)


@dataclass
class Settings:
    toy_nn: list[int] | None = None  # the ns computed (None = off: tables without the column keep their ids)
    toy_vote: str | None = None  # majority | unanimous (None = majority)


def _n(column: Column) -> int:
    return column.n or 1


def validate(column: Column, where: str) -> None:
    """n's type and sign are checked by the column schema."""


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"toy_nn{_n(column)}"


def describe(column: Column) -> str:
    return f"{_n(column)}-nearest-neighbour vote on 1-d features (eval.toy_vote)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:
        ev["toy_nn"] = sorted({_n(c) for c in columns})


def run(ctx) -> dict[str, float]:
    dist = (ctx.test_features[:, :1] - ctx.train_features[:, :1].T).abs()  # [test, train]
    out = {}
    for n in ctx.cfg.eval.toy_nn:
        votes = ctx.train.labels[dist.topk(n, largest=False).indices]  # [test, n]
        if ctx.cfg.eval.toy_vote == "unanimous":
            hit = (votes == ctx.test.labels[:, None]).all(dim=1)
        else:
            hit = votes.mode(dim=1).values == ctx.test.labels
        out[f"toy_nn{n}"] = 100.0 * hit.double().mean().item()
    return out


EVALUATION = Evaluation("toy_nn", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.toy_nn), run=run,
                        settings=Settings, choices={"toy_vote": frozenset({"majority", "unanimous"})})

# ---- the tests ----------------------------------------------------------------------------------

TOY_TABLE = """\
id: toy/nn
paper: toy
source: "test"
title: an evaluation registered from a test file
seeds: [0]
columns:
  - {key: nn1, label: "1-NN", eval: toy_nn}
  - {key: nn3, label: "3-NN", eval: toy_nn, n: 3}
rows:
  - {label: CE, method: ce}
profiles:
  smoke:
    overrides:
      data.name: cifar10
      data.synthetic: true
      model.backbone: resnet_tiny
      eval.toy_vote: unanimous
"""


@pytest.fixture
def toy(monkeypatch):
    load_registry.cache_clear()  # tables loaded before the toy existed hold the former column type
    monkeypatch.setitem(EVALUATIONS, "toy_nn", EVALUATION)  # the one registry line
    yield
    load_registry.cache_clear()


def _constant_set(values: list[int], labels: list[int]) -> ImageSet:
    """3 x 4 x 4 images, each one grey value: any test transform keeps an image constant, and normalising
    maps the value v to a v + b with a > 0, so the 1-d feature below orders images as v does."""
    images = torch.tensor(values, dtype=torch.uint8)[:, None, None, None].expand(-1, 3, 4, 4).contiguous()
    return ImageSet("cifar10", images, torch.tensor(labels), ["a", "b"])


class MeanPixel(torch.nn.Module):
    has_classifier = has_segmenter = has_clip_classifier = False

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # the context reads the device off a parameter

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(1, 2, 3))[:, None]


@pytest.mark.usefixtures("toy")
def test_a_toy_evaluation_runs_from_its_module_and_one_registry_line(tmp_path):
    path = tmp_path / "nn.yaml"
    path.write_text(TOY_TABLE)
    table = load_table(path, REPO / "experiments")
    assert [c.n for c in table.columns] == [None, 3]
    (run_,) = plan_runs(table, "smoke", precision="official")
    ev = run_.config.eval
    assert (ev.toy_nn, ev.toy_vote) == ([1, 3], "unanimous")  # the columns' ns and the profile's vote
    assert ev.linear_probe is False and ev.retrieval == [] and ev.knn is None  # nothing else runs

    # train grey values 10..60 (labels 0 0 0 1 1 1); test 14 36 44 58 26 with labels 0 0 1 1 1.
    # 1-NN: 14->10 (0) hit, 36->40 (1) miss, 44->40 hit, 58->60 hit, 26->30 (0) miss: 3/5 = 60 %.
    # 3-NN: 14 {10,20,30} = 0 0 0; 36 {40,30,50} = 1 0 1; 44 {40,50,30} = 1 1 0; 58 {60,50,40} = 1 1 1;
    # 26 {30,20,40} = 0 0 1. Unanimous hits: 14, 58 (40 %); majority hits: 14, 44, 58 (60 %).
    train = _constant_set([10, 20, 30, 40, 50, 60], [0, 0, 0, 1, 1, 1])
    test = _constant_set([14, 36, 44, 58, 26], [0, 0, 1, 1, 1])
    method = MeanPixel()
    assert evaluate(method, run_.config, train, test, None, 0) == {"toy_nn1": 60.0, "toy_nn3": 40.0}
    majority = dataclasses.replace(run_.config, eval=dataclasses.replace(ev, toy_vote=None))
    assert evaluate(method, majority, train, test, None, 0) == {"toy_nn1": 60.0, "toy_nn3": 60.0}


@pytest.mark.usefixtures("toy")
def test_the_toy_declarations_are_checked_like_any_field():
    with pytest.raises(ConfigError, match=r"^x.yaml: 'columns\[0\].n' must be > 0, got 0$"):
        validate_column({"key": "c", "label": "C", "eval": "toy_nn", "n": 0}, "x.yaml", 0)
    with pytest.raises(ConfigError, match=r"key 'n' does not apply to eval 'knn' \(it takes: k\)"):  # owned by the toy
        validate_column({"key": "c", "label": "C", "eval": "knn", "n": 3}, "x.yaml", 0)
    with pytest.raises(ConfigError, match=r"^t: 'eval.toy_vote' = 'plurality' is not one of \['majority', 'unanimous'\]$"):
        build_config({"eval": {"toy_vote": "plurality"}}, where="t")
    assert build_config({}, where="t").eval.toy_vote is None


@pytest.mark.usefixtures("toy")
def test_other_tables_keep_their_run_ids_with_the_toy_registered(monkeypatch):
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    assert "toy_nn" in {f.name for f in dataclasses.fields(protocols.EvalConfig)}
    spec = importlib.util.spec_from_file_location("run_ids_script", REPO / "scripts" / "run_ids.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.differences(json.loads(script.GOLDEN.read_text()), script.current_ids()) == []


def test_unregistering_the_toy_drops_its_field_and_setting():
    assert "toy_nn" not in EVALUATIONS  # the fixture's monkeypatch was undone
    assert "n" not in {f.name for f in dataclasses.fields(protocols.Column)}
    assert "toy_vote" not in {f.name for f in dataclasses.fields(protocols.EvalConfig)}


def test_two_evaluations_declaring_one_field_differently_are_refused():
    @dataclass
    class TextK:
        k: str | None = None  # knn's `k` is a positive integer

    clash = dataclasses.replace(EVALUATION, name="clash", column=TextK)
    with pytest.raises(DeclarationError, match=r"^evaluations 'knn' and 'clash' declare column field 'k' differently"):
        assemble([knn.EVALUATION, clash])
    twin = dataclasses.replace(EVALUATION, name="twin")  # declared alike: one shared field
    assert [f.name for f in dataclasses.fields(assemble([EVALUATION, twin]).column)] == ["key", "label", "eval", "n"]
