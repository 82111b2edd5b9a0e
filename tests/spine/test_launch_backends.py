"""The backend table of semcl.launch.backends: every executor `semcl run` offers names a module that submits to it."""

from __future__ import annotations

import pytest

from semcl.cli import main as cli
from semcl.errors import ConfigError
from semcl.launch.backends import BACKENDS, backend

# executor -> the function its module submits with (cli.cmd_run calls it by this name)
SUBMITTERS = {"local": "submit_runs", "debug": "submit_runs", "slurm": "submit_slurm"}


def _run_executors() -> set[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None) and "run" in a.choices)
    run = sub.choices["run"]
    return set(next(a for a in run._actions if a.dest == "executor").choices)


def test_every_executor_of_run_has_a_backend_module():
    assert _run_executors() == set(BACKENDS) == set(SUBMITTERS)
    for name, function in SUBMITTERS.items():
        module = backend(name)
        assert module.__name__ == BACKENDS[name] and callable(getattr(module, function)), name
    assert backend("local") is backend("debug")  # one module runs both: subprocess workers, or in-process


def test_an_unknown_executor_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"^unknown executor 'pbs'; known: \['debug', 'local', 'slurm'\]$"):
        backend("pbs")
