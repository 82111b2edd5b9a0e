"""`plan --executor slurm`: arrays by resource request and the exact sbatch options, without a cluster."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.launch.slurm.profile import load_cluster_profile, slurm_parameters
from semcl.registry.resources import Resources


def _plan(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plan", "rince/tab2", *args]) == 0
    return out.getvalue()


def test_smoke_plan_on_the_local_profile(tmp_path):
    out = _plan("--profile", "smoke", "--executor", "slurm", "--cluster", "local")
    lines = out.splitlines()
    assert "# array of 51 runs: cpus_per_task=1, mem=2GB, nodes=1, ntasks_per_node=1, partition=debug, " \
           "signal_delay_s=30, srun_args=['--cpus-per-task=1'], time=10" in lines
    sbatch = [ln for ln in lines if ln.startswith("#SBATCH")]
    for expected in ("#SBATCH --cpus-per-task=1", "#SBATCH --mem=2GB", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1",
                     "#SBATCH --partition=debug", "#SBATCH --signal=USR2@30", "#SBATCH --time=10"):
        assert expected in sbatch
    assert not any("--gpus" in ln for ln in sbatch)


def test_paper_plan_on_a_gpu_cluster():
    out = _plan("--profile", "paper", "--executor", "slurm", "--cluster", "example-a100")
    sbatch = [ln for ln in out.splitlines() if ln.startswith("#SBATCH")]
    for expected in ("#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=64GB",
                     "#SBATCH --partition=gpu", "#SBATCH --account=my-lab", "#SBATCH --qos=normal",
                     "#SBATCH --constraint=a100", "#SBATCH --time=720", "#SBATCH --signal=USR2@120",
                     "#SBATCH --mail-type=FAIL"):
        assert expected in sbatch, expected


def test_gpu_request_on_a_cluster_without_gpus_is_an_error():
    with pytest.raises(ConfigError, match="needs 2 GPU\\(s\\) but cluster profile 'local' has gpus_per_node 0"):
        slurm_parameters(Resources(gpus=2), load_cluster_profile("local"), "x")


def test_multi_gpu_run_asks_one_task_per_gpu():
    p = slurm_parameters(Resources(gpus=4, time_min=5000), load_cluster_profile("example-a100"), "x")
    assert (p["gpus_per_node"], p["ntasks_per_node"], p["cpus_per_task"], p["mem"], p["time"]) == (4, 4, 8, "256GB", 2880)


def test_unknown_cluster_profile_names_the_file():
    with pytest.raises(ConfigError, match=r"slurm/profiles/nope.yaml: no cluster profile .nope. \(known: example-a100, local; copy "
                                          r".*example-a100.yaml to nope.yaml there and edit it, or point \$SEMCL_CLUSTER_PROFILES"):
        load_cluster_profile("nope")


def test_rows_with_their_own_resources_go_in_their_own_array():
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plan", "gpaco/tab5", "--executor", "slurm", "--cluster", "example-a100"]) == 0
    arrays = [ln for ln in out.getvalue().splitlines() if ln.startswith("# array of")]
    # GPaCo / SupCon rows on the table's 8 GPUs, the four PaCo rows (x 3 seeds) on their own 4
    assert len(arrays) == 2
    assert arrays[0].startswith("# array of 12 runs:") and "gpus_per_node=8" in arrays[0] and "mem=512GB" in arrays[0]
    assert arrays[1].startswith("# array of 12 runs:") and "gpus_per_node=4" in arrays[1] and "mem=256GB" in arrays[1]
    paco_ids = {ln.split()[0] for ln in out.getvalue().splitlines() if " PaCo ResNet-" in ln and "seed=" in ln}
    assert len(paco_ids) == 12


def test_a_run_wider_than_a_node_spans_nodes_of_one_task_per_gpu():
    a100 = load_cluster_profile("example-a100")  # 8 GPUs a node
    p = slurm_parameters(Resources(gpus=32, time_min=600), a100, "x")
    assert (p["nodes"], p["gpus_per_node"], p["ntasks_per_node"], p["cpus_per_task"], p["mem"]) == (4, 8, 8, 8, "512GB")
    with pytest.raises(ConfigError, match=r"^x: a run needs 12 GPUs, not a whole number of nodes of 8 "
                                          r"\(cluster profile 'example-a100', gpus_per_node\)$"):
        slurm_parameters(Resources(gpus=12), a100, "x")
    cpu = slurm_parameters(Resources(cpus=2, mem_gb=3, tasks=4, nodes=2), load_cluster_profile("local"), "x")
    assert (cpu["nodes"], cpu["ntasks_per_node"], cpu["cpus_per_task"], cpu["mem"]) == (2, 2, 2, "6GB")
    with pytest.raises(ConfigError, match=r"^x: 3 tasks do not split evenly over 2 nodes \(resources\)$"):
        slurm_parameters(Resources(tasks=3, nodes=2), load_cluster_profile("local"), "x")


def test_plan_of_an_8_gpu_entry_on_4_gpu_nodes_shows_2_nodes(tmp_path, monkeypatch):
    (tmp_path / "four.yaml").write_text("partition: gpu\ngpus_per_node: 4\ncpus_per_gpu: 6\nmem_per_gpu_gb: 40\n")
    monkeypatch.setenv("SEMCL_CLUSTER_PROFILES", str(tmp_path))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plan", "gpaco/tab5", "--executor", "slurm", "--cluster", "four"]) == 0
    lines = out.getvalue().splitlines()
    arrays = [ln for ln in lines if ln.startswith("# array of")]
    eight = [a for a in arrays if "nodes=2" in a]
    assert eight and all("gpus_per_node=4" in a and "ntasks_per_node=4" in a and "mem=160GB" in a for a in eight)
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=4" in lines


def test_time_limit_from_the_estimate_on_the_ladder():
    from semcl.launch.slurm.profile import time_limit

    a100 = load_cluster_profile("example-a100")  # margin 2, at least 60 min, at most 2880
    # 600 GPU-minutes on 2 GPUs: 300 min of wall time x 2 = 600 -> the 720 rung
    assert time_limit(Resources(gpus=2), a100, 600.0) == 720
    assert time_limit(Resources(gpus=1), a100, 3.0) == 60  # the floor
    assert time_limit(Resources(gpus=1), a100, 1e6) == 2880  # the partition's cap
    assert time_limit(Resources(gpus=1, time_min=90), a100, 1e6) == 90  # an entry's own limit wins
    assert time_limit(Resources(cpus=2, tasks=2), load_cluster_profile("local"), 40.0) == 30  # 40 CPU-min / 4 x 2


def test_a_run_evaluating_another_runs_training_holds_the_evaluation_gpus(tmp_path):
    """hsa/semi's CsMl pre-training row shares hsa/linear's training key: submitted after it, its job holds the
    cluster's evaluation GPU and time, not the 32 GPUs its row trains on."""
    from semcl.launch.backends import runs_to_submit
    from semcl.launch.slurm.submit import evaluation_resources
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table
    from semcl.store import Store

    linear, semi = get_table("hsa/linear"), get_table("hsa/semi")
    trainer = next(r for r in plan_runs(linear, "paper") if r.row_label == "CsMl, 800 ep, multi-crop (v2 best configuration)")
    shared = next(r for r in plan_runs(semi, "paper") if r.row_label == "CsMl, 800 ep, multi-crop (pre-training)")
    assert trainer.train_key == shared.train_key and trainer.run_id != shared.run_id
    store = Store(tmp_path)
    todo = runs_to_submit([trainer, shared], store, retry_failed=False)
    assert [r.waits_for for r in todo] == [(), (trainer.run_id,)]
    cluster = load_cluster_profile("example-a100")
    res = evaluation_resources(todo, {trainer.run_id: linear.resources_for(trainer.row_label, "paper"),
                                      shared.run_id: semi.resources_for(shared.row_label, "paper")}, store, cluster)
    assert res[trainer.run_id].gpus == 32 and semi.resources_for(shared.row_label, "paper").gpus == 32
    assert res[shared.run_id] == Resources(gpus=cluster.eval_gpus, time_min=cluster.eval_time_min)
