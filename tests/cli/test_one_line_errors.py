"""Inputs that used to end in a traceback are one line naming the key or file, exit 2, nothing written."""

from __future__ import annotations

import io
import shutil
from contextlib import redirect_stderr, redirect_stdout

import pytest

from semcl.cli.main import main
from semcl.runtime import distributed


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def test_a_date_like_set_value_is_a_type_error_not_a_traceback():
    code, err = _cli("plan", "rince/tab2", "--profile", "smoke", "--set", "optim.lr=2019-01-01")
    assert code == 2 and err == ("semcl: error: --set optim.lr=2019-01-01 on rince/tab2 row 'Cross-entropy', profile "
                                 "'smoke': 'optim.lr' must be a number, got '2019-01-01'\n")


@pytest.mark.parametrize("body, kind", [("- a\n", "list"), ("just a string\n", "str")])
def test_a_preset_that_is_not_a_mapping_is_one_line(tmp_path, monkeypatch, body, kind):
    from semcl.locations import registry_root

    reg = tmp_path / "registry"
    shutil.copytree(registry_root(), reg)
    (reg / "presets" / "kd_cifar100.yaml").write_text(body)
    monkeypatch.setenv("SEMCL_REGISTRY", str(reg))  # what --registry sets (restored after the test)
    code, err = _cli("show", "scns/abl-negatives")
    assert code == 2 and err == (f"semcl: error: {reg}/presets/kd_cifar100.yaml: a preset is a mapping of config "
                                 f"sections (data, model, optim, ...), got a {kind}\n")


def test_slurm_without_its_commands_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    results = tmp_path / "results"
    code, err = _cli("run", "rince/tab2", "--profile", "smoke", "--row", "RINCE-in", "--executor", "slurm",
                     "--no-check", "--results", str(results))
    assert code == 2 and err == ("semcl: error: --executor slurm: sbatch, srun, sacct not found on this machine's "
                                 "PATH; submit from a login node of the cluster (`semcl plan --executor slurm` "
                                 "previews the jobs anywhere)\n")
    assert not results.exists()


@pytest.mark.parametrize("value", ["abc", "0", "-1", "2.5"])
def test_a_malformed_slurm_count_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("SLURM_NTASKS", value)
    with pytest.raises(distributed.DeviceError) as err:
        distributed.init_from_slurm()
    assert str(err.value) == f"$SLURM_NTASKS = {value!r}: expected a positive whole number (as SLURM sets it)"
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert distributed.slurm_count("SLURM_NTASKS") == 1 and distributed.init_from_slurm() is None


def test_a_batch_that_does_not_split_over_the_rows_ranks_is_refused_at_plan(tmp_path, monkeypatch):
    from semcl.locations import registry_root

    code, err = _cli("plan", "gpaco/imagenet-lt", "--profile", "paper", "--set", "optim.batch_size=130")
    assert code == 2 and err == ("semcl: error: --set optim.batch_size=130 on gpaco/imagenet-lt row 'GPaCo ResNet-50', "
                                 "profile 'paper': 'optim.batch_size' = 130 does not split over the row's 4 GPUs "
                                 "(each rank trains on an equal slice)\n")
    reg = tmp_path / "registry"
    shutil.copytree(registry_root(), reg)
    tab2 = reg / "rince" / "tab2.yaml"
    tab2.write_text(tab2.read_text().replace("smoke: {cpus: 1, mem_gb: 2, time_min: 10}",
                                             "smoke: {cpus: 1, mem_gb: 2, time_min: 10, tasks: 3}"))
    monkeypatch.setenv("SEMCL_REGISTRY", str(reg))
    code, err = _cli("plan", "rince/tab2", "--profile", "smoke")
    assert code == 2 and err.startswith(f"semcl: error: {tab2}: row 'Cross-entropy', profile 'smoke': 'optim.batch_size' = ")
    assert err.endswith(" does not split over the row's 3 tasks (each rank trains on an equal slice)\n")


def test_a_symlink_loop_in_the_registry_is_one_line_when_the_snapshot_is_made(tmp_path):
    from semcl.errors import ConfigError
    from semcl.locations import registry_root
    from semcl.snapshot import make_snapshot

    reg = tmp_path / "registry"
    shutil.copytree(registry_root(), reg)
    (reg / "loop1").symlink_to(reg / "loop2")
    (reg / "loop2").symlink_to(reg / "loop1")
    with pytest.raises(ConfigError) as err:
        make_snapshot(tmp_path / "results", registry=reg)
    assert str(err.value).startswith(f"{reg}/loop") and "cannot be copied into the job's code snapshot" in str(err.value)
    assert str(err.value).endswith("remove or fix the link") and "\n" not in str(err.value)
    assert not [p for p in (tmp_path / "results" / "snapshots").iterdir() if not p.name.startswith(".lock")]


FORTY = ",".join(str(i) for i in range(1, 41))
READERS = {"plan": ["plan", "hsa/abl-components"], "status": ["status", "hsa/abl-components"],
           "table": ["table", "hsa/abl-components"], "report": ["report", "hsa/abl-components"],
           "curves": ["curves", "hsa/abl-components"], "run": ["run", "hsa/abl-components"],
           "claims": ["claims", "hsa"], "export": ["export", "hsa/abl-components", "MoCo v2", "--format", "state_dict"]}
SET_ERRORS = {
    "grid": ([f"schedule.epochs={FORTY}", f"optim.lr={FORTY}"],
             "--set: 40 (optim.lr) x 40 (schedule.epochs) values make 1600 variants, more than 1000 (the most one "
             "command takes; split the sweep)"),
    "binary": (["model.pretrained=!!binary aGk="],
               "--set 'model.pretrained=!!binary aGk=': key 'model.pretrained' has a value of YAML type bytes; only "
               "numbers, strings, true/false, null and [lists] of them"),
    "set": (["model.pretrained=!!set {a, b}"],
            "--set 'model.pretrained=!!set {a, b}': key 'model.pretrained' has a value of YAML type set; only "
            "numbers, strings, true/false, null and [lists] of them"),
    "newline": (['model.pretrained="a\\nb"'],
                "--set 'model.pretrained=\"a\\\\nb\"': key 'model.pretrained' holds the control character U+000A; "
                "one line of text only"),
}


@pytest.mark.parametrize("case", sorted(SET_ERRORS))
@pytest.mark.parametrize("command", sorted(READERS))
def test_every_command_that_reads_set_refuses_a_huge_grid_or_odd_value_in_one_line(tmp_path, command, case):
    texts, message = SET_ERRORS[case]
    sets = [a for t in texts for a in ("--set", t)]
    code, err = _cli("--results", str(tmp_path), *READERS[command], "--profile", "smoke", *sets)
    assert code == 2 and err == f"semcl: error: {message}\n"
    assert not any(tmp_path.iterdir())  # nothing planned, run or written
