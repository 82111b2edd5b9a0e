"""Figure kinds are two tables with the same keys: the registry's check (semcl.registry.figure_kinds.FIGURE_KINDS) and the
writer (semcl.report.figures.FIGURE_WRITERS); each kind's check refuses a bad entry in one line."""

from __future__ import annotations

import pytest

from semcl.errors import ConfigError
from semcl.registry.figure_kinds import FIGURE_KINDS, check_figure
from semcl.registry.tables import load_registry
from semcl.report.figures import FIGURE_WRITERS


def test_every_kind_has_a_check_and_a_writer():
    assert set(FIGURE_KINDS) == set(FIGURE_WRITERS)
    used = {t.figure["kind"] for t in load_registry().values() if t.figure is not None}
    assert used <= set(FIGURE_KINDS) and {"scatter", "lines", "analytic", "tsne", "pr_curve"} <= used


@pytest.mark.parametrize(("spec", "message"), [
    ({"kind": "pie"}, "key 'kind' must be one of 'scatter', 'lines', 'analytic'"),
    ({"x": "a", "y": "b"}, "key 'kind' must be one of"),
    ({"kind": "scatter", "x": "a"}, "missing key 'y'"),
    ({"kind": "scatter", "x": "a", "y": "zz"}, "key 'y' = 'zz' is not a column key (a, b)"),
    ({"kind": "lines", "columns": ["a", "q"]}, "key 'columns' = ['a', 'q'] must list column keys"),
    ({"kind": "analytic", "function": "nodots"}, "is not <module>.<function>"),
    ({"kind": "tsne", "args": [1]}, "key 'args' must be a mapping"),
    ({"kind": "tsne", "colour": 1}, "unknown key 'colour' (allowed: args, kind)"),
    ([1, 2], "must be a mapping with a 'kind'"),
])
def test_a_bad_figure_entry_is_one_line_naming_file_and_key(spec, message):
    with pytest.raises(ConfigError) as err:
        check_figure(spec, ["a", "b"], "x.yaml")
    assert str(err.value).startswith("x.yaml: figure: ") and message in str(err.value) and "\n" not in str(err.value)


def test_checks_normalise_the_entry():
    assert check_figure(None, ["a"], "x") is None
    assert check_figure({"kind": "lines"}, ["a", "b"], "x") == {"kind": "lines", "columns": ["a", "b"], "ylabel": ""}
    assert check_figure({"kind": "pr_curve"}, [], "x") == {"kind": "pr_curve", "args": {}}
    assert check_figure({"kind": "analytic", "function": "m.f"}, [], "x") == {"kind": "analytic", "function": "m.f",
                                                                               "args": {}}
