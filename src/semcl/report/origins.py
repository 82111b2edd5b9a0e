"""Another lab's runs beside yours (`--against [NAME=]PATH`): where runs come from, each under a name of its own.

An origin is a results root (a folder with runs/) or a bundle (`semcl publish`: a folder with SHA256SUMS, whose
runs/<id>/ hold the same record files as a store's). A bundle is checked against its SHA256SUMS
(semcl.files.sha256sums_problems) before any of its files is read; a failing one is refused in one line naming the
file. An origin is only ever read: its runs are looked up by the run ids this code plans for the table
(runs/<id>/metrics.json either way), and nothing is written into it or copied out of it into your store.

Each origin keeps its name (the folder's, or NAME) in an `origin` column of the long results table, yours being
OURS, so equal run ids from two origins (equal configs give equal ids) stay two runs and every aggregation groups
by origin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from semcl.errors import ConfigError, ResultsError
from semcl.files import SUMS_FILE, sha256sums_problems
from semcl.registry.tables import Table
from semcl.store import ResultsRoot, Store

OURS = "ours"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Origin:
    """One source of runs: its name, its read-only store and what it is ("results root" or "bundle")."""

    name: str
    store: Store
    kind: str

    @property
    def root(self) -> Path:
        return self.store.root

    def describe(self) -> str:
        checked = f", every file as its {SUMS_FILE} lists it" if self.kind == "bundle" else ""
        return f"{self.name}: the {self.kind} {self.root}{checked} (read only)"


def split_against(text: str) -> tuple[str | None, Path]:
    """`NAME=PATH` -> (NAME, PATH); a plain PATH -> (None, PATH)."""
    name, sep, rest = text.partition("=")
    if sep and _NAME.match(name) and rest:
        return name, Path(rest)
    return None, Path(text)


def open_origin(text: str, ours: Path | None = None) -> Origin:
    """The origin `--against text` names; SemclError (one line naming the file) when it is neither a results root
    nor a bundle whose files all match its SHA256SUMS, or when it is your own results root."""
    name, path = split_against(text)
    if not path.is_dir():
        raise ResultsError(f"{path}: --against: no such folder (a results root with runs/, or a bundle with {SUMS_FILE})")
    if ours is not None and path.resolve() == Path(ours).resolve():
        raise ConfigError(f"{path}: --against names your own results root (--results); name another lab's store or bundle")
    if (path / SUMS_FILE).exists() or (path / SUMS_FILE).is_symlink():
        problems = sha256sums_problems(path)  # before anything of the bundle is read
        if problems:
            more = f" (and {len(problems) - 1} more problem(s); check with: sha256sum -c {SUMS_FILE})" if len(problems) > 1 else ""
            raise ResultsError(f"{problems[0]}{more}; the bundle is not read")
        kind = "bundle"
    elif ResultsRoot(path).runs.is_dir():
        kind = "results root"
    else:
        raise ResultsError(f"{path}: --against: neither a results root (no runs/ folder) nor a bundle (no {SUMS_FILE})")
    name = name or path.resolve().name
    if not _NAME.match(name) or name == OURS:
        raise ConfigError(f"{path}: --against: origin name {name!r} is reserved or not a plain name; "
                          f"name it: --against NAME={path}")
    return Origin(name, Store(path), kind)


def open_origins(texts: list[str] | None, ours: Path | None = None) -> list[Origin]:
    """Every `--against` in order; two with one name are refused (NAME=PATH tells them apart)."""
    origins: list[Origin] = []
    for text in texts or []:
        origin = open_origin(text, ours)
        if any(o.name == origin.name for o in origins):
            raise ConfigError(f"{origin.root}: --against: a second origin named {origin.name!r}; name them apart: "
                              f"--against NAME={origin.root}")
        origins.append(origin)
    return origins


def names(origins: list[Origin]) -> list[str]:
    """OURS, then the origins' names, in the order the columns show them."""
    return [OURS, *(o.name for o in origins)]


def origin_stores(ours: Store, origins: list[Origin]) -> dict[str, Store]:
    """name -> store, yours first."""
    return {OURS: ours, **{o.name: o.store for o in origins}}


def long_with_origins(table: Table, profile: str, ours: Store, origins: list[Origin]) -> pd.DataFrame:
    """The long results table (semcl.report.tables.long_table) of each origin, one after the other, with an
    `origin` column first; `attrs["commits"]` maps (origin, run id) to the record's code commit."""
    from semcl.report.tables import LONG_COLUMNS, long_table

    frames, commits = [], {}
    for name, store in origin_stores(ours, origins).items():
        long = long_table(table, profile, store)
        frames.append(long.assign(origin=name))
        commits.update({(name, rid): c for rid, c in long.attrs.get("commits", {}).items()})
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LONG_COLUMNS)
    out = out[["origin", *LONG_COLUMNS]]
    out.attrs["commits"] = commits
    return out


def slug(origins: list[Origin]) -> str:
    """The folder name outputs against these origins go to (beside the default ones, never over them)."""
    return "against-" + "+".join(o.name for o in origins)
