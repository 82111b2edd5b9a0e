"""`slurm`: job arrays on a SLURM cluster (semcl.launch.slurm.submit), reattached through the manifest of
job <-> run (semcl.launch.slurm.manifest) and `sacct`; the cluster profile names partition, GPUs and limits."""

from __future__ import annotations

from semcl.launch.base import Backend, LaunchOptions
from semcl.launch.slurm.profile import load_cluster_profile
from semcl.registry.plan import Run
from semcl.store import Store

SLURM_COMMANDS = ("sbatch", "srun", "sacct")  # submitit submits with sbatch, wants srun, and polls sacct


def require_slurm_commands(what: str, remedy: str) -> None:
    """A one-line ConfigError naming the SLURM commands missing from PATH (before submitit's traceback)."""
    import shutil

    from semcl.errors import ConfigError

    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        raise ConfigError(f"{what}: {', '.join(missing)} not found on this machine's PATH; {remedy}")


class SlurmBackend(Backend):
    name = "slurm"
    needs_preflight = True  # a queued job should not meet a shape error after hours in the queue
    previews_layout = True  # `plan --executor slurm` shows the arrays and their sbatch scripts

    def check(self, runs, store: Store, options: LaunchOptions) -> None:
        """The cluster's commands are here and the profile reads, before a snapshot or any data is written."""
        require_slurm_commands("--executor slurm", "submit from a login node of the cluster (`semcl plan --executor "
                               "slurm` previews the jobs anywhere)")
        cluster = load_cluster_profile(options.cluster)
        from semcl.launch.slurm.job_python import check_environment, profile_path

        check_environment(cluster, profile_path(cluster))  # the venv's lock, the profile's `python:` command

    def submit(self, runs, store: Store, options: LaunchOptions) -> None:
        from semcl.launch.slurm.submit import submit_slurm

        submit_slurm(runs, store, options.data_root, load_cluster_profile(options.cluster),
                     retry_failed=options.retry_failed)

    def preview(self, runs, store: Store, cluster: str) -> str:
        from semcl.launch.slurm.submit import describe_arrays

        return describe_arrays(runs, load_cluster_profile(cluster), store)

    def states(self, store: Store, runs: list[Run]) -> dict[str, tuple[str, str]]:
        from semcl.launch.slurm.manifest import job_ids, latest_jobs, run_state
        from semcl.runtime.slurm_state import sacct_states
        jobs = latest_jobs(store)
        mine = [r for r in runs if r.run_id in jobs]
        if not mine:
            return {}
        states = sacct_states(job_ids([jobs[r.run_id] for r in mine]))
        return {r.run_id: run_state(store, r.run_id, jobs[r.run_id], states) for r in mine}

    def precision(self, cluster: str) -> str | None:
        return load_cluster_profile(cluster).precision
