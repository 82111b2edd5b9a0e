"""Bad input, round two (issue 27 items 8-10): cluster profiles with a strict schema, duplicate YAML keys
refused everywhere, bounds at load (seeds below 2**32, sized knobs, alias bombs)."""

from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from semcl.cli.main import main
from semcl.errors import ConfigError, ResultsError
from semcl.launch.slurm.profile import load_cluster_profile, slurm_parameters
from semcl.locations import registry_root
from semcl.registry.entry import parse_entry
from semcl.registry.resources import Resources, parse_resources
from semcl.registry.tables import load_table
from semcl.report.claims import load_claims_file
from semcl.run_config import build_config
from semcl.yaml_strict import MAX_NODES, expanded_size, load_file, load_text

PROFILES = Path(__file__).resolve().parents[2] / "slurm" / "profiles"
GOOD_PROFILE = "partition: gpu\naccount: my-lab\ngpus_per_node: 4\nmax_time_min: 600\nsetup:\n  - module load cuda\n"
TABLE = """id: t/one
paper: rince
source: "Table 1"
title: one row
columns:
  - {key: top1, eval: linear_probe, label: "Top-1"}
rows:
  - label: CE
    method: ce
    overrides:
      schedule.epochs: 3
      optim.lr: 0.1
"""


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _profile(tmp_path, monkeypatch, text: str, name: str = "mine") -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    monkeypatch.setenv("SEMCL_CLUSTER_PROFILES", str(folder))
    return path


