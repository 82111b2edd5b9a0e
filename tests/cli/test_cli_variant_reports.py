"""`--set` on claims, figure, report, export and the Python API: the variant rows' runs are read where a command
reads a varied row (real smoke runs of a tiny CE row, and generated records for the claims' rince/tab2), the
outputs go under variants/<slug> beside the default ones, and a bad key is the one line `table --set` gives."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch

from semcl.cli.main import main
from semcl.evals.protocols import metric_key
from semcl.registry.plan import make_run_id, plan_runs
from semcl.registry.set_options import slug
from semcl.registry.tables import get_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
SET = "optim.lr=0.1"
CE = """\
id: test/{name}
paper: gpaco
source: "test"
title: CE rows
preset: paco_imagenet_lt_resnet50
seeds: [123, 546]
columns:
  - {{key: top1, label: "Top-1", eval: accuracy, group: overall}}
rows:
  - {{label: CE a, method: ce}}
  - {{label: CE b, method: ce, overrides: {{optim.lr: 0.05}}}}
{figure}profiles:
  smoke:
    overrides: {{data.synthetic: true, data.image_size: 16, model.backbone: resnet_tiny, optim.batch_size: 32,
                schedule.epochs: 1}}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("registry") / "experiments"
    shutil.copytree(REPO / "experiments" / "presets", root / "presets")
    shutil.copytree(REPO / "experiments" / "rince", root / "rince")
    (root / "test").mkdir()
    (root / "test" / "ce.yaml").write_text(CE.format(name="ce", figure=""))
    (root / "test" / "fig.yaml").write_text(CE.format(name="fig", figure="figure: {kind: lines, columns: [top1]}\n"))
    return root


@pytest.fixture(scope="module")
def trained(registry, tmp_path_factory) -> Path:
    """A store with two real smoke runs of test/ce, seed 123: `CE a` and its variant `CE a [optim.lr=0.1]`."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SEMCL_REGISTRY", str(registry))
    mp.setenv("SEMCL_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.delenv("SEMCL_PRECISION", raising=False)
    results = tmp_path_factory.mktemp("trained") / "results"
    base = ["--results", str(results), "run", "test/ce", "--profile", "smoke", "--row", "CE a", "--seeds", "1",
            "--executor", "debug", "--data-root", str(results.parent / "data")]
    assert main(base) == 0 and main([*base, "--set", SET]) == 0
    # one epoch on synthetic data scores chance for both rows: the variant's top-1 moved by 10, so that every
    # reader below shows which run it read
    store, table = Store(results), get_table("test/ce")
    key = metric_key(table.columns[0], table.profile("smoke").substitute)
    path = store.metrics_path(run_id("test/ce", "CE a", 0.1))
    record = json.loads(path.read_text())
    record["metrics"][key] += 10.0
    path.write_text(json.dumps(record))
    mp.undo()
    return results


@pytest.fixture
def env(registry, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SEMCL_REGISTRY", str(registry))
    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    monkeypatch.delenv("SEMCL_RESULTS", raising=False)
    return tmp_path / "results"


def run_id(table_id: str, label: str, lr: float | None = None, seed: int = 123) -> str:
    """The id by hand: the registered row's resolved config (with optim.lr changed), hashed as any run."""
    table = get_table(table_id)
    cfg = table.resolve(table.row(label), "smoke")
    if lr is not None:
        cfg.optim.lr = lr
    return make_run_id(cfg, seed)


def top1(store: Store, rid: str, table_id: str = "test/ce") -> float:
    table = get_table(table_id)
    key = metric_key(table.columns[0], table.profile("smoke").substitute)
    return float(json.loads(store.metrics_path(rid).read_text())["metrics"][key])


