"""--results / --registry / --precision mean the same before or after the sub-command; the Python API's summary
shows the user's paper numbers as `semcl table` does."""

from __future__ import annotations

import pytest

from semcl.cli.main import build_parser


@pytest.mark.parametrize("argv", [
    ["--results", "R", "--precision", "fast", "status", "rince/tab2"],
    ["status", "rince/tab2", "--results", "R", "--precision", "fast"],
    ["--results", "R", "status", "rince/tab2", "--precision", "fast"],
])
def test_global_options_before_or_after_the_sub_command(argv):
    args = build_parser().parse_args(argv)
    assert (args.results, args.precision, args.registry, args.table) == ("R", "fast", None, ["rince/tab2"])


def test_a_nested_sub_command_takes_them_too():
    args = build_parser().parse_args(["numbers", "list", "--results", "R"])
    assert args.results == "R"


def test_api_summary_applies_the_overlay(tmp_path, monkeypatch):
    from semcl import api
    from semcl.report.user_numbers import UserNumber, save_numbers

    monkeypatch.delenv("SEMCL_NUMBERS", raising=False)
    save_numbers(tmp_path / "numbers.yaml", [UserNumber("rince/tab2", "RINCE-in", "top1", 77.5, 0.2, "T2")])
    summ = api.summary("rince/tab2", "mini", results=tmp_path)
    cell = summ[(summ["row"] == "RINCE-in") & (summ["column"] == "top1")].iloc[0]
    assert (cell["paper"], cell["provenance"]) == (77.5, "user-supplied")
    other = tmp_path / "other.yaml"
    save_numbers(other, [UserNumber("rince/tab2", "RINCE-in", "top1", 70.0, None, "T2")])
    summ = api.summary("rince/tab2", "mini", results=tmp_path, numbers=other)
    assert summ[(summ["row"] == "RINCE-in") & (summ["column"] == "top1")].iloc[0]["paper"] == 70.0


def test_plan_names_the_command_for_the_tables_its_select_rows_read(capsys):
    from semcl.cli.main import main

    assert main(["plan", "rince/tab2", "--profile", "paper"]) == 0
    out = capsys.readouterr().out
    assert ("# rows 'Label smoothing (superclass)', 'Two heads' show the best row of rince/tab10, rince/tab9; their "
            "runs: semcl plan rince/tab10 rince/tab9 --profile paper") in out.splitlines()
    assert main(["plan", "rince/tab2", "rince/tab9", "rince/tab10", "--profile", "paper"]) == 0
    assert "show the best row of" not in capsys.readouterr().out  # planned with it: nothing to add
