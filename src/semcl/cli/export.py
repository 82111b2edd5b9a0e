"""`semcl export <run_id> --format F [--out PATH]`: a run's backbone for torchvision / timm / detectron2;
`semcl export <table> <row> [--set KEY=VALUE] [--seed S]`: the run of that row (of its variant with --set)."""

from __future__ import annotations

from semcl.cli.args import add_profile, add_set, results_root
from semcl.errors import ConfigError

# = semcl.engine.export.FORMATS (tests/engine/test_export_formats.py); named here so the CLI starts without torch
FORMATS = ("torchvision", "timm", "detectron2", "state_dict")
CONTAINERS = ("safetensors", "pickle")  # = semcl.engine.export.CONTAINERS


def row_run(args) -> tuple[str, str | None]:
    """(the run id of `<table> <row>` (with --set: its variant's) at --seed, else the table's first seed; the
    variant's folder-safe name for the file name, None without --set)."""
    from semcl.cli.args import get_table
    from semcl.registry.plan import plan_runs

    table, label, tag = get_table(args.run_id), args.row, None
    if args.set:
        from semcl.registry.variant_views import one_variant, vary_tables

        one_variant(args.set, "export")
        (table,), labels_of = vary_tables([table], args.set, [label], args.profile)
        label = labels_of.get(table.id, {}).get(label, label)
        from semcl.registry.set_options import slug

        tag = slug(args.set)
    table.row(label)  # an unknown row: the registry's own error
    planned = [r for r in plan_runs(table, args.profile, [label]) if r.row_label == label]  # not the rows it builds on
    runs = [r for r in planned if args.seed is None or r.seed == args.seed]
    if not runs:
        seeds = sorted({r.seed for r in planned})
        raise ConfigError(f"{table.path}: row {label!r} of {table.id} has no run of seed {args.seed} under profile "
                          f"{args.profile!r} (seeds: {', '.join(map(str, seeds))})")
    return runs[0].run_id, tag


def cmd_export(args) -> None:
    from semcl.engine.export import export_run

    if args.row is None and args.set:
        raise ConfigError("--set exports a variant's run: name its table and row (semcl export <table> <row> --set ...)")
    run_id, tag = row_run(args) if args.row is not None else (args.run_id, None)
    weights, meta = export_run(results_root(args), run_id, args.format, args.out, tag=tag, container=args.container,
                               force=args.force)
    print(f"wrote {weights}\nwrote {meta}")


def add_parser(sub) -> None:

    sp = sub.add_parser("export", help="write a run's backbone as torchvision / timm / detectron2 weights "
                                       "(or a plain state dict) with a metafile beside it")
    sp.add_argument("run_id", help="the run's id (its folder under <results>/runs/), or a table id followed by a row")
    sp.add_argument("row", nargs="?", help="a row of that table: its run (seed --seed, else the table's first)")
    sp.add_argument("--format", required=True, choices=FORMATS, help="weight layout to write")
    sp.add_argument("--out", help="weights path (default <results>/exports/<run_id>/<backbone>[.<settings>].<format>"
                                  ".safetensors|pth|pkl; <settings>: the --set variant); never inside the results "
                                  "store but for its exports/ folder")
    sp.add_argument("--container", choices=CONTAINERS, default="safetensors",
                    help="the weights file: safetensors (default; loading it runs no code) or pickle (torch.save's "
                         ".pth, detectron2's .pkl)")
    sp.add_argument("--force", action="store_true", help="replace an existing weights file and its metafile")
    add_profile(sp)
    sp.add_argument("--seed", type=int, help="with <table> <row>: the seed of the run (default: the table's first)")
    add_set(sp, None, seeds=False)
    sp.set_defaults(func=cmd_export)