def test_api_summary_long_frame_and_plan_with_sets(env, trained):
    from semcl import api

    store = Store(trained)
    ours, variant = run_id("test/ce", "CE a"), run_id("test/ce", "CE a", 0.1)
    summ = api.summary("test/ce", "smoke", trained, sets=[SET], rows=["CE a"]).set_index("row")
    assert list(summ.index) == ["CE a", "CE a [optim.lr=0.1]", "CE b"]
    assert summ.loc["CE a [optim.lr=0.1]", "mean"] == top1(store, variant) and summ.loc["CE a [optim.lr=0.1]", "n"] == 1
    assert summ.loc["CE a", "mean"] == top1(store, ours) and summ.loc["CE b", "n"] == 0
    assert top1(store, variant) == top1(store, ours) + 10.0
    long = api.long_frame("test/ce", "smoke", trained, sets=SET)  # one text alone is one setting
    # without rows every row varies: CE b differs from CE a by its lr alone, so its variant is the same run
    assert dict(zip(long.row, long.run_id, strict=True)) == {"CE a": ours, "CE a [optim.lr=0.1]": variant,
                                                            "CE b [optim.lr=0.1]": variant}
    planned = api.plan("test/ce", "smoke", trained, sets=[SET], rows=["CE a"])
    assert list(planned.id) == [variant, run_id("test/ce", "CE a", 0.1, 546)]
    assert list(planned.status) == ["done", "missing"]
    assert [r.run_id for r in api.runs("test/ce", "smoke", sets=[SET], rows=["CE a"])][:3] == [
        ours, run_id("test/ce", "CE a", seed=546), variant]


def test_export_writes_the_variant_runs_weights(env, trained, capsys):
    variant = run_id("test/ce", "CE a", 0.1)
    assert main(["--results", str(trained), "export", "test/ce", "CE a", "--profile", "smoke", "--set", SET,
                 "--format", "state_dict"]) == 0
    weights = trained / "exports" / variant / f"resnet_tiny.{slug([SET])}.state_dict.safetensors"
    assert capsys.readouterr().out.splitlines()[0] == f"wrote {weights}"
    from safetensors.torch import load_file

    exported = load_file(weights)
    ckpt = torch.load(trained / "runs" / variant / "checkpoints" / "last.pt", weights_only=False)["method"]
    backbone = {k.removeprefix("backbone."): v for k, v in ckpt.items() if k.startswith("backbone.")}
    assert exported.keys() == backbone.keys() and all(torch.equal(exported[k], backbone[k]) for k in backbone)
    assert json.loads(weights.with_name(weights.name + ".json").read_text())["source_run"] == variant
    # without --set: the registered row's run, under the default name
    assert main(["--results", str(trained), "export", "test/ce", "CE a", "--profile", "smoke", "--format",
                 "state_dict"]) == 0
    plain = trained / "exports" / run_id("test/ce", "CE a") / "resnet_tiny.state_dict.safetensors"
    assert capsys.readouterr().out.splitlines()[0] == f"wrote {plain}"


def test_figure_draws_the_variant_beside_the_registered_rows(env, trained):
    store = Store(trained)
    assert run_id("test/fig", "CE a", 0.1) == run_id("test/ce", "CE a", 0.1)  # test/fig's rows are test/ce's: same runs
    assert main(["--results", str(trained), "figure", "test/fig", "--profile", "smoke", "--row", "CE a",
                 "--set", SET]) == 0
    folder = trained / "figures" / "variants" / slug([SET])
    with open(folder / "test_fig.smoke.csv") as f:
        points = {r["row"]: r for r in csv.DictReader(f)}
    assert list(points) == ["CE a", "CE a [optim.lr=0.1]", "CE b"]
    assert float(points["CE a [optim.lr=0.1]"]["mean"]) == pytest.approx(top1(store, run_id("test/ce", "CE a", 0.1)))
    assert float(points["CE a"]["mean"]) == pytest.approx(top1(store, run_id("test/ce", "CE a")))
    assert (folder / "test_fig.smoke.png").stat().st_size > 0
    assert not (trained / "figures" / "test_fig.smoke.csv").exists()  # the default figure is not written


def test_report_renders_the_variant_tables_in_a_folder_of_their_own(env, trained, capsys):
    variant = top1(Store(trained), run_id("test/ce", "CE a", 0.1))
    assert main(["--results", str(trained), "report", "gpaco", "--profile", "smoke", "--set", SET]) == 0
    page = (trained / "reports" / "variants" / slug([SET]) / "gpaco.smoke.md").read_text()
    assert f"`semcl report gpaco --profile smoke --set {SET}`" in page and "Variant `--set optim.lr=0.1`" in page
    line = next(ln for ln in page.splitlines() if ln.startswith("| CE a [optim.lr=0.1] |"))
    assert f"{variant:.2f} (n=1)" in line
    assert main(["--results", str(trained), "report", "gpaco", "--profile", "smoke", "--set", SET, "--html"]) == 0
    html = (trained / "reports" / "variants" / slug([SET]) / "gpaco.smoke.html").read_text()
    assert f"--profile smoke --set {SET} --html</code>" in html and "CE a [optim.lr=0.1]" in html
    assert not (trained / "reports" / "gpaco.smoke.md").exists()


