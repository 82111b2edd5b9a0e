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
