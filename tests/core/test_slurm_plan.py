"""`plan --executor slurm`: arrays by resource request and the exact sbatch options, without a cluster."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from semcl.cli import main
from semcl.cluster import Resources, load_cluster_profile, slurm_parameters
from semcl.errors import ConfigError


def _plan(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plan", "rince/tab2", *args]) == 0
    return out.getvalue()


def test_smoke_plan_on_the_local_profile(tmp_path):
    out = _plan("--profile", "smoke", "--executor", "slurm", "--cluster", "local")
    lines = out.splitlines()
    assert "# array of 48 runs: cpus_per_task=1, mem=2GB, nodes=1, ntasks_per_node=1, partition=debug, " \
           "signal_delay_s=30, time=10" in lines
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
                     "#SBATCH --constraint=a100", "#SBATCH --time=1440", "#SBATCH --signal=USR2@120",
                     "#SBATCH --mail-type=FAIL"):
        assert expected in sbatch, expected


def test_gpu_request_on_a_cluster_without_gpus_is_an_error():
    with pytest.raises(ConfigError, match="needs 2 GPU\\(s\\) but cluster profile 'local' has gpus_per_node 0"):
        slurm_parameters(Resources(gpus=2), load_cluster_profile("local"), "x")


def test_multi_gpu_run_asks_one_task_per_gpu():
    p = slurm_parameters(Resources(gpus=4, time_min=5000), load_cluster_profile("example-a100"), "x")
    assert (p["gpus_per_node"], p["ntasks_per_node"], p["cpus_per_task"], p["mem"], p["time"]) == (4, 4, 8, "256GB", 2880)


def test_unknown_cluster_profile_names_the_file():
    with pytest.raises(ConfigError, match=r"slurm/profiles/nope.yaml: no cluster profile 'nope' \(known: example-a100, local\)"):
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
