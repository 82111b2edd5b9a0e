"""A paper's claims as data: experiments/<paper>/claims.yaml, read with a strict schema.

Each claim quotes the paper's sentence with its provenance and states one comparison the runs can
decide: on registry table `table`, column `column`, row `a` is greater (or less) than row `b`,
optionally by at least `margin` points. Without `b`, `a` must be a derived row (a per-seed
difference averaged over pairs, semcl.report.tables) and the claim is "a > margin" (b = 0). `stated`
is the difference the paper gives (shown, never tested). Claims on a table the registry does not
hold yet name it under `unregistered_tables` with the columns and rows the claims use; they read
"missing runs" until the table is registered, and from then on are checked against the registry.
Sentences with a number that no comparison can decide (an equivalence, a hyper-parameter search
without a table) go under `not_decidable` with the reason, so the file still accounts for every
quantitative sentence. Where the paper and the code (or the suite's control) differ, the same sentence is
judged on each reading (docs/papers/README.md rule 4): `reading` names the one a claim reads, shown beside its
comparison.

File layout:
    paper: rince
    unregistered_tables:
      rince/tab4: {title: ..., columns: [ucf_r1, ...], rows: [InfoNCE, ...]}
    claims:
      - {id, quote, provenance, source, table, column, a, b, direction: greater|less,
         margin: 0.0, stated: null, note: "", reading: ""}
    not_decidable:
      - {quote, provenance, source, reason}

Any unknown key, wrong type, unknown table / column / row or provenance tag is a ConfigError of one
line naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semcl.errors import ConfigError
from semcl.evals.protocols import EVALUATIONS
from semcl.locations import registry_root
from semcl.registry.tables import CLAIMS_FILE, PROVENANCE_TAGS, Table, load_registry
from semcl.report.claim_stats import DIRECTIONS
from semcl.yaml_strict import load_file as load_yaml_file

NUMBER = (int, float)


@dataclass(frozen=True)
class Claim:
    id: str
    quote: str
    provenance: str
    source: str
    table: str
    column: str
    a: str
    b: str | None  # None: `a` is a derived difference row, compared with 0
    direction: str  # greater | less
    margin: float = 0.0  # the smallest |difference| the claim asserts, in the column's unit
    stated: float | None = None  # the paper's stated A − B (display only)
    note: str = ""
    reading: str = ""  # which reading of a paper/code difference the claim reads ("" when there is one)

    def describe(self) -> str:
        rel = ">" if self.direction == "greater" else "<"
        by = f" by ≥ {self.margin:g}" if self.margin else ""
        on = f" [reading: {self.reading}]" if self.reading else ""
        return f"{self.a} {rel} {self.b or 0}{by} on {self.column} ({self.table}){on}"


@dataclass(frozen=True)
class PendingTable:
    """A table the claims use that the registry does not hold yet."""
    id: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[str, ...]


@dataclass(frozen=True)
class NotDecidable:
    quote: str
    provenance: str
    source: str
    reason: str


@dataclass(frozen=True)
class ClaimsFile:
    paper: str
    path: Path
    claims: tuple[Claim, ...]
    not_decidable: tuple[NotDecidable, ...]
    unregistered: dict[str, PendingTable]


# key -> (types, required)
_CLAIM_KEYS: dict[str, tuple[type | tuple, bool]] = {
    "id": (str, True), "quote": (str, True), "provenance": (str, True), "source": (str, True),
    "table": (str, True), "column": (str, True), "a": (str, True), "b": (str, False), "direction": (str, True),
    "margin": (NUMBER, False), "stated": (NUMBER, False), "note": (str, False), "reading": (str, False),
}
_PENDING_KEYS = {"title": (str, False), "columns": (list, True), "rows": (list, True)}
_UNDECIDABLE_KEYS = {"quote": (str, True), "provenance": (str, True), "source": (str, True), "reason": (str, True)}
_TOP_KEYS = {"paper": (str, True), "unregistered_tables": (dict, False), "claims": (list, True),
             "not_decidable": (list, False)}


def _type_name(types: type | tuple) -> str:
    names = [t.__name__ for t in (types if isinstance(types, tuple) else (types,))]
    return " or ".join(dict.fromkeys("number" if n in ("int", "float") else n for n in names))


def _checked(d: Any, keys: dict[str, tuple[type | tuple, bool]], where: str) -> dict:
    """The mapping itself, after checking: no unknown key, every required key, each value's type."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must be a mapping")
    unknown = sorted(set(d) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}' (allowed: {', '.join(keys)})")
    for key, (types, required) in keys.items():
        if key not in d or d[key] is None:
            if required:
                raise ConfigError(f"{where}: missing key '{key}'")
            continue
        value = d[key]
        # bool is an int subclass: `margin: true` is a typo, not a number
        if not isinstance(value, types) or (isinstance(value, bool) and types is NUMBER):
            raise ConfigError(f"{where}: key '{key}' must be {_type_name(types)}, not {type(value).__name__}")
        if required and isinstance(value, str) and not value.strip():
            raise ConfigError(f"{where}: key '{key}' is empty")
    return d


def _provenance(tag: str, where: str) -> str:
    if tag not in PROVENANCE_TAGS:
        raise ConfigError(f"{where}: key 'provenance': {tag!r} is not one of {sorted(PROVENANCE_TAGS)}")
    return tag


