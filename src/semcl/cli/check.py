"""`semcl check`: the preflight of every distinct row config, and the file that records it passed."""

from __future__ import annotations

import sys
from pathlib import Path

from semcl.cli.args import add_profile, add_set, add_tables, positive_int, results_folders, tables_named
from semcl.errors import SemclError


def preflight_file(args) -> Path:
    if getattr(args, "set", None):  # a variant's check never replaces the registered rows' status
        from semcl.registry.variant_rows import slug

        return results_folders(args).preflight(slug(args.set)) / f"{args.profile}.json"
    return results_folders(args).preflight() / f"{args.profile}.json"


def cmd_check(args) -> None:
    import tempfile

    from semcl.launch.slurm.profile import load_cluster_profile
    from semcl.preflight.check import Reduce
    from semcl.preflight.plan import check_tables
    from semcl.preflight.pool import default_jobs
    from semcl.preflight.report import render, write_status

    cluster = load_cluster_profile(args.cluster)
    from semcl.launch.slurm.job_python import check_environment, profile_path

    check_environment(cluster, profile_path(cluster))  # the venv's lock and the jobs' `python:`, before any compute
    reduce = (Reduce(backbone="resnet_tiny", image_size=32, head_hidden=64, head_dim=32, drop_pretrained=True,
                    method={"arch": "vit_tiny_test", "checkpoint": None, "backbone": "r3d_small",
                            "segmenter": "deeplabv3_tiny"})
              if args.reduced else None)
    tables = tables_named(args)

    def progress(res) -> None:
        if args.verbose:
            print(f"  {res.status():<7} {res.table} / {res.row} ({res.seconds:.1f} s)", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="semcl-check-") as work:
        results = check_tables(tables, args.profile, Path(work), cluster.gpu_mem_gb, reduce=reduce,
                               batch=args.batch, progress=progress, jobs=args.jobs or default_jobs(),
                               cache=None if args.no_cache else results_folders(args).preflight_cache)
    print(render(results), end="")
    if reduce is None:  # only a full-size check clears a table for the cluster
        write_status(preflight_file(args), args.profile, results)
    else:
        print(f"(reduced check: {reduce.describe()}; not recorded as a preflight)", file=sys.stderr)
    if not all(r.ok for r in results):
        raise SemclError(f"{sum(not r.ok for r in results)} row(s) failed the preflight")


def add_parser(sub) -> None:
    sp = sub.add_parser("check", help="preflight on the CPU: build, one step, checkpoint and evaluation of every "
                                      "distinct row config (seeds collapsed)")
    add_tables(sp)
    add_profile(sp)
    sp.add_argument("--cluster", default="example-a100",
                    help="cluster profile whose gpu_mem_gb the estimate is held against (slurm/profiles/)")
    sp.add_argument("--batch", type=positive_int, default=4, help="images in the one training step (default 4)")
    sp.add_argument("--reduced", action="store_true",
                    help="CI size: resnet_tiny backbone, 32-px images, 64/32 head, no pretrained file "
                         "(not recorded as a preflight)")
    sp.add_argument("-v", "--verbose", action="store_true", help="one progress line per row on stderr")
    sp.add_argument("--jobs", type=positive_int, help="checks in parallel processes (default: the CPU count)")
    sp.add_argument("--no-cache", action="store_true",
                    help="check every shape again (default: passed shapes are read from results/preflight/cache, "
                         "per code version)")
    add_set(sp, "with --set: only this row varies (repeatable)")
    sp.set_defaults(func=cmd_check)
