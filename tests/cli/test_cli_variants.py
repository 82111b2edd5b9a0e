"""`--set key=value` variants on plan / run / check / table: own run ids (the registered config with the
key changed, hashed as any run), stable across invocations, the strict schema's one-line errors, the
variant label in tables, and the registered rows' records and preflight left as they were."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from semcl.cli.main import main
from semcl.evals.protocols import metric_key
from semcl.registry.plan import make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
TABLE = "rince/tab2"

# two CE rows and ensembles of them (what builds on a varied row is a variant too)
ENSEMBLES = """\
id: test/ensembles
paper: gpaco
source: "test"
title: CE rows and logit-sum ensembles
preset: paco_imagenet_lt_resnet50
seeds: [123, 546]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: CE a, method: ce}
  - {label: CE b, method: ce, overrides: {optim.lr: 0.05}}
  - {label: a plus b, method: ensemble, ensemble: [CE a, CE b]}
profiles:
  smoke:
    overrides: {data.synthetic: true, data.image_size: 16, model.backbone: resnet_tiny, optim.batch_size: 32,
                schedule.epochs: 1}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    """The rince tables, their presets and test/ensembles: small enough to load in a moment."""
    root = tmp_path_factory.mktemp("registry") / "experiments"
    shutil.copytree(REPO / "experiments" / "presets", root / "presets")
    shutil.copytree(REPO / "experiments" / "rince", root / "rince")
    (root / "test").mkdir()
    (root / "test" / "ensembles.yaml").write_text(ENSEMBLES)
    return root


