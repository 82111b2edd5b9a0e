"""The local executors refuse, in one line and before anything is written, runs that would silently become
something else on this machine: a multi-GPU row (one process, the whole global batch on one device) and a GPU
row on a machine without CUDA (unless --allow-cpu); a mistyped or missing tracking backend is refused by `run`
before any job goes out."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.launch.local_fit import refuse_unfit
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _pairs(table_id: str, profile: str = "paper"):
    table = get_table(table_id)
    return [(r, table.resources_for(r.row_label, profile)) for r in plan_runs(table, profile)]


def test_a_multi_gpu_row_is_refused_even_with_four_cuda_devices():
    pairs = [(r, res) for r, res in _pairs("hsa/linear") if res.gpus > 1]
    assert pairs and {res.gpus for _, res in pairs} == {32}
    with pytest.raises(ConfigError) as err:
        refuse_unfit(pairs, "local", allow_cpu=False, devices=lambda: 4)
    assert str(err.value).startswith(f"{len(pairs)} run(s) ask for 32 GPUs (hsa/linear row ")
    assert str(err.value).endswith("the local executor runs each run as one process on one device, which would "
                                   "train the whole global batch on one GPU; submit them with --executor slurm")


def test_a_gpu_row_without_cuda_is_refused_unless_allowed():
    pairs = _pairs("rince/tab2")
    assert {res.gpus for _, res in pairs} == {1}
    with pytest.raises(ConfigError) as err:
        refuse_unfit(pairs, "local", allow_cpu=False, devices=lambda: 0)
    assert str(err.value).startswith(f"{len(pairs)} run(s) of profile paper ask for a GPU (rince/tab2 row ")
    assert str(err.value).endswith("and this machine has no CUDA device: use --profile mini for the small "
                                   "reproduction on the CPU, or --allow-cpu to train them here anyway")
    refuse_unfit(pairs, "local", allow_cpu=True, devices=lambda: 0)  # the user said so
    refuse_unfit(pairs, "local", allow_cpu=False, devices=lambda: 1)  # a GPU is here
    refuse_unfit(_pairs("rince/tab2", "mini"), "local", allow_cpu=False, devices=lambda: 0)  # CPU rows


def test_run_refuses_a_paper_table_on_this_cpu_machine_before_writing(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMCL_TRACKING", raising=False)
    results = tmp_path / "results"
    code, _, err = _cli("run", "rince/tab2", "--profile", "paper", "--results", str(results),
                        "--data-root", str(tmp_path / "no-data"))
    assert code == 2 and err.count("\n") == 1
    assert "ask for a GPU" in err and "--profile mini" in err and "--allow-cpu" in err
    assert not (results / "runs").exists()


@pytest.mark.parametrize("value, message", [
    ("tensorbord", "$SEMCL_TRACKING: unknown backend 'tensorbord' (known: tensorboard, wandb, mlflow)"),
    ("wandb", "$SEMCL_TRACKING: backend 'wandb' needs the wandb package: pip install wandb"),
])
def test_run_checks_the_tracking_backend_before_any_job(tmp_path, monkeypatch, value, message):
    import importlib.util

    if value == "wandb" and importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    monkeypatch.setenv("SEMCL_TRACKING", value)
    results = tmp_path / "results"
    code, _, err = _cli("run", "rince/tab2", "--profile", "smoke", "--results", str(results))
    assert code == 2 and err == f"semcl: error: {message}\n"
    assert not results.exists()


def test_a_transfer_row_runs_locally_only_where_its_gpus_are():
    pairs = [(r, res) for r, res in _pairs("hsa/transfer-voc") if r.config.method.name == "detectron2_transfer"]
    assert len(pairs) == 3 and {res.gpus for _, res in pairs} == {8}
    refuse_unfit(pairs, "local", allow_cpu=False, devices=lambda: 8)  # detectron2 starts its 8 processes itself
    with pytest.raises(ConfigError, match=r"^3 run\(s\) ask for 8 GPUs \(hsa/transfer-voc row "):
        refuse_unfit(pairs, "local", allow_cpu=False, devices=lambda: 4)


def test_the_transfer_row_is_one_eight_gpu_job_without_an_evaluation_stage():
    from semcl.launch.slurm.profile import load_cluster_profile
    from semcl.launch.slurm.submit import slurm_groups

    groups = slurm_groups(_pairs("hsa/transfer-voc"), load_cluster_profile("example-a100"))
    transfer = [(p, runs) for p, runs in groups if runs[0].config.method.name == "detectron2_transfer"]
    assert len(transfer) == 1
    params, runs = transfer[0]
    assert len(runs) == 3 and (params["gpus_per_node"], params["ntasks_per_node"], params["nodes"]) == (8, 1, 1)
    assert params["cpus_per_task"] == 8 * load_cluster_profile("example-a100").cpus_per_gpu
    from semcl.launch.slurm.profile import separate_evaluation

    assert not separate_evaluation(params)
