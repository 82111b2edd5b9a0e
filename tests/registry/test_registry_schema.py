"""The registry entry is a strict typed schema: every bad input is one line naming the file and the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_registry, load_table

REPO = Path(__file__).resolve().parents[2]

TINY = """\
id: test/tiny
paper: rince
source: "test"
title: a tiny table
seeds: [0, 1]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
  - {key: r1, label: "R@1", eval: retrieval, labels: fine, measure: "R@1"}
rows:
  - label: "CE (τ=0.1, α+λ; ×2) [a/b] -c"
    method: ce
    overrides: {optim.lr: 0.1}
    reported:
      top1: {value: 70.5, provenance: paper-table, source: "Tab. 1"}
  - {label: CE b, method: ce}
profiles:
  smoke:
    seeds: [0]
    overrides: {data.synthetic: true}
resources:
  smoke: {cpus: 1, mem_gb: 2, time_min: 10}
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    return path, load_table(path, tmp_path / "presets")


def test_the_tiny_table_loads_with_the_labels_existing_tables_use(tmp_path):
    _, table = _load(tmp_path, TINY)
    assert [r.label for r in table.rows] == ["CE (τ=0.1, α+λ; ×2) [a/b] -c", "CE b"]
    assert table.seeds == [0, 1] and table.seeds_for("smoke") == [0]
    assert table.rows[0].reported["top1"].value == 70.5 and table.rows[0].reported["r1"] is None
    assert table.resources["smoke"].cpus == 1 and table.resources["smoke"].time_min == 10


@pytest.mark.parametrize("old, new, message", [
    ("seeds: [0, 1]", "seeds: many", "'seeds' must be a list, got 'many'"),
    ("seeds: [0, 1]", "seeds: [0, 0]", "'seeds' repeats 0 (values must be unique)"),
    ("seeds: [0, 1]", "seeds: [0, -1]", "'seeds' must be >= 0, got -1"),
    ("seeds: [0, 1]", "seeds: []", "'seeds' must not be empty"),
    ("seeds: [0, 1]", "seeds: [0, 1.5]", "'seeds' must be an integer, got 1.5"),
    ("    seeds: [0]", "    seeds: '7'", "'profiles.smoke.seeds' must be a list, got '7'"),
    ("title: a tiny table", "title: 5", "'title' must be str, got 5"),
    ("title: a tiny table", "titel: a tiny table", "unknown key 'titel'"),
    ("paper: rince\n", "", "missing key 'paper'"),
    ("id: test/tiny", "id: \"test/tiny\\nrm -rf x\"", "'id' = 'test/tiny\\nrm -rf x' is not a table id"),
    ("id: test/tiny", "id: Test Tiny", "'id' = 'Test Tiny' is not a table id"),
    ("{label: CE b, method: ce}", "{label: \"CE b\\nx\", method: ce}", "'rows[1].label' = 'CE b\\nx' is not a safe row label"),
    ("{label: CE b, method: ce}", "{label: \"CE $(b)\", method: ce}", "'rows[1].label' = 'CE $(b)' is not a safe row label"),
    ("{label: CE b, method: ce}", "{label: \"CE 'b'\", method: ce}", "is not a safe row label"),
    ("{label: CE b, method: ce}", "{label: CE b, method: [ce]}", "'rows[1].method' must be str"),
    ("{label: CE b, method: ce}", "{label: \"CE (τ=0.1, α+λ; ×2) [a/b] -c\", method: ce}",
     "two rows are labelled 'CE (τ=0.1, α+λ; ×2) [a/b] -c'"),
    ("{label: CE b, method: ce}", "{label: CE b, method: ce, colour: red}", "unknown key 'rows[1].colour'"),
    ("{label: CE b, method: ce}", "{label: CE b, method: ce, ensemble: CE a}", "'rows[1].ensemble' must be a list"),
    ("value: 70.5", "value: high", "'rows[0].reported.top1.value' must be a number, got 'high'"),
    ("value: 70.5", "value: .nan", "'rows[0].reported.top1.value' must be a finite number"),
    ("value: 70.5", "value: 70.5, std: -1", "'rows[0].reported.top1.std' must be >= 0"),
    ("provenance: paper-table", "provenance: rumour", "'rows[0].reported.top1.provenance' = 'rumour' is not one of"),
    ("{optim.lr: 0.1}", "{schedule.epochs: -5}", "row 'CE (τ=0.1, α+λ; ×2) [a/b] -c', profile 'smoke': "
                                                   "'schedule.epochs' must be >= 0, got -5"),
    ("{optim.lr: 0.1}", "{optim.batch_size: 0}", "'optim.batch_size' must be > 0, got 0"),
    ("{optim.lr: 0.1}", "{optim.lr: .inf}", "'optim.lr' must be a finite number"),
    ("{data.synthetic: true}", "{data.synthetic: true, probe.batch_size: -1}",
     "profile 'smoke': 'probe.batch_size' must be > 0, got -1"),
    ("{data.synthetic: true}", "{data.synthetic: true}\n    rows: {CE c: {optim.lr: 0.2}}",
     "profiles.smoke.rows: no row 'CE c' in this table"),
    ("{data.synthetic: true}", "{data.synthetic: true}\n    rows: {CE b: {optim.lr: -1}}",
     "row 'CE b', profile 'smoke': 'optim.lr' must be >= 0, got -1.0"),
    ("{data.synthetic: true}", "{data.synthetic: true}\n    rows: {CE b: {optim.lrr: 1}}",
     "row 'CE b', profile 'smoke': unknown key 'optim.lrr'"),
    ("{cpus: 1,", "{cpus: 0,", "'resources.smoke.cpus' must be > 0, got 0"),
    ("{cpus: 1,", "{cpus: \"1\\n#SBATCH --x\",", "'resources.smoke.cpus' must be an integer"),
    ("{cpus: 1,", "{gpus: -1, cpus: 1,", "'resources.smoke.gpus' must be >= 0, got -1"),
    ("time_min: 10}", "time_min: 10, gpu_mem: 2}", "unknown key 'resources.smoke.gpu_mem'"),
    ("time_min: 10}", "time_min: 10, rows: {CE c: {cpus: 2}}}", "'resources.smoke.rows['CE c']': no row 'CE c'"),
    ("time_min: 10}", "time_min: 10, rows: {CE b: {cpus: 0}}}", "'resources.smoke.rows['CE b'].cpus' must be > 0"),
    ("time_min: 10}", "time_min: 10, rows: {CE b: {gpu_mem: 2}}}", "unknown key 'resources.smoke.rows['CE b'].gpu_mem'"),
    ("measure: \"R@1\"}", "measure: ap}", "column 'r1': key 'measure' = 'ap': retrieval measures are 'AP' and 'R@k'"),
    ("measure: \"R@1\"}", "measure: \"R@0\"}", "column 'r1': key 'measure' = 'R@0'"),
    ("measure: \"R@1\"}", "measure: \"R@1\", k: 5}", "column 'r1': key 'k' does not apply to eval 'retrieval'"),
    ("group: overall}", "group: overall, thresholds: 3}", "'columns[0].thresholds' must be str, got 3"),
    ("{key: r1,", "{key: top1,", "'columns[1].key' = 'top1' repeats an earlier column's key"),
])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, old, new, message):
    assert old in TINY
    path = tmp_path / "tiny.yaml"
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, TINY.replace(old, new, 1))
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_profile_row_override_applies_to_that_row_only_and_after_the_profile(tmp_path):
    text = TINY.replace("overrides: {data.synthetic: true}",
                        "overrides: {data.synthetic: true, optim.lr: 0.3}\n    rows: {CE b: {optim.lr: 0.05}}")
    _, table = _load(tmp_path, text)
    first, second = table.rows
    assert table.resolve(first, "smoke").optim.lr == 0.3  # row's 0.1, then the profile's 0.3
    assert table.resolve(second, "smoke").optim.lr == 0.05  # profile's 0.3, then its row entry
    assert table.resolve(second, "paper").optim.lr != 0.05  # other profiles untouched