def fill(store: Store, label: str, lr: float | None, base: float) -> None:
    """rince/tab2 records of the row (its variant with lr): every column = base + the seed's index."""
    table = get_table("rince/tab2")
    cfg = table.resolve(table.row(label), "smoke")
    if lr is not None:
        cfg.optim.lr = lr
    subst = table.profile("smoke").substitute
    for i, seed in enumerate(table.seeds_for("smoke")):
        rid = make_run_id(cfg, seed)
        store.write_record(rid, {"run_id": rid, "metrics": {metric_key(c, subst): base + i for c in table.columns
                                                            if metric_key(c, subst)}})


def claim(text: str, cid: str) -> dict:
    return next(r for r in csv.DictReader(text.splitlines()) if r["id"] == cid)


def test_claims_read_the_variants_runs(env, capsys):
    store = Store(env)
    fill(store, "RINCE-in", None, 50.0)
    fill(store, "RINCE-in", 0.1, 60.0)
    fill(store, "SCL-in", None, 55.0)
    assert main(["--results", str(env), "claims", "rince", "--profile", "smoke", "--format", "csv"]) == 0
    default = claim(capsys.readouterr().out, "abs-in-top1")
    assert (default["a"], float(default["mean_a"]), float(default["mean_b"])) == ("RINCE-in", 51.0, 56.0)
    page = env / "claims" / "rince.smoke.csv"
    before = page.read_bytes()
    assert main(["--results", str(env), "claims", "rince", "--profile", "smoke", "--format", "csv", "--row",
                 "RINCE-in", "--set", SET]) == 0
    varied = claim(capsys.readouterr().out, "abs-in-top1")
    assert (varied["a"], float(varied["mean_a"]), float(varied["n_a"]), varied["b"], float(varied["mean_b"])) == (
        "RINCE-in [optim.lr=0.1]", 61.0, 3, "SCL-in", 56.0)
    assert varied["verdict"] == "supported" and default["verdict"] == "contradicted"
    assert page.read_bytes() == before and (env / "claims" / "variants" / slug([SET]) / "rince.smoke.csv").exists()
    assert main(["--results", str(env), "claims", "rince", "--profile", "smoke", "--row", "RINCE-in", "--set", SET]) == 0
    md = capsys.readouterr().out.splitlines()
    assert md[2].startswith("Variant `--set optim.lr=0.1`: a claim on one of the 1 varied row(s) reads its variant's")
    assert any(ln.startswith("| `abs-in-top1` | RINCE-in [optim.lr=0.1] > SCL-in on top1 (rince/tab2) | 61.00 ± 1.00 "
                             "(n=3) | 56.00 ± 1.00 (n=3) |") for ln in md)


@pytest.mark.parametrize("command", [["claims", "rince"], ["figure", "test/fig"], ["report", "rince"],
                                     ["export", "rince/tab2", "RINCE-in", "--format", "timm"]])
def test_a_bad_key_is_the_one_line_of_table_set(env, capsys, command):
    assert main(["--results", str(env), *command, "--profile", "smoke", "--set", "optim.lrr=0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "semcl: error: --set 'optim.lrr=0.1': unknown key 'optim.lrr' (known in optim: "), err
    assert not env.exists()


def test_a_sweep_is_refused_where_one_variant_is_read(env, capsys):
    assert main(["--results", str(env), "export", "rince/tab2", "RINCE-in", "--profile", "smoke", "--format", "timm",
                 "--set", "optim.lr=0.1,0.2"]) == 2
    assert capsys.readouterr().err.strip() == ("semcl: error: --set optim.lr=0.1,0.2: `semcl export` reads one variant "
                                               "at a time; give one value per key (one command per value)")
    assert plan_runs(get_table("rince/tab2"), "smoke", ["RINCE-in"])  # nothing else touched
