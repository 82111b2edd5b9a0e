"""`semcl` command line: the global options, one sub-parser per command module, and the error lines.

Each command group lives in its own module with its parser (`add_parser(sub)`): show (list, show), runs (plan,
run, status, wait), check, report (table, claims, figure, report, readme), data (data check, prepare-mini),
numbers, results, curves, export, diff, doctor, publish, released (weights check, verify). Everything beyond the
standard library is imported inside the command that needs it:
`list` and `plan` read the cached registry index (semcl.registry.index) and start without torch, pandas or the
registry's validation."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from semcl import __version__
from semcl.cli import check, curves, data, diff, doctor, export, numbers, publish, released, report, runs, show
from semcl.cli import results as results_cli
from semcl.errors import SemclError

# the command modules, in the order `semcl --help` lists them
COMMANDS = (show, runs, check, doctor, report, data, numbers, curves, export, diff, publish, released, results_cli)


def _set_precision(args) -> None:
    """--precision, else the backend's cluster profile's `precision` (the check command: its cluster profile's),
    is what every command plans runs with."""
    from semcl.runtime.precision import ENV

    chosen, cluster = args.precision, getattr(args, "cluster", None)
    if chosen is None and cluster:
        executor = getattr(args, "executor", None)
        if executor is None:  # `semcl check --cluster`: the profile whose GPUs the check is held against
            from semcl.launch.slurm.profile import load_cluster_profile

            chosen = load_cluster_profile(cluster).precision
        else:
            from semcl.launch.backends import backend

            chosen = backend(executor).precision(cluster)
    if chosen is not None:
        os.environ[ENV] = chosen


def cmd_completion(args) -> None:
    from semcl.cli.completion import bash_script
    from semcl.locations import profiles_root
    from semcl.registry.tables import load_registry

    papers = sorted({t.paper for t in load_registry().values()})
    clusters = sorted(p.stem for p in profiles_root().glob("*.yaml"))
    sys.stdout.write(bash_script(build_parser(), papers, clusters))


# a read-only results folder, a full disk or quota: one line instead of a traceback
WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def add_global_options(p: argparse.ArgumentParser, default=None) -> None:
    """--results / --registry / --precision: on the top parser, and on every sub-command with a suppressed
    default, so `semcl run T --results R` and `semcl --results R run T` mean the same and neither overrides
    the other with a default."""
    p.add_argument("--results", default=default, help="results folder (default: $SEMCL_RESULTS or ./results)")
    p.add_argument("--registry", default=default,
                   help="registry folder of table YAMLs (default: $SEMCL_REGISTRY, else the installed "
                        "package's copy, else the clone's experiments/)")
    p.add_argument("--precision", choices=("official", "fast"), default=default,
                   help="the runs' arithmetic, part of their ids: official (default: what each paper's code did) or "
                        "fast (bf16 autocast, channels_last, cudnn.benchmark); default: the cluster profile's, else official")


def _leaf_parsers(p: argparse.ArgumentParser):
    """Every parser below `p` that a command line can end in (sub-commands of sub-commands included)."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share one parser
                yield child
                yield from _leaf_parsers(child)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcl", description="Reproduce tables of papers on semantic contrastive learning.")
    p.add_argument("--version", action="version", version=f"semcl {__version__}")
    add_global_options(p)
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    sp = sub.add_parser("completion", help="print a bash completion script: source <(semcl completion bash)")
    sp.add_argument("shell", choices=("bash",), help="bash (zsh: after autoload bashcompinit; bashcompinit)")
    sp.set_defaults(func=cmd_completion)
    for child in _leaf_parsers(p):
        add_global_options(child, default=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.results and Path(args.results).exists() and not Path(args.results).is_dir():
            raise SemclError(f"--results {args.results}: is a file, not a results folder")
        if args.registry:  # through the environment, so the runs' own processes read the same registry
            if not Path(args.registry).is_dir():
                raise SemclError(f"--registry {args.registry}: not a folder of table YAMLs")
            os.environ["SEMCL_REGISTRY"] = str(Path(args.registry).resolve())
        _set_precision(args)
        args.func(args)
    except SemclError as err:
        print(f"semcl: error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    except KeyboardInterrupt:  # a command without its own signal handling (run has one)
        print("semcl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `semcl list | head` (before OSError, of which it is one)
        # the reader is gone: point stdout at /dev/null so the interpreter's final flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        line = os_error_line(err)
        if line is None:
            raise
        print(f"semcl: error: {line}", file=sys.stderr)
        return 2
    return 0


def _unreadable(name: str | bytes) -> bool:
    """The named file exists and may not be read by this process, or its folder may not be entered (a run folder
    of another user's umask-077 store: the file inside cannot even be seen, so neither read nor written)."""
    path = os.fsdecode(name)
    if os.path.lexists(path):
        return not os.access(path, os.R_OK)
    parent = os.path.dirname(os.path.abspath(path))
    return os.path.isdir(parent) and not os.access(parent, os.X_OK)


def os_error_line(err: OSError) -> str | None:
    """One line for a failed read or write of a named file (None: no file named, a bug to show whole)."""
    from semcl.files import DISK_FULL

    where = f"{err.filename}: " if err.filename else ""
    why = err.strerror or str(err)
    if err.errno in DISK_FULL:
        return (f"{where}cannot write: the disk is full or over quota ({why}); free space on it, or point "
                "--results / $SEMCL_RESULTS at another disk")
    if err.errno in WRITE_ERRNOS:
        # a store written by someone with umask 077 refuses its reading too: say which way the access failed
        verb = "cannot read" if err.filename and _unreadable(err.filename) else "cannot write"
        return (f"{where}{verb} ({why}); fix the permissions of the results folder "
                "(--results / $SEMCL_RESULTS)")
    if err.errno == errno.EFBIG:
        return f"{where}cannot write: the file would exceed this process's file-size limit (ulimit -f) ({why})"
    return f"{where}{why}" if err.filename else None


if __name__ == "__main__":
    sys.exit(main())