def test_a_row_with_its_own_resources_keeps_the_profile_s_other_keys(tmp_path):
    _, table = _load(tmp_path, TINY.replace("time_min: 10}", "time_min: 10, rows: {CE b: {cpus: 4}}}"))
    first, second = table.rows
    assert table.resources_for(first.label, "smoke") == table.resources["smoke"]
    own = table.resources_for(second.label, "smoke")
    assert (own.cpus, own.mem_gb, own.time_min) == (4, 2, 10)
    assert table.resources_for(second.label, "paper") == table.resources["paper"]


def test_every_existing_registry_entry_loads():
    tables = load_registry()
    assert len(tables) >= 26 and "rince/tab2" in tables and "gpaco/fig1a" in tables
    assert sum(len(plan_runs(t, "smoke")) for t in tables.values() if "smoke" in t.profiles) > 0


@pytest.mark.parametrize("old, new, message", [
    ("seeds: [0, 1]", "seeds: many", "'seeds' must be a list, got 'many'"),
    ("{optim.lr: 0.1}", "{optim.batch_size: -8}", "'optim.batch_size' must be > 0, got -8"),
])
def test_semcl_list_refuses_a_bad_entry_and_writes_nothing(tmp_path, old, new, message):
    registry, results = tmp_path / "experiments", tmp_path / "results"
    (registry / "test").mkdir(parents=True)
    path = registry / "test" / "tiny.yaml"
    path.write_text(TINY.replace(old, new, 1))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = subprocess.run([sys.executable, "-m", "semcl.cli", "--results", str(results), "list"],
                         capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "SEMCL_REGISTRY": str(registry)})
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"semcl: error: {path}: ") and message in lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and not results.exists()
