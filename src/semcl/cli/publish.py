"""`semcl publish <table|paper> --profile P --out DIR`: the finished runs as a bundle in the field's formats
(model-index.yml, safetensors weights, logs, records, environment, SHA256SUMS, a model card);
`semcl publish --verify DIR`: recheck a bundle (sums, schema, no pickle / executable / link), one line per problem."""

from __future__ import annotations

import sys

from semcl.cli.args import add_profile, results_root
from semcl.errors import ConfigError, ResultsError


class BundleError(ResultsError):
    exit_code = 1  # a bundle that fails its check: like `sha256sum -c`, exit 1


def cmd_publish(args) -> None:
    if args.verify:
        if args.target or args.out:
            raise ConfigError("--verify DIR checks a bundle: give no table and no --out with it")
        from semcl.publish.verify import verify_bundle

        problems = verify_bundle(args.verify)
        if problems:
            for line in problems:
                print(line, file=sys.stderr)
            raise BundleError(f"{args.verify}: {len(problems)} problem(s); not a sound bundle")
        print(f"{args.verify}: bundle verified (every file as summed, model-index schema, no pickle, no executable, "
              "no link)")
        return
    if not args.target or not args.out:
        raise ConfigError("semcl publish needs a table or paper and --out DIR (or --verify DIR)")
    from semcl.publish.bundle import publish

    done = publish(args.target, args.profile, args.out, results_root(args), force=args.force)
    for line in done.without_weights:
        print(f"no weights for run {line}")
    print(f"wrote {done.folder}: {done.models} model(s), {done.runs} run(s); check it with "
          f"`semcl publish --verify {done.folder}`")


def add_parser(sub) -> None:
    sp = sub.add_parser("publish", help="write a table's (or paper's) finished runs as a bundle: model-index.yml, "
                                        "safetensors weights, logs, SHA256SUMS (or --verify one)")
    sp.add_argument("target", nargs="?", help="a table id (rince/tab2) or a paper (rince)")
    add_profile(sp)
    sp.add_argument("--out", help="the bundle's folder (new or empty; never inside the results store)")
    sp.add_argument("--force", action="store_true", help="replace the bundle already in --out")
    sp.add_argument("--verify", metavar="DIR", help="check the bundle DIR instead (reads only)")
    sp.set_defaults(func=cmd_publish)
