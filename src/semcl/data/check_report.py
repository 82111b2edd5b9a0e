"""One report on the datasets some runs need under a data root (`semcl data check`, and `semcl run`
before it submits anything): per dataset the layout its reader expects, then present / missing /
incomplete with what was found (counts, split files, checksums) and what is absent or malformed.
"""

from __future__ import annotations

from pathlib import Path

from semcl.data.check import DatasetCheck, inspect_dataset
from semcl.errors import DataError

MAX_LISTED = 5  # absent paths listed per dataset; the rest are counted
# the datasets the suite can lay out itself, from installed packages (semcl.data.prepare_mini)
HOW_TO_GET = {"fashion_mnist": "semcl prepare-mini", "mnist": "semcl prepare-mini",
              "mnist_motion": "semcl prepare-mini --video"}


def needed_datasets(runs) -> dict[str, set[str]]:
    """dataset name -> the ids of the tables whose runs read it from disk (the training set and every
    OOD set; synthetic runs write their own data and need none)."""
    need: dict[str, set[str]] = {}
    for r in runs:
        if not r.config.data.synthetic:
            for name in (r.config.data.name, *r.config.eval.ood):
                need.setdefault(name, set()).add(r.table_id)
    return dict(sorted(need.items()))


def check_all(need: dict[str, set[str]], root: Path, checksums: bool = False) -> list[DatasetCheck]:
    return [inspect_dataset(name, root, checksums) for name in need]


def render(checks: list[DatasetCheck], need: dict[str, set[str]], root: Path, profile: str) -> str:
    if not checks:
        return (f"data root {root}, profile {profile}: no dataset is read from disk (synthetic data only)\n")
    counts = {k: sum(c.status == k for c in checks) for k in ("present", "missing", "incomplete")}
    lines = [f"data root {root}, profile {profile}: {len(checks)} dataset(s): "
             + ", ".join(f"{n} {k}" for k, n in counts.items())]
    width = max(len(c.name) for c in checks)
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<10} (needed by {', '.join(sorted(need.get(c.name, ())))})")
        lines += [f"    expects  {x}" for x in c.layout]
        lines += [f"    found    {x}" for x in c.found]
        lines += [f"    checksum {x}" for x in c.sums]
        if c.status == "missing":
            lines.append(f"    absent   {c.folder}/" if root.is_dir() else f"    absent   the data root {root}")
        else:
            lines += [f"    absent   {x}" for x in c.absent[:MAX_LISTED]]
            if len(c.absent) > MAX_LISTED:
                lines.append(f"    absent   ... and {len(c.absent) - MAX_LISTED} more")
        lines += [f"    problem  {x}" for x in c.problems if c.status != "missing" or root.is_dir()]
        if c.status != "present" and c.name in HOW_TO_GET:
            lines.append(f"    get it   {HOW_TO_GET[c.name]} --data-root {root}")
    return "\n".join(lines) + "\n"


def failure(checks: list[DatasetCheck], root: Path) -> DataError | None:
    """The one-line error when any dataset is missing or incomplete (None when all are present)."""
    bad = [c for c in checks if c.status != "present"]
    if not bad:
        return None
    if len(bad) == 1 and len(bad[0].errors) == 1:  # one problem: its own line names the file
        return bad[0].errors[0]
    if not root.is_dir():
        what = "not a directory" if root.exists() else "does not exist"
        return DataError(f"data root {root}: {what} (datasets {', '.join(c.name for c in bad)}; set --data-root or "
                         "SEMCL_DATA)")
    return DataError(f"data root {root}: " + "; ".join(f"{c.name} {c.status}" for c in bad)
                     + " (the report above lists each path; set --data-root or SEMCL_DATA)")
