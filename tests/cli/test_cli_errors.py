
"""CLI input and output failures: unknown rows, worker counts, --all with a profile some tables
lack, the full sbatch preview, unwritable results, non-numeric metrics."""

from __future__ import annotations

import errno
import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from semcl.cli.main import main
from semcl.evals.protocols import metric_key
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.store import Store


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_unknown_row_is_an_error_listing_the_rows(tmp_path):
    code, out, err = _cli("--results", str(tmp_path), "run", "rince/tab2", "--profile", "smoke",
                          "--row", "Cross-entropi", "--executor", "debug")
    labels = [r.label for r in get_table("rince/tab2").rows]
    assert code == 2 and out == ""
    assert err.startswith("semcl: error: unknown row 'Cross-entropi' (rows of rince/tab2: 'Cross-entropy', ")
    assert all(repr(label) in err for label in labels) and err.count("\n") == 1


@pytest.mark.parametrize("workers", ["0", "-3", "two"])
def test_workers_must_be_a_positive_integer(tmp_path, workers):
    code, _, err = _cli("--results", str(tmp_path), "run", "rince/tab2", "--profile", "smoke", "--workers", workers)
    assert code == 2 and "argument --workers: expected a positive integer" in err


@pytest.mark.parametrize("command", [["list"], ["plan", "--all"], ["status", "--all"]])
def test_all_with_a_profile_skips_tables_without_it(tmp_path, command):
    lacking = sorted(t.id for t in load_registry().values() if "mini" not in t.profiles)
    having = sorted(t.id for t in load_registry().values() if "mini" in t.profiles)
    assert lacking and having
    code, out, err = _cli("--results", str(tmp_path), command[0], *command[1:], "--profile", "mini")
    assert code == 0
    assert f"semcl: skipped {len(lacking)} table(s) without profile 'mini': {', '.join(lacking)}" in err
    for table_id in having:
        assert table_id in out


def test_run_all_with_a_profile_skips_and_goes_on(tmp_path):
    code, out, err = _cli("--results", str(tmp_path), "run", "--all", "--profile", "mini",
                          "--data-root", str(tmp_path / "nowhere"))
    assert "table(s) without profile 'mini'" in err
    assert code == 2 and "data root" in err and "does not exist" in err  # got past the tables to the data check


def test_slurm_preview_is_the_whole_script_that_would_be_submitted(tmp_path, monkeypatch):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "c.yaml").write_text("partition: debug\ngpus_per_node: 0\nsetup: ['module load python/3.11']\n")
    monkeypatch.setenv("SEMCL_CLUSTER_PROFILES", str(profiles))
    code, out, _ = _cli("--results", str(tmp_path), "plan", "rince/tab2", "--profile", "smoke",
                        "--executor", "slurm", "--cluster", "c")
    assert code == 0
    script = out[out.index("#!/bin/bash"):]
    lines = script.splitlines()
    assert "#SBATCH --job-name=semcl-rince-tab2" in lines and "#SBATCH --array=0-50%51" in lines  # 17 rows x 3 seeds
    assert "module load python/3.11" in lines  # shell lines, not only the #SBATCH header
    assert any(ln.startswith("export SEMCL_SNAPSHOT=") and "<snapshot>" in ln for ln in lines)
    assert any(ln.startswith("srun ") and "-m submitit.core._submit" in ln for ln in lines)


@pytest.mark.parametrize("code_", [errno.ENOSPC, errno.EACCES])
def test_unwritable_results_is_one_line(tmp_path, monkeypatch, code_):
    def refuse(*a, dir=None, **k):  # every user-facing file is written through a temp file beside it
        raise OSError(code_, "No space left on device" if code_ == errno.ENOSPC else "Permission denied", str(dir))

    monkeypatch.setattr("semcl.files.tempfile.mkstemp", refuse)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"semcl: error: {tmp_path}") and "cannot write" in err


def test_non_numeric_metric_is_reported_with_its_file(tmp_path):
    table = get_table("rince/tab2")
    run = plan_runs(table, "smoke")[0]
    key = metric_key(table.columns[0], table.profile("smoke").substitute)
    store = Store(tmp_path)
    write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {key: "12.5%"}})
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2 and err.count("\n") == 1
    assert err == (f"semcl: error: {store.metrics_path(run.run_id)}: key 'metrics.{key}' is '12.5%', not a number; "
                   "move the file away to rerun this run\n")
