"""The CLI as a user meets it: one-line errors with exit status 2, files left as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]


def semcl(*args, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "semcl.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO)


def test_unknown_table():
    res = semcl("show", "rince/tab99")
    assert res.returncode == 2
    assert res.stderr == "semcl: error: unknown table 'rince/tab99'; did you mean rince/tab9?\n"
    assert len(res.stderr.strip().splitlines()) == 1


def test_missing_data_root(tmp_path):
    res = semcl("--results", str(tmp_path / "res"), "run", "rince/tab2", "--profile", "mini",
                "--data-root", str(tmp_path / "nowhere"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()  # the data report (semcl data check's), then one error line
    assert lines[0] == f"data root {tmp_path / 'nowhere'}, profile mini: 2 dataset(s): 0 present, 2 missing, 0 incomplete"
    assert lines[-1] == (f"semcl: error: data root {tmp_path / 'nowhere'}: does not exist "
                         f"(datasets fashion_mnist, mnist; set --data-root or SEMCL_DATA)")
    assert not (tmp_path / "res").exists()


def test_malformed_registry(registry_copy):
    path = registry_copy / "rince" / "tab2.yaml"
    path.write_text(path.read_text().replace("optim.lr: 0.8, schedule.epochs: 500, data.augment: crop_flip",
                                             "optim.lr: 0.8, schedule.epochs: 500, data.augmnt: crop_flip"))
    before = path.read_text()
    res = semcl("list", env={"SEMCL_REGISTRY": str(registry_copy)})
    assert res.returncode == 2
    assert res.stderr.strip() == (f"semcl: error: {path}: row 'Cross-entropy', profile 'paper': unknown key "
                                  "'data.augmnt' (known: augment, image_size, imbalance_factor, lt_max_per_class, lt_seed, "
                                  "name, synthetic, synthetic_test_per_class, synthetic_train_per_class, test_limit, "
                                  "test_split, train_per_class)")
    assert path.read_text() == before


def test_truncated_metrics_json(tmp_path):
    run = plan_runs(get_table("rince/tab2"), "smoke")[0]
    store = Store(tmp_path)
    path = store.metrics_path(run.run_id)
    path.parent.mkdir(parents=True)
    path.write_text('{"run_id": "')
    for args in (["table", "rince/tab2", "--profile", "smoke"],
                 ["run", "rince/tab2", "--profile", "smoke", "--executor", "debug"]):
        res = semcl("--results", str(tmp_path), *args)
        assert res.returncode == 2, res.stderr
        err = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("semcl: error")]
        assert err == [f"semcl: error: {path}: truncated or invalid JSON (Unterminated string starting at: "
                       f"line 1 column 12 (char 11)); move the file away to rerun this run"]
        assert path.read_text() == '{"run_id": "'
    assert sorted(p.name for p in path.parent.iterdir()) == ["metrics.json"]


def test_plan_is_fast_and_imports_no_torch(tmp_path):
    code = ("import sys, time; t=time.time(); from semcl.cli.main import main; main(['--results', sys.argv[1], "
            "'plan', 'rince/tab2', "
            "'--profile', 'mini']); assert 'torch' not in sys.modules and 'pandas' not in sys.modules, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas'))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr  # its time is bench/'s to measure: a loaded machine made a limit flaky
    lines = res.stdout.splitlines()
    assert lines[0] == "# rince/tab2 profile=mini: 51 runs"
    assert lines[1].split()[1:4] == ["Cross-entropy", "seed=123", "missing"]


def test_table_of_a_table_with_released_rows_imports_no_torch(tmp_path):
    """`semcl table` reads records, the released files' index and the environment notes; none of them needs torch
    (its import was 1.1 s of a 901-record table's 2.5 s: bench/bench_cli.py)."""
    code = ("import sys; from semcl.cli.main import main; from semcl.registry.tables import get_table; "
            "assert any(r.released for r in get_table('rince/tab2').rows); "
            "main(['--results', sys.argv[1], 'table', 'rince/tab2', '--profile', 'smoke']); "
            "assert 'torch' not in sys.modules, [m for m in sys.modules if m.startswith('semcl.')][-3:]")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert "| Cross-entropy |" in res.stdout


def test_plan_prints_totals_per_table_and_overall(capsys):
    import re

    import pytest

    from semcl.cli.main import main

    assert main(["plan", "rince/tab2", "rince/tab9", "--profile", "paper"]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = [ln for ln in lines if not ln.startswith("#")]
    first = [ln for ln in lines if ln.startswith("# rince/tab2 total:")][0]
    m = re.fullmatch(r"# rince/tab2 total: 51 runs, ([\d.e+]+) GPU-h; not done: 51 runs, ([\d.e+]+) GPU-h", first)
    tab2 = sum(float(ln.split()[-2]) for ln in runs[:51])
    assert m and float(m.group(1)) == pytest.approx(tab2, rel=1e-3) and m.group(1) == m.group(2)
    overall = lines[-1]
    assert overall.startswith("# all 2 tables: ") and f"{len({ln.split()[0] for ln in runs})} runs" in overall


def test_list_one_paper(capsys):
    from semcl.cli.main import main

    assert main(["list", "hsa", "--profile", "smoke"]) == 0
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()[1:-1]]
    assert rows and all(r.startswith("hsa/") for r in rows) and "hsa/linear" in rows
    assert main(["list", "nope"]) == 2
    assert "unknown paper 'nope' (papers: gpaco, hsa, paco, rince, scns)" in capsys.readouterr().err
