"""Rows that build on other rows: `init_from` (a second stage) and `ensemble` (a logit sum).

The registry checks the references, the plan orders bases first and folds their run ids into
the dependents' ids, and an ensemble run's metrics equal the summed logits scored by hand."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
import torch

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.registry.plan import make_run_id, member_seeds, plan_runs, waves
from semcl.registry.tables import get_table, load_registry
from semcl.store import Store


@pytest.fixture
def registry(ensemble_registry):
    return ensemble_registry


def _original(registry) -> str:
    return (registry / "test" / "ensemble.yaml").read_text()


def _write(registry, text: str):
    path = registry / "test" / "ensemble.yaml"
    path.write_text(text)
    load_registry.cache_clear()
    return path


def test_member_seeds_repeat_a_row_with_the_next_seeds():
    seeds = [1, 2, 3]
    assert member_seeds(("A", "A"), seeds, 2) == [("A", 2), ("A", 3)]
    assert member_seeds(("A", "A", "A"), seeds, 3) == [("A", 3), ("A", 1), ("A", 2)]
    assert member_seeds(("A", "B"), seeds, 3) == [("A", 3), ("B", 3)]
    with pytest.raises(ValueError, match="only 1 seed"):
        member_seeds(("A", "A"), [7], 7)


def test_plan_puts_bases_first_and_hashes_them_into_dependent_ids(registry):
    t = get_table("test/ensemble")
    runs = plan_runs(t, "smoke")
    by = {(r.row_label, r.seed): r for r in runs}
    a123, a546, b123 = by["CE a", 123], by["CE a", 546], by["CE b", 123]
    assert a123.depends_on == () and a123.run_id == make_run_id(a123.config, 123)  # plain runs keep their ids
    ens = by["Two seeds of a", 123]
    assert ens.depends_on == (a123.run_id, a546.run_id)
    assert by["Two seeds of a", 546].depends_on == (a546.run_id, a123.run_id)
    assert by["a plus b", 123].depends_on == (a123.run_id, b123.run_id)
    assert ens.run_id == make_run_id(ens.config, 123, ens.depends_on) != make_run_id(ens.config, 123)
    stages = waves(runs)
    assert [len(w) for w in stages] == [4, 4]
    assert {r.row_label for r in stages[1]} == {"Two seeds of a", "a plus b"}
    # selecting a dependent row brings in the runs it reads
    only = plan_runs(t, "smoke", ["a plus b"])
    assert sorted({r.row_label for r in only}) == ["CE a", "CE b", "a plus b"]


@pytest.mark.parametrize("old, new, message", [
    ("ensemble: [CE a, CE b]", "ensemble: [CE a, CE c]", "row 'a plus b': 'ensemble' names no row 'CE c'"),
    ("{label: CE b, method: ce, overrides", "{label: CE b, method: ce, init_from: CE a, overrides",
     "row 'CE b': key 'init_from': method 'ce' does not take other runs"),
    ("method: ensemble, ensemble: [CE a, CE b]", "method: ce, ensemble: [CE a, CE b]",
     "row 'a plus b': key 'ensemble': method 'ce' does not take other runs"),
    ("seeds: [123, 546]", "seeds: [123]", "'ensemble' repeats a row 2 times but the profile has 1 seed(s)"),
    ("{label: CE b, method: ce,", "{label: CE a, method: ce,", "two rows are labelled 'CE a'"),
])
def test_bad_references_fail_at_load_with_file_and_key(registry, old, new, message):
    table = _original(registry)
    assert old in table, old
    path = _write(registry, table.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_registry()
    assert str(err.value).startswith(str(path)) and message in str(err.value) and "\n" not in str(err.value)


def test_cycles_and_missing_base_are_reported(registry):
    table = _original(registry)
    cyc = table.replace("{label: CE a, method: ce}", "{label: CE a, method: ensemble, ensemble: [a plus b]}")
    path = _write(registry, cyc)
    with pytest.raises(ConfigError, match="depend on each other in a cycle") as err:
        load_registry()
    assert str(err.value).startswith(str(path))
    # a second-stage method without its base
    _write(registry, table.replace("{label: CE b, method: ce, overrides: {optim.lr: 0.05}}",
                                   "{label: CE b, method: decouple_crt}"))
    with pytest.raises(ConfigError, match="'init_from' is required"):
        load_registry()


def test_rows_on_planned_methods_make_their_dependents_unimplemented(registry):
    _write(registry, _original(registry).replace("{label: CE b, method: ce, overrides: {optim.lr: 0.05}}",
                                                 "{label: CE b, method: mmseg_seg}"))
    t = get_table("test/ensemble")
    assert [r.label for r in t.rows if not r.implemented] == ["CE b", "a plus b"]
    assert {r.row_label for r in plan_runs(t, "smoke")} == {"CE a", "Two seeds of a"}


def _cli(*args) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def test_ensemble_runs_after_its_members_and_scores_their_summed_logits(registry, tmp_path):
    res = tmp_path / "results"
    code, out = _cli("--results", str(res), "run", "test/ensemble", "--profile", "smoke", "--executor", "debug")
    assert code == 0 and "8 of 8 runs done" not in out  # two stages of 4
    assert out.count("4 of 4 runs done") == 2 and "(stage 2 of 2)" in out
    store = Store(res)
    runs = plan_runs(get_table("test/ensemble"), "smoke")
    for ens in (r for r in runs if r.config.method.name == "ensemble"):
        files = [torch.load(store.run_dir(m) / "test_logits.pt") for m in ens.depends_on]
        total = sum(f["logits"].float() for f in files)
        labels, counts = files[0]["labels"], files[0]["train_counts"]
        expected = 100.0 * (total.argmax(1) == labels).double().mean().item()
        rec = json.loads(store.metrics_path(ens.run_id).read_text())
        assert rec["metrics"]["acc_overall"] == pytest.approx(expected, abs=1e-9)
        assert rec["metrics"]["members"] == 2 and rec["depends_on"] == list(ens.depends_on)
        # few = mean per-class accuracy over classes with < 20 training images (here: all)
        assert (counts < 20).all()
        pred = total.argmax(1)
        per_class = [(pred[labels == c] == c).double().mean().item() for c in labels.unique()]
        assert rec["metrics"]["acc_few"] == pytest.approx(100.0 * sum(per_class) / len(per_class), abs=1e-9)
    code, out = _cli("--results", str(res), "plan", "test/ensemble", "--profile", "smoke")
    assert out.count(" done ") == 8 and "after " in out


def test_ensemble_with_a_missing_member_fails_with_the_path(registry, tmp_path):
    store = Store(tmp_path / "results")
    t = get_table("test/ensemble")
    ens = next(r for r in plan_runs(t, "smoke") if r.row_label == "a plus b")
    from semcl.engine.job import execute_run
    from semcl.errors import ResultsError

    member = ens.depends_on[0]
    with pytest.raises(ResultsError, match=rf"runs/{member}: ensemble member {member} is not finished \(status: missing\)"):
        execute_run(ens, store, tmp_path / "data")
    assert json.loads((store.run_dir(ens.run_id) / "failed.json").read_text())["error"].startswith("ResultsError")


def test_reference_rows_show_a_number_and_run_nothing(registry):
    _write(registry, _original(registry).replace(
        "{label: CE b, method: ce, overrides: {optim.lr: 0.05}}",
        "{label: CE b, method: ce, overrides: {optim.lr: 0.05}}\n"
        "  - {label: Published, method: reference, reported: {top1: {value: 70.5, provenance: paper-prose, source: x}}}"))
    t = get_table("test/ensemble")
    row = t.row("Published")
    assert row.implemented and row.reference and row.reported["top1"].value == 70.5
    assert "Published" not in {r.row_label for r in plan_runs(t, "smoke")}
    # a reference runs nothing: overrides or a dependency are refused, naming the row
    _write(registry, _original(registry).replace(
        "{label: CE b, method: ce, overrides: {optim.lr: 0.05}}",
        "{label: CE b, method: reference, overrides: {optim.lr: 0.05}}"))
    with pytest.raises(ConfigError, match="a reference row has no key 'overrides'"):
        load_registry()


def test_member_logits_keep_float32_where_float16_would_overflow():
    from semcl.evals.protocols.accuracy import stored_logits

    small = torch.tensor([[1.5, -2.25], [0.125, 3.0]])
    assert stored_logits(small).dtype == torch.float16 and torch.equal(stored_logits(small).float(), small)
    # one member at +70000, the other at -69999 on class 0: float16 files would sum inf + (-inf) = NaN
    a, b = torch.tensor([[70000.0, 0.0]]), torch.tensor([[-69999.0, 0.5]])
    assert stored_logits(a).dtype == torch.float32 and torch.equal(stored_logits(a), a)
    total = stored_logits(a).float() + stored_logits(b).float()
    assert total.tolist() == [[1.0, 0.5]] and total.argmax(1).item() == 0
    nan = torch.tensor([[float("nan"), 1.0]])  # already non-finite: float16 keeps it as it is
    assert stored_logits(nan).dtype == torch.float16