def _pending(tid: str, spec: Any, where: str) -> PendingTable:
    w = f"{where}: unregistered_tables.{tid}"
    d = _checked(spec, _PENDING_KEYS, w)
    for key in ("columns", "rows"):
        if not d[key] or not all(isinstance(x, str) for x in d[key]):
            raise ConfigError(f"{w}: key '{key}' must be a non-empty list of strings")
    return PendingTable(tid, d.get("title") or "", tuple(d["columns"]), tuple(d["rows"]))


def _names(table_id: str, registry: dict[str, Table], pending: dict[str, PendingTable]) -> tuple[list, list] | None:
    """(column keys, row labels) of a table: the registry's when it holds the table, else the declaration."""
    if table_id in registry:
        t = registry[table_id]
        return [c.key for c in t.columns], [r.label for r in t.rows]
    if table_id in pending:
        return list(pending[table_id].columns), list(pending[table_id].rows)
    return None


def _claim(d: Any, registry: dict[str, Table], pending: dict[str, PendingTable], where: str) -> Claim:
    if isinstance(d, dict) and isinstance(d.get("id"), str):
        where = f"{where} ({d['id']})"  # the id names the claim in every message
    d = _checked(d, _CLAIM_KEYS, where)
    _provenance(d["provenance"], where)
    if d["direction"] not in DIRECTIONS:
        raise ConfigError(f"{where}: key 'direction': {d['direction']!r} is not one of {sorted(DIRECTIONS)}")
    margin = float(d.get("margin") or 0.0)
    if margin < 0:
        raise ConfigError(f"{where}: key 'margin' must be >= 0 (the direction gives the sign)")
    names = _names(d["table"], registry, pending)
    if names is None:
        raise ConfigError(f"{where}: key 'table': {d['table']!r} is neither a registry table nor listed under "
                          f"'unregistered_tables'")
    columns, rows = names
    if d["column"] not in columns:
        raise ConfigError(f"{where}: key 'column': {d['column']!r} is not a column of {d['table']} "
                          f"({', '.join(columns)})")
    derived_a = d["table"] in registry and d["a"] in rows and bool(registry[d["table"]].row(d["a"]).derived)
    difference_col = d["table"] in registry and any(c.key == d["column"] and EVALUATIONS[c.eval].is_difference
                                                    for c in registry[d["table"]].columns)
    if d.get("b") is None and not (derived_a or difference_col):
        raise ConfigError(f"{where}: key 'b' is required unless 'a' names a derived row or 'column' a gain "
                          "column (a difference already)")
    for key in ("a", "b"):
        if key == "b" and d.get("b") is None:
            continue
        if d[key] not in rows:
            raise ConfigError(f"{where}: key '{key}': {d[key]!r} is not a row of {d['table']} ({', '.join(rows)})")
    if d["a"] == d.get("b"):
        raise ConfigError(f"{where}: keys 'a' and 'b' name the same row {d['a']!r}")
    stated = d.get("stated")
    return Claim(d["id"], d["quote"], d["provenance"], d["source"], d["table"], d["column"], d["a"], d.get("b"),
                 d["direction"], margin, None if stated is None else float(stated), d.get("note") or "",
                 d.get("reading") or "")


def load_claims_file(path: Path, registry: dict[str, Table] | None = None) -> ClaimsFile:
    """Parse and validate one claims file against the registry (default: the loaded registry)."""
    where = str(path)
    registry = load_registry() if registry is None else registry
    doc = load_yaml_file(path)  # one line naming the file: invalid YAML, duplicate keys, alias bombs
    doc = _checked(doc, _TOP_KEYS, where)
    pending = {}
    for tid, spec in (doc.get("unregistered_tables") or {}).items():
        pending[str(tid)] = _pending(str(tid), spec, where)
    claims, seen = [], set()
    for i, c in enumerate(doc["claims"]):
        claim = _claim(c, registry, pending, f"{where}: claims[{i}]")
        if claim.id in seen:
            raise ConfigError(f"{where}: claims[{i}]: key 'id': {claim.id!r} is used twice")
        seen.add(claim.id)
        claims.append(claim)
    undecidable = []
    for i, u in enumerate(doc.get("not_decidable") or []):
        w = f"{where}: not_decidable[{i}]"
        u = _checked(u, _UNDECIDABLE_KEYS, w)
        undecidable.append(NotDecidable(u["quote"], _provenance(u["provenance"], w), u["source"], u["reason"]))
    return ClaimsFile(doc["paper"], path, tuple(claims), tuple(undecidable), pending)


def claims_path(paper: str, root: Path | None = None) -> Path:
    return (root or registry_root()) / paper / CLAIMS_FILE


def load_claims(paper: str, root: Path | None = None, registry: dict[str, Table] | None = None) -> ClaimsFile:
    """The claims file of a paper; ConfigError naming the papers that have one when it is absent."""
    root = root or registry_root()
    path = claims_path(paper, root)
    if not path.exists():
        have = sorted(p.parent.name for p in root.glob(f"*/{CLAIMS_FILE}"))
        raise ConfigError(f"{path}: no claims file for paper {paper!r} (papers with one: {', '.join(have) or 'none'})")
    cf = load_claims_file(path, registry)
    if cf.paper != paper:
        raise ConfigError(f"{path}: key 'paper': {cf.paper!r}, but the file sits in the folder of {paper!r}")
    return cf
