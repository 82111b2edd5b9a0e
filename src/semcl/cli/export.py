"""`semcl export <run_id> --format F [--out PATH]`: a run's backbone for torchvision / timm / detectron2."""

from __future__ import annotations

from semcl.cli.args import results_root

# = semcl.engine.export.FORMATS (tests/engine/test_export_formats.py); named here so the CLI starts without torch
FORMATS = ("torchvision", "timm", "detectron2", "state_dict")


def cmd_export(args) -> None:
    from semcl.engine.export import export_run

    weights, meta = export_run(results_root(args), args.run_id, args.format, args.out)
    print(f"wrote {weights}\nwrote {meta}")


def add_parser(sub) -> None:

    sp = sub.add_parser("export", help="write a run's backbone as torchvision / timm / detectron2 weights "
                                       "(or a plain state dict) with a metafile beside it")
    sp.add_argument("run_id", help="the run's id (its folder under <results>/runs/)")
    sp.add_argument("--format", required=True, choices=FORMATS, help="weight layout to write")
    sp.add_argument("--out", help="weights path (default <results>/exports/<run_id>/<backbone>.<format>.pth|pkl)")
    sp.set_defaults(func=cmd_export)