@pytest.fixture
def env(registry, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SEMCL_REGISTRY", str(registry))
    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    monkeypatch.delenv("SEMCL_RESULTS", raising=False)
    return tmp_path / "results"


def plan_json(capsys, results: Path, *args) -> dict:
    assert main(["--results", str(results), "plan", *args, "--profile", "smoke", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def variant_ids(table_id: str, label: str, **values) -> list[str]:
    """The ids by hand: the registered row's resolved config with the values changed, hashed as any run."""
    table = get_table(table_id)
    cfg = table.resolve(table.row(label), "smoke")
    for key, value in values.items():
        setattr(cfg.optim, key, value)
    return [make_run_id(cfg, seed) for seed in table.seeds_for("smoke")]


def test_plan_set_gives_own_ids_equal_across_invocations(env, capsys):
    first = plan_json(capsys, env, TABLE, "--row", "RINCE-in", "--set", "optim.lr=0.1")
    again = plan_json(capsys, env, TABLE, "--set", "optim.lr=0.1", "--row", "RINCE-in")
    runs = first["tables"][0]["runs"]
    assert [r["row"] for r in runs] == ["RINCE-in [optim.lr=0.1]"] * 3
    assert [r["id"] for r in runs] == variant_ids(TABLE, "RINCE-in", lr=0.1)
    assert again == first
    registered = [r.run_id for r in plan_runs(get_table(TABLE), "smoke", ["RINCE-in"])]
    assert not set(registered) & {r["id"] for r in runs}
    # the registered plan is unchanged by the variant and still the row's
    plain = plan_json(capsys, env, TABLE, "--row", "RINCE-in")
    assert [r["id"] for r in plain["tables"][0]["runs"]] == registered
    # 1e-3 is a number on the command line (YAML 1.1 would read it as a string)
    small = plan_json(capsys, env, TABLE, "--row", "RINCE-in", "--set", "optim.lr=1e-3")
    assert [r["id"] for r in small["tables"][0]["runs"]] == variant_ids(TABLE, "RINCE-in", lr=0.001)


def test_method_key_varies_only_the_rows_whose_method_has_it(env, capsys):
    out = plan_json(capsys, env, TABLE, "--set", "method.tau=0.2")
    rows = list(dict.fromkeys(r["row"] for r in out["tables"][0]["runs"]))
    table = get_table(TABLE)
    with_tau = [r.label for r in table.rows if r.method in ("scl", "scl_two_heads") and not r.select]
    assert rows == [f"{label} [method.tau=0.2]" for label in with_tau]
    assert main(["plan", TABLE, "--row", "Triplet", "--set", "method.tau=0.2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "semcl: error: --set method.tau: row 'Triplet' of rince/tab2 (method 'triplet') has no field 'tau'")


def test_rows_built_on_a_variant_build_on_its_runs(env, capsys):
    table = get_table("test/ensembles")
    registered = {(r.row_label, r.seed): r.run_id for r in plan_runs(table, "smoke")}
    whole = plan_json(capsys, env, "test/ensembles", "--set", "optim.lr=0.2")["tables"][0]["runs"]
    by = {(r["row"], r["seed"]): r for r in whole}
    assert [r["row"] for r in whole][::2] == ["CE a [optim.lr=0.2]", "CE b [optim.lr=0.2]", "a plus b [optim.lr=0.2]"]
    assert by[("a plus b [optim.lr=0.2]", 546)]["after"] == [by[("CE a [optim.lr=0.2]", 546)]["id"],
                                                            by[("CE b [optim.lr=0.2]", 546)]["id"]]
    # only the ensemble varied: it builds on the registered members (planned with it, under their own labels)
    one = plan_json(capsys, env, "test/ensembles", "--row", "a plus b", "--set", "optim.lr=0.2")["tables"][0]["runs"]
    assert [(r["row"], r["seed"]) for r in one] == [("CE a", 123), ("CE a", 546), ("CE b", 123), ("CE b", 546),
                                                    ("a plus b [optim.lr=0.2]", 123), ("a plus b [optim.lr=0.2]", 546)]
    assert [r["id"] for r in one[:4]] == [registered[("CE a", 123)], registered[("CE a", 546)],
                                          registered[("CE b", 123)], registered[("CE b", 546)]]
    assert one[5]["after"] == [registered[("CE a", 546)], registered[("CE b", 546)]]
    assert one[5]["id"] != registered[("a plus b", 546)]


@pytest.mark.parametrize("command", [["plan"], ["run", "--executor", "debug"], ["check"], ["table"]])
@pytest.mark.parametrize("setting, message", [
    ("optim.lrr=0.1", "--set 'optim.lrr=0.1': unknown key 'optim.lrr' (known in optim: "),
    ("optim.lr=abc", "--set optim.lr=abc on rince/tab2 row 'RINCE-in', profile 'smoke': 'optim.lr' must be a number, "
                     "got 'abc'"),
    ("method.nope=1", "--set 'method.nope=1': unknown key 'method.nope' (no method has field 'nope'"),
    ("lr=0.1", "--set 'lr=0.1': key 'lr' is not <section>.<field>"),
])
def test_a_bad_key_or_value_fails_with_one_line_and_writes_nothing(env, capsys, command, setting, message):
    assert main(["--results", str(env), command[0], TABLE, *command[1:], "--profile", "smoke",
                 "--row", "RINCE-in", "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"semcl: error: {message}"), err
    assert not env.exists()


def fill(store: Store, ids: list[str], base: float) -> dict[str, bytes]:
    """A finished record per run id: every column = base + its seed's index; the records' bytes."""
    table = get_table(TABLE)
    subst = table.profile("smoke").substitute
    for i, rid in enumerate(ids):
        metrics = {metric_key(c, subst): base + i for c in table.columns if metric_key(c, subst)}
        store.write_record(rid, {"run_id": rid, "metrics": metrics})
    return {rid: store.metrics_path(rid).read_bytes() for rid in ids}


def test_table_shows_the_variant_beside_the_registered_row(env, capsys):
    store = Store(env)
    before = fill(store, [r.run_id for r in plan_runs(get_table(TABLE), "smoke", ["RINCE-in"])], 50.0)
    fill(store, variant_ids(TABLE, "RINCE-in", lr=0.1), 60.0)
    assert main(["--results", str(env), "table", TABLE, "--profile", "smoke", "--row", "RINCE-in",
                 "--set", "optim.lr=0.1"]) == 0
    lines = {ln.split(" | ")[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")}
    assert "51.00 ± 1.00 (n=3)" in lines["| RINCE-in"]
    assert "61.00 ± 1.00 (n=3)" in lines["| RINCE-in [optim.lr=0.1]"]
    assert list(lines).index("| RINCE-in [optim.lr=0.1]") == list(lines).index("| RINCE-in") + 1
    assert {rid: store.metrics_path(rid).read_bytes() for rid in before} == before
    # its own file; the registered table's file is not written
    assert not (env / "tables" / "rince_tab2.smoke.md").exists()
    assert [p.name for p in (env / "tables" / "variants").glob("*/*")] == ["rince_tab2.smoke.md"]


def test_run_submits_only_the_variants_runs(env, capsys, monkeypatch):
    import semcl.launch.backends
    import semcl.launch.local

    submitted = []
    monkeypatch.setattr(semcl.launch.backends, "check_data_root", lambda runs, root: None)
    monkeypatch.setattr(semcl.launch.local, "submit_runs", lambda runs, *a, **k: submitted.extend(runs))
    assert main(["--results", str(env), "run", TABLE, "--profile", "smoke", "--row", "RINCE-in",
                 "--set", "optim.lr=0.1", "--executor", "debug"]) == 0
    assert [r.run_id for r in submitted] == variant_ids(TABLE, "RINCE-in", lr=0.1)
    assert {r.row_label for r in submitted} == {"RINCE-in [optim.lr=0.1]"}
    assert {r.config.optim.lr for r in submitted} == {0.1}


def test_check_records_the_variant_apart(env, capsys, monkeypatch):
    import semcl.preflight.plan
    from semcl.preflight.check import distinct_runs
    from semcl.preflight.report import RowCheck

    def fake(tables, profile, *a, **k):  # what the check saw, each run ready
        return [RowCheck(t.id, r.row_label, r.run_id) for t in tables for r in distinct_runs(t, profile)]

    monkeypatch.setattr(semcl.preflight.plan, "check_tables", fake)
    assert main(["--results", str(env), "check", TABLE, "--profile", "smoke", "--row", "RINCE-in",
                 "--set", "optim.lr=0.1"]) == 0
    assert "RINCE-in [optim.lr=0.1]" in capsys.readouterr().out
    (status,) = (env / "preflight" / "variants").glob("*/smoke.json")
    assert json.loads(status.read_text())[TABLE]["run_ids"] == variant_ids(TABLE, "RINCE-in", lr=0.1)[:1]
    assert not (env / "preflight" / "smoke.json").exists()  # the registered rows' preflight is not replaced


def test_plan_text_keeps_its_columns_with_long_variant_labels(env, capsys):
    assert main(["--results", str(env), "plan", TABLE, "--profile", "smoke", "--set", "method.tau=0.2"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("#")]
    assert "SCL two heads [method.tau=0.2]" in lines[0]
    assert len({ln.index(" seed=") for ln in lines}) == 1


def test_a_row_without_runs_of_its_own_is_not_varied(env, capsys):
    assert main(["plan", TABLE, "--row", "Two heads", "--set", "optim.lr=0.1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "semcl: error: --set: row 'Two heads' of rince/tab2 has no runs of its own (it shows the best row of "
        "rince/tab10: vary that table's rows); nothing to vary")


def grid_ids(table_id: str, label: str, values: dict[str, object]) -> list[str]:
    """The ids by hand for any dotted keys: the registered row's resolved config with them changed."""
    table = get_table(table_id)
    cfg = table.resolve(table.row(label), "smoke")
    for key, value in values.items():
        section, name = key.split(".")
        setattr(getattr(cfg, section), name, value)
    return [make_run_id(cfg, seed) for seed in table.seeds_for("smoke")]


def test_a_sweep_plans_one_variant_per_value(env, capsys):
    swept = plan_json(capsys, env, "rince/tab9", "--set", "optim.lr=0.1,0.2")["tables"][0]["runs"]
    labels = [r.label for r in get_table("rince/tab9").rows]
    expected = [(f"{label} [optim.lr={lr}]", rid) for label in labels for lr in (0.1, 0.2)
                for rid in grid_ids("rince/tab9", label, {"optim.lr": lr})]
    assert [(r["row"], r["id"]) for r in swept] == expected and len(expected) == 18
    # the same key repeated is the same sweep; each value's runs are those of that value alone
    assert plan_json(capsys, env, "rince/tab9", "--set", "optim.lr=0.1", "--set", "optim.lr=0.2")["tables"][0][
        "runs"] == swept
    alone = plan_json(capsys, env, "rince/tab9", "--set", "optim.lr=0.2")["tables"][0]["runs"]
    assert [r["id"] for r in alone] == [r["id"] for r in swept if r["row"].endswith("[optim.lr=0.2]")]


def test_two_swept_keys_make_the_grid_and_a_list_keeps_its_commas(env, capsys):
    row = "alpha = 0.3"
    grid = plan_json(capsys, env, "rince/tab9", "--row", row, "--set", "schedule.epochs=2,3",
                     "--set", "optim.lr=0.1,0.2")["tables"][0]["runs"]
    cells = [{"optim.lr": lr, "schedule.epochs": e} for lr in (0.1, 0.2) for e in (2, 3)]
    assert [(r["row"], r["id"]) for r in grid] == [
        (f"{row} [optim.lr={c['optim.lr']}, schedule.epochs={c['schedule.epochs']}]", rid)
        for c in cells for rid in grid_ids("rince/tab9", row, c)]
    one = plan_json(capsys, env, "rince/tab9", "--row", row, "--set", "probe.milestones=[1,2]")["tables"][0]["runs"]
    assert [(r["row"], r["id"]) for r in one] == [
        (f"{row} [probe.milestones=[1, 2]]", rid) for rid in grid_ids("rince/tab9", row, {"probe.milestones": [1, 2]})]
    two = plan_json(capsys, env, "rince/tab9", "--row", row, "--set", "probe.milestones=[1,2],[2, 3]")["tables"][0]
    assert [r["row"] for r in two["runs"]][::3] == [f"{row} [probe.milestones=[1, 2]]", f"{row} [probe.milestones=[2, 3]]"]


@pytest.mark.parametrize("command", [["plan"], ["run", "--executor", "debug"], ["check"], ["table"], ["status"],
                                     ["curves"]])
@pytest.mark.parametrize("settings, message", [
    (["optim.lr=0.1,,0.2"], "--set 'optim.lr=0.1,,0.2': key 'optim.lr' has an empty value in its list of values"),
    (["optim.lr=0.1", "optim.lr=0.1"], "--set 'optim.lr=0.1': key 'optim.lr' is given the value 0.1 twice"),
    (["optim.lr=0.1,abc"], "--set optim.lr=abc on rince/tab2 row "),
    (["optim.lrr=0.1,0.2"], "--set 'optim.lrr=0.1,0.2': unknown key 'optim.lrr' (known in optim: "),
])
def test_a_bad_sweep_fails_with_one_line_and_writes_nothing(env, capsys, command, settings, message):
    sets = [x for s in settings for x in ("--set", s)]
    assert main(["--results", str(env), command[0], TABLE, *command[1:], "--profile", "smoke", *sets]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"semcl: error: {message}"), err
    assert not env.exists()


def test_table_shows_every_value_of_a_sweep_beside_the_row(env, capsys):
    store = Store(env)
    fill(store, [r.run_id for r in plan_runs(get_table(TABLE), "smoke", ["RINCE-in"])], 50.0)
    fill(store, variant_ids(TABLE, "RINCE-in", lr=0.1), 60.0)
    fill(store, variant_ids(TABLE, "RINCE-in", lr=0.2), 70.0)
    assert main(["--results", str(env), "table", TABLE, "--profile", "smoke", "--row", "RINCE-in",
                 "--set", "optim.lr=0.1,0.2"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("| RINCE-in |", "| RINCE-in ["))]
    assert [ln.split(" | ")[0] for ln in lines] == ["| RINCE-in", "| RINCE-in [optim.lr=0.1]", "| RINCE-in [optim.lr=0.2]"]
    assert ["51.00 ± 1.00 (n=3)" in lines[0], "61.00 ± 1.00 (n=3)" in lines[1], "71.00 ± 1.00 (n=3)" in lines[2]] == [
        True] * 3


def test_status_and_curves_see_a_variants_runs(env, capsys):
    store = Store(env)
    ids = variant_ids(TABLE, "RINCE-in", lr=0.1)
    for rid, losses in zip(ids, ([3.0, 2.0], [5.0, 4.0], [4.0, 3.0]), strict=True):
        store.write_record(rid, {"run_id": rid, "metrics": {},
                                 "history": [{"epoch": e, "loss": v} for e, v in enumerate(losses, 1)]})
    assert main(["--results", str(env), "status", TABLE, "--profile", "smoke", "--row", "RINCE-in",
                 "--set", "optim.lr=0.1"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"# {TABLE} profile=smoke", "# done: 3"]
    assert main(["--results", str(env), "curves", TABLE, "--profile", "smoke", "--set", "optim.lr=0.1",
                 "--rows", r"^RINCE-in \["]) == 0
    from semcl.registry.set_options import slug

    csv = (env / "curves" / "variants" / slug(["optim.lr=0.1"]) / "rince_tab2.smoke.loss.csv").read_text()
    assert csv.splitlines() == ["row,epoch,mean,std,min,max,n,nonfinite", "RINCE-in [optim.lr=0.1],1,4.0,1.0,3.0,5.0,3,0",
                                "RINCE-in [optim.lr=0.1],2,3.0,1.0,2.0,4.0,3,0"]


def test_set_passes_the_methods_dataset_check(tmp_path, capsys, monkeypatch):
    """`--set method.k=10` on CIFAR-10's SCNS-class row is refused as the registry refuses such a row (9 other
    classes); k 9 plans."""
    root = tmp_path / "experiments"
    shutil.copytree(REPO / "experiments" / "presets", root / "presets")
    (root / "scns").mkdir()
    shutil.copy(REPO / "experiments" / "scns" / "sup-cifar10.yaml", root / "scns")
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    results = tmp_path / "results"
    args = ["--results", str(results), "plan", "scns/sup-cifar10", "--profile", "paper", "--row",
            "SCNS-class resnet18_cifar", "--set"]
    assert main([*args, "method.k=10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["semcl: error: --set method.k=10 on scns/sup-cifar10 row 'SCNS-class resnet18_cifar', profile "
                   "'paper': 'method.k' = 10: SCNS-class needs 1 <= k <= 9 (the other classes of each class) "
                   "(cifar10 has 10 classes)"]
    assert main([*args, "method.k=9"]) == 0
    assert "SCNS-class resnet18_cifar [method.k=9]" in capsys.readouterr().out
