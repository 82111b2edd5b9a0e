"""A run's numbers do not depend on how many runs share the machine: the thread count of its arithmetic
is fixed (one on the CPU) and recorded, so `--workers 1` and `--workers 2` write the same records."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

from semcl.cli.main import main
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def _run(results, workers: str) -> None:
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["--results", str(results), "run", "rince/tab2", "--profile", "smoke", "--executor", "local",
                     "--workers", workers, "--row", "Cross-entropy", "--row", "RINCE-in"]) == 0


def test_one_or_two_workers_write_the_same_records(tmp_path):
    _run(tmp_path / "one", "1")
    _run(tmp_path / "two", "2")
    runs = [r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label in ("Cross-entropy", "RINCE-in")]
    assert len(runs) == 6
    for run in runs:
        a, b = (json.loads((tmp_path / s / "runs" / run.run_id / "metrics.json").read_text()) for s in ("one", "two"))
        assert a["threads"] == b["threads"] == 1
        assert a["metrics"] == b["metrics"], run.row_label
        assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
