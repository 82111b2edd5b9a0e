"""`semcl doctor --cluster <profile>`: the cluster acceptance job (semcl.launch.slurm.doctor), its page of
results in the results folder, and exit status 1 with one line per failed check."""

from __future__ import annotations

import sys

from semcl.cli.args import results_root
from semcl.errors import SemclError


class DoctorFailed(SemclError):
    exit_code = 1


def cmd_doctor(args) -> None:
    from semcl.launch.slurm.backend import require_slurm_commands
    from semcl.launch.slurm.doctor.submit import run_doctor
    from semcl.launch.slurm.profile import load_cluster_profile

    cluster = load_cluster_profile(args.cluster)
    require_slurm_commands(f"semcl doctor --cluster {args.cluster}", "run it on a login node of the cluster")
    from semcl.launch.slurm.job_python import check_environment, profile_path

    found = check_environment(cluster, profile_path(cluster))  # one line, before the job goes out
    if found:
        print(f"python: {cluster.python!r} runs Python {found['python']} with semcl; scontrol at {found['scontrol']}")
    root = results_root(args)
    root.mkdir(parents=True, exist_ok=True)
    checks = run_doctor(cluster, root, args.timeout_min * 60, args.min_free_gb)
    for c in checks:
        print(f"{'pass' if c.ok else 'FAIL'}  {c.name}: {c.detail}")
    failed = [c for c in checks if not c.ok]
    if failed:
        for c in failed:
            print(f"semcl doctor: {c.name} failed: {c.detail}", file=sys.stderr)
        raise DoctorFailed(f"{len(failed)} of {len(checks)} check(s) failed on cluster {cluster.name!r}")


def add_parser(sub) -> None:
    sp = sub.add_parser("doctor", help="submit the cluster acceptance job (2 nodes; ~5 min) and write its page of "
                                       "results to <results>/doctor/")
    sp.add_argument("--cluster", required=True, help="cluster profile (slurm/profiles/<name>.yaml)")
    sp.add_argument("--timeout-min", type=float, default=30.0,
                    help="give up waiting for the job after this long (default 30; it waits in the queue too)")
    sp.add_argument("--min-free-gb", type=float, default=10.0,
                    help="free space the results folder's disk must have (default 10 GB)")
    sp.set_defaults(func=cmd_doctor)