def _refused(fn, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        fn(*args, **kwargs)
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


# --- item 8: cluster profiles ------------------------------------------------------------------------

def test_shipped_profiles_load_with_their_values(monkeypatch):
    monkeypatch.delenv("SEMCL_CLUSTER_PROFILES", raising=False)
    local, a100 = load_cluster_profile("local"), load_cluster_profile("example-a100")
    assert (local.partition, local.gpus_per_node, local.min_time_min, local.max_time_min) == ("debug", 0, 15, 60)
    assert (a100.partition, a100.constraint, a100.gpu_mem_gb, a100.max_requeues) == ("gpu", "a100", 80.0, 10)
    assert a100.extra_sbatch == {"mail-type": "FAIL"} and a100.setup == ["module load cuda/12.4"]
    assert sorted(p.stem for p in PROFILES.glob("*.yaml")) == ["example-a100", "local"]


def test_a_good_profile_reaches_the_sbatch_parameters(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, GOOD_PROFILE + "extra_sbatch: {mail-type: 'END,FAIL', exclusive: true}\n")
    cluster = load_cluster_profile("mine")
    params = slurm_parameters(Resources(gpus=8), cluster, "here", estimate_min=60.0)
    assert params["partition"] == "gpu" and params["account"] == "my-lab"
    assert (params["nodes"], params["gpus_per_node"], params["time"]) == (2, 4, 60)
    assert params["additional_parameters"] == {"mail-type": "END,FAIL", "exclusive": True}


@pytest.mark.parametrize("text, key, words", [
    ("partition: \"gpu\\n#!/bin/sh\\nrm -rf ~\"\n", "partition", "not a SLURM name"),
    ("account: \"lab\\nrm\"\n", "account", "not a SLURM name"),
    ("qos: \"a b\"\n", "qos", "not a SLURM name"),
    ("constraint: \"a100;reboot\"\n", "constraint", "not a SLURM constraint"),
    ("extra_sbatch: {mail-type: \"FAIL\\necho owned\"}\n", "extra_sbatch.mail-type", "one non-empty line"),
    ("extra_sbatch: {\"mail type=x\": FAIL}\n", "extra_sbatch", "not an sbatch option name"),
    ("extra_sbatch: {exclusive: false}\n", "extra_sbatch.exclusive", "leave the option out"),
    ("extra_sbatch: [mail-type]\n", "extra_sbatch", "must be a mapping"),
    ("setup: module load cuda\n", "setup", "must be a list"),
    ("setup: [\"module load cuda\\nrm -rf ~\"]\n", "setup[0]", "one non-empty shell line"),
    ("setup: [3]\n", "setup", "must be str"),
    ("gpus_per_node: -1\n", "gpus_per_node", "must be >= 0"),
    ("max_time_min: 0\n", "max_time_min", "must be > 0"),
    ("time_margin: -2.0\n", "time_margin", "must be > 0"),
    ("cpus_per_gpu: 2.5\n", "cpus_per_gpu", "must be an integer"),
    ("array_parallelism: true\n", "array_parallelism", "must be an integer"),
    ("precision: turbo\n", "precision", "is not one of ['fast', 'official']"),
    ("partion: gpu\n", "partion", "unknown key"),
    ("name: other\n", "name", "unknown key"),
])
def test_bad_profile_values_are_one_line_naming_file_and_key(tmp_path, monkeypatch, text, key, words):
    path = _profile(tmp_path, monkeypatch, text)
    msg = _refused(load_cluster_profile, "mine")
    assert msg.startswith(f"{path}: ") and f"'{key}'" in msg, msg
    assert words in msg, msg


@pytest.mark.parametrize("option, says", [
    ("output", "--output: submitit sets it"),  # its log collection
    ("error", "--error: submitit sets it"),
    ("job-name", "--job-name: submitit sets it"),
    ("job_name", "--job-name: submitit sets it"),  # submitit writes _ as -
    ("array", "--array: submitit sets it"),
    ("open-mode", "--open-mode: submitit sets it"),
    ("signal", "--signal: submitit sets it"),
    ("outp", "sbatch reads --outp as --output"),  # getopt_long takes an unambiguous prefix
    ("wrap", "--wrap: it replaces the job script"),
    ("parsable", "--parsable: it replaces the job script or what sbatch prints"),
    ("no-requeue", "--no-requeue: submitit requeues the job itself"),
    ("export", "--export: the job must see the submitting environment"),
    ("time", "--time: semcl sets it"),
    ("mem-per-cpu", "--mem-per-cpu: semcl sets it"),
    ("partition", "--partition: semcl sets it"),
])
def test_extra_sbatch_may_not_set_the_options_semcl_and_submitit_own(tmp_path, monkeypatch, option, says):
    path = _profile(tmp_path, monkeypatch, GOOD_PROFILE + f"extra_sbatch: {{{option}: /etc/PWNED}}\n")
    assert _refused(load_cluster_profile, "mine").startswith(
        f"{path}: 'extra_sbatch.{option}' may not be set here ({says}")


@pytest.mark.parametrize("value, ok", [(1, True), (4_000_001, True), (4_000_002, False), (10**22, False)])
def test_array_parallelism_is_within_what_slurm_accepts(tmp_path, monkeypatch, value, ok):
    from semcl.launch.slurm.profile import MAX_ARRAY_PARALLELISM

    assert MAX_ARRAY_PARALLELISM == 4_000_001
    path = _profile(tmp_path, monkeypatch, GOOD_PROFILE + f"array_parallelism: {value}\n")
    if ok:
        assert load_cluster_profile("mine").array_parallelism == value
    else:
        msg = _refused(load_cluster_profile, "mine")
        assert msg.startswith(f"{path}: ") and "'array_parallelism'" in msg and "4000001" in msg, msg


def test_min_time_above_max_time_is_refused(tmp_path, monkeypatch):
    path = _profile(tmp_path, monkeypatch, "min_time_min: 120\nmax_time_min: 60\n")
    assert _refused(load_cluster_profile, "mine") == \
        f"{path}: 'min_time_min' (120) is above 'max_time_min' (60)"


@pytest.mark.parametrize("text, words", [
    ("partition: [gpu\n", "line 2: invalid YAML"),  # malformed: the line where the parser gave up
    ("- partition\n- gpu\n", "must be a mapping of keys"),
    ("partition: gpu\ngpus_per_node: 4\npartition: cpu\n", "line 3: duplicate key 'partition' (first at line 1)"),
])
def test_malformed_profile_is_one_line_naming_the_file(tmp_path, monkeypatch, text, words):
    path = _profile(tmp_path, monkeypatch, text)
    msg = _refused(load_cluster_profile, "mine")
    assert msg.startswith(f"{path}:") and words in msg, msg


def test_profile_names_cannot_leave_the_profile_folder(tmp_path, monkeypatch):
    _profile(tmp_path, monkeypatch, GOOD_PROFILE)
    assert "not a profile name" in _refused(load_cluster_profile, "../profiles/mine")


def test_the_cli_refuses_a_bad_profile_in_one_line(tmp_path, monkeypatch):
    path = _profile(tmp_path, monkeypatch, "partition: \"gpu\\nrm -rf ~\"\n", name="bad")
    code, out, err = _cli("--results", str(tmp_path / "r"), "plan", "rince/fig4", "--executor", "slurm",
                          "--cluster", "bad")
    assert code == 2 and err.count("\n") == 1 and f"{path}: 'partition'" in err, (code, err)


# --- item 9: duplicate keys ---------------------------------------------------------------------------

def test_duplicate_key_in_a_table_is_refused_with_file_key_and_lines(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(TABLE.replace("      optim.lr: 0.1\n", "      schedule.epochs: 7\n"))
    msg = _refused(load_table, path, tmp_path)
    assert msg == f"{path}: line 12: duplicate key 'schedule.epochs' (first at line 11)"
    path.write_text(TABLE)  # without the repeat it loads, with its one value
    assert load_table(path, tmp_path).rows[0].overrides == {"schedule.epochs": 3, "optim.lr": 0.1}


def test_duplicate_top_level_key_and_merge_keys(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(TABLE + "title: again\n")
    assert _refused(load_table, path, tmp_path).endswith("line 13: duplicate key 'title' (first at line 4)")
    # a merge key's values may be overridden (YAML's own rule): not a duplicate
    merged = load_text("base: &b {x: 1, y: 2}\nrow:\n  <<: *b\n  y: 3\n", "m.yaml")
    assert merged["row"] == {"x": 1, "y": 3}
    assert "duplicate key 'y'" in _refused(load_text, "row:\n  <<: {x: 1}\n  y: 3\n  y: 4\n", "m.yaml")


def test_duplicate_key_in_a_preset_names_the_preset(tmp_path):
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "p.yaml").write_text("optim:\n  lr: 0.5\noptim:\n  lr: 0.7\n")
    table = tmp_path / "one.yaml"
    table.write_text(TABLE + "preset: p\n")
    assert _refused(load_table, table, presets) == \
        f"{presets / 'p.yaml'}: line 3: duplicate key 'optim' (first at line 1)"


def test_duplicate_key_in_a_claims_file(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("paper: rince\npaper: hsa\nclaims: []\n")
    assert _refused(load_claims_file, path, {}) == f"{path}: line 2: duplicate key 'paper' (first at line 1)"


def test_duplicate_key_in_a_user_registry_through_the_cli(tmp_path, monkeypatch):
    reg = tmp_path / "registry"
    (reg / "t").mkdir(parents=True)
    path = reg / "t" / "one.yaml"
    path.write_text(TABLE.replace("      optim.lr: 0.1\n", "      schedule.epochs: 7\n"))
    monkeypatch.setenv("SEMCL_REGISTRY", str(reg))
    code, out, err = _cli("--results", str(tmp_path / "r"), "plan", "t/one", "--profile", "paper")
    assert code == 2 and err.count("\n") == 1
    assert f"{path}: line 12: duplicate key 'schedule.epochs'" in err, err


def test_every_registry_file_reads_as_before():
    """The strict loader changes nothing for the files we ship (same data as PyYAML's safe loader)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    files = sorted(registry_root().rglob("*.yaml")) + sorted(PROFILES.glob("*.yaml"))
    assert len(files) > 50
    for path in files:
        assert load_file(path) == yaml.load(path.read_text(), Loader=loader), path


def test_unreadable_yaml_files_are_one_line(tmp_path):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"a: \xff\xfe\n")
    assert _refused(load_file, binary) == f"{binary}: not UTF-8 text (byte 3): not a YAML file"
    assert "cannot read" in _refused(load_file, tmp_path)  # a folder
    with pytest.raises(ResultsError):  # the caller chooses the error class (a results-store file)
        load_file(binary, ResultsError)


# --- item 10: bounds at load -----------------------------------------------------------------------------

def _entry(**extra) -> dict:
    doc = yaml.safe_load(TABLE)
    doc.update(extra)
    return doc


def test_seeds_must_fit_numpy(tmp_path):
    assert parse_entry(_entry(seeds=[0, 2**32 - 1]), "t.yaml").seeds == [0, 4294967295]
    assert _refused(parse_entry, _entry(seeds=[123, 2**32]), "t.yaml") == \
        "t.yaml: 'seeds' must be <= 4294967295 (numpy seeds are 32-bit), got 4294967296"
    assert "'seeds' must be >= 0" in _refused(parse_entry, _entry(seeds=[-1]), "t.yaml")
    msg = _refused(parse_entry, _entry(profiles={"smoke": {"seeds": [2**40]}}), "t.yaml")
    assert "'profiles.smoke.seeds' must be <= 4294967295" in msg
    assert "'data.lt_seed' must be <= 4294967295" in _refused(build_config, {"data": {"lt_seed": 2**32}}, where="c")


@pytest.mark.parametrize("section, key, ok, bad, limit", [
    ("data", "synthetic_train_per_class", 1000, 10**12, 1000),
    ("data", "synthetic_test_per_class", 40, 1001, 1000),
    ("data", "train_per_class", 100_000, 100_001, 100_000),
    ("data", "image_size", 224, 10**6, 4096),
    ("optim", "batch_size", 4096, 10**9, 65_536),
    ("schedule", "epochs", 1000, 10**7, 100_000),
    ("model", "head_hidden", 2048, 2**20, 65_536),
])
def test_sized_knobs_are_bounded(section, key, ok, bad, limit):
    assert getattr(getattr(build_config({section: {key: ok}}, where="c.yaml"), section), key) == ok
    msg = _refused(build_config, {section: {key: bad}}, where="c.yaml")
    assert msg.startswith(f"c.yaml: '{section}.{key}' must be <= {limit}") and msg.endswith(f"got {bad}"), msg


def _bomb(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_quickly(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9))  # 10**9 values for whatever walks it; ~600 bytes
    start = time.perf_counter()
    msg = _refused(load_file, path)
    assert time.perf_counter() - start < 1.0
    assert msg.startswith(f"{path}: line ") and f"more than {MAX_NODES} values through its aliases" in msg
    table = tmp_path / "one.yaml"  # the same inside a registry entry
    table.write_text(_bomb(9) + TABLE)
    assert "through its aliases" in _refused(load_table, table, tmp_path)
    assert load_text(_bomb(4), "small.yaml")["l3"][9][9][9] == ["x"] * 10  # 10**4 values: within budget


def test_expanded_size_counts_each_use_of_an_alias():
    # root map 1 + key a 1 + [1, 2] 3 + key b 1 + [*a, *a] (1 + 3 + 3) = 13
    node = yaml.compose("a: &a [1, 2]\nb: [*a, *a]\n")
    assert expanded_size(node) == 13
    assert expanded_size(yaml.compose("a: 1\n")) == 3
    with pytest.raises(yaml.YAMLError, match="more than 12 values"):
        expanded_size(node, budget=12)


def test_recursive_alias_and_deep_nesting_are_one_line():
    assert _refused(load_text, "a: &a [1, *a]\n", "r.yaml") == \
        "r.yaml: line 1: a recursive alias (a value that contains itself)"
    msg = _refused(load_text, "[" * 50_000 + "]" * 50_000, "deep.yaml")
    assert msg.startswith("deep.yaml:") and ("nesting depth" in msg or "nested too deeply" in msg), msg


def test_resources_are_bounded():
    assert parse_resources({"paper": {"gpus": 4096, "time_min": 525_600}}, "t.yaml")["paper"].gpus == 4096
    assert _refused(parse_resources, {"paper": {"gpus": 10**6}}, "t.yaml") == \
        "t.yaml: 'resources.paper.gpus' must be <= 4096, got 1000000"
    assert "'resources.mini.time_min' must be <= 525600 (a year)" in \
        _refused(parse_resources, {"mini": {"time_min": 10**9}}, "t.yaml")


def test_a_teacher_config_with_a_repeated_key_is_one_line(tmp_path):
    from types import SimpleNamespace

    from semcl.methods.distill.teacher import run_backbone

    cfg = tmp_path / "config.yaml"
    cfg.write_text("config:\n  model: {backbone: resnet32x4}\n")
    dep = SimpleNamespace(run_dir=tmp_path, run_id="abc123")
    assert run_backbone(dep) == "resnet32x4"
    cfg.write_text("config:\n  model: {backbone: resnet32x4}\n  model: {backbone: wrn_40_2}\n")
    with pytest.raises(ResultsError) as err:
        run_backbone(dep)
    assert str(err.value).startswith(f"{cfg}: truncated or invalid YAML at line 3 (duplicate key 'model' "
                                     "(first at line 2))")


def test_the_numbers_overlay_and_set_values_refuse_repeated_keys(tmp_path):
    from semcl.registry.variant_rows import parse_value
    from semcl.report.user_numbers import load_numbers

    path = tmp_path / "numbers.yaml"
    entry = "  - {table: rince/tab2, row: CE, column: top1, value: 1.0, source: me}\n"
    path.write_text("numbers:\n" + entry)
    assert [n.value for n in load_numbers(path)] == [1.0]
    path.write_text("numbers:\n" + entry + "numbers: []\n")
    assert "line 3: duplicate key 'numbers' (first at line 1)" in _refused(load_numbers, path)
    assert parse_value("[0.1, 0.2]", "method.tau=[0.1, 0.2]") == [0.1, 0.2]
    assert "duplicate key 'a'" in _refused(parse_value, "{a: 1, a: 2}", "method.tau={a: 1, a: 2}")
