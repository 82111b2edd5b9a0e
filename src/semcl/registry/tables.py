"""The registry: one YAML file per paper table under experiments/, loaded safely and strictly (semcl.yaml_strict).

Each entry says what the paper reported (with provenance) and how to rerun it (rows x
profiles). Loading validates everything, including every implemented row's resolved config
under every profile, so a malformed entry fails at `semcl list` with the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from semcl.config import merge
from semcl.data.registry import DATASETS
from semcl.errors import ConfigError
from semcl.evals.protocols import EVALUATIONS, Column, eval_section, validate_column
from semcl.locations import registry_root
from semcl.methods.registry import METHODS, PLANNED_METHODS
from semcl.methods.spec import DEPENDENCY_KINDS
from semcl.registry.entry import ProfileEntry, parse_entry
from semcl.registry.figure_kinds import check_figure
from semcl.registry.index_store import remember_tables, table_paths
from semcl.registry.resources import CPU_ONLY, DEFAULT_RESOURCES, Resources, parse_resources, parse_row_resources
from semcl.registry.same_as import KEY as SAME_AS
from semcl.registry.same_as import CellRef
from semcl.registry.same_as import parse as parse_same_as
from semcl.registry.same_as import resolve as resolve_same_as
from semcl.registry.same_as import targets as same_as_targets
from semcl.run_config import build_config
from semcl.schema import NON_NEGATIVE, build
from semcl.yaml_strict import load_file as load_yaml_file

# the strict safe loader (duplicate keys and alias bombs refused; libyaml's parser where PyYAML has it)

PROVENANCE_TAGS = {
    "paper-table", "paper-prose", "paper-abstract", "official-readme", "derived", "secondary",
    "crd-readme", "moco-readme", "user-supplied",
}
PROFILE_NAMES = ("paper", "mini", "smoke")
CLAIMS_FILE = "claims.yaml"  # experiments/<paper>/claims.yaml: the paper's claims, not a table
PAPER_FILE = "paper.yaml"  # experiments/<paper>/paper.yaml: the paper's title, authors, arXiv id (semcl.registry.papers)
DERIVED = "derived"  # the method name of a derived row (rows[].derived)
# the method name of a reference row: another source's published number shown beside ours (the CRD paper's
# distillation tables, the MoCo README's detection results); nothing to run, so it counts as implemented
REFERENCE = "reference"
# the method name of a released row: the authors' checkpoint, evaluated only (`semcl verify`), never trained
RELEASED = "released"
# the official layouts a released row may name (torch-free copy of semcl.models.released.LAYOUTS' keys; a test
# holds the two equal)
RELEASED_LAYOUTS = ("pcl-moco", "pcl-vit", "rince-supcon", "rince-in100-supcon", "rince-in100-ce", "repdistiller")


@dataclass(frozen=True)
class Reported:
    value: float
    provenance: str
    source: str
    std: float | None = None
    # further sources for the same cell (e.g. an aggregator repeating a README value), lower rank
    also: tuple[Reported, ...] = ()
    # the registry value a user-supplied one replaces (semcl numbers add --force; semcl.report.user_numbers)
    overrides: Reported | None = None
    # "<table>/<row>/<column>" when the cell shows that entry's number (semcl.registry.same_as), else None
    same_as: str | None = None


@dataclass
class ReportedEntry:
    """One reported number as written in the registry (validated strictly, semcl.schema)."""

    value: float
    provenance: str
    source: str
    std: float | None = dataclasses.field(default=None, metadata=NON_NEGATIVE)


@dataclass(frozen=True)
class Selection:
    """A row's `select:`: the row of table `table` with the best (`max` / `min`) mean of `column`."""

    table: str
    column: str
    best: str = "max"


@dataclass(frozen=True)
class Checkpoint:
    """A released row's file (semcl.registry.entry.ReleasedEntry): where the authors link it, what it loads into."""

    file: str
    url: str
    layout: str
    network: str  # the row of the same table whose network (config) the weights load into
    size: int | None = None
    sha256: str | None = None
    log: str | None = None


@dataclass(frozen=True)
class Row:
    label: str
    method: str
    overrides: dict[str, Any]
    reported: dict[str, Reported | None]
    # a second stage: each seed's run starts from the final weights of this row's run (same seed)
    init_from: str | None = None
    # a logit-sum ensemble of these rows' runs (a label may repeat: the k-th repeat takes the seed
    # k places further along the table's seed list, so "2 x the same model" means two seeds)
    ensemble: tuple[str, ...] = ()
    # knowledge distillation: each seed's run learns from this row's run of the same seed, frozen
    teacher: str | None = None
    # no runs of its own: shows the row of another table chosen by a criterion (semcl.report.tables)
    select: Selection | None = None
    deps_implemented: bool = True  # set at load: every row this one builds on is implemented
    # a derived row (method DERIVED, no runs of its own): per seed, the mean over these (A, B) row
    # pairs of A − B (semcl.report.tables.derived_lines)
    derived: tuple[tuple[str, str], ...] = ()
    # reported cells written as {same_as: ...}: None in `reported` until the registry resolves them
    refs: tuple[CellRef, ...] = ()
    # the authors' checkpoint this row evaluates (method RELEASED); None for every other row
    released: Checkpoint | None = None

    @property
    def implemented(self) -> bool:
        return (self.method in METHODS or self.method in (DERIVED, REFERENCE, RELEASED)) and self.deps_implemented

    @property
    def reference(self) -> bool:
        return self.method == REFERENCE

    @property
    def state(self) -> str:
        """`reference` (a published number, never run), `released` (the authors' checkpoint, evaluated only),
        `implemented`, or `not implemented` (planned)."""
        if self.reference or self.released:
            return "reference" if self.reference else "released"
        return "implemented" if self.implemented else "not implemented"

    @property
    def dependency_kind(self) -> str | None:
        """Which of the row keys init_from / ensemble / teacher it uses (one at most)."""
        kinds = [k for k in DEPENDENCY_KINDS if getattr(self, k)]
        return kinds[0] if kinds else None

    @property
    def depends_on(self) -> tuple[str, ...]:
        return ((self.init_from,) if self.init_from else ()) + ((self.teacher,) if self.teacher else ()) + self.ensemble


@dataclass(frozen=True)
class Profile:
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    substitute: dict[str, str | None] = field(default_factory=dict)
    seeds: list[int] | None = None
    note: str = ""
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # row label -> overrides after `overrides`


@dataclass(frozen=True)
class Table:
    id: str
    paper: str
    source: str
    title: str
    path: Path
    preset: dict[str, Any]
    seeds: list[int]
    columns: list[Column]
    rows: list[Row]
    profiles: dict[str, Profile]
    deviations: list[str]
    notes: list[str]
    resources: dict[str, Resources] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))  # per profile
    figure: dict[str, str] | None = None  # {kind: scatter, x: <column key>, y: <column key>} for `semcl figure`
    linked: dict[str, Table] = field(default_factory=dict)  # the tables its `select` rows read, by id
    row_resources: dict[str, dict[str, Resources]] = field(default_factory=dict)  # profile -> row label -> own

    def resources_for(self, label: str, profile: str) -> Resources:
        """The jobs of one row: its own `resources.<profile>.rows` entry, else the profile's; a row whose method
        computes on the CPU alone (MethodSpec.on_gpu) holds no GPU where the profile's jobs do (CPU_ONLY)."""
        own = self.row_resources.get(profile, {}).get(label)
        if own is not None:
            return own
        res = self.resources[profile]
        if res.gpus and not _on_gpu(self.row(label).method):
            return CPU_ONLY
        return res

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise ConfigError(f"{self.path}: table {self.id} has no row {label!r}")

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise ConfigError(f"{self.path}: table {self.id} has no profile {name!r} (has: {', '.join(self.profiles)})")
        return self.profiles[name]

    def seeds_for(self, profile: str) -> list[int]:
        return self.profile(profile).seeds or self.seeds

    def config_tree(self, row: Row, profile: str) -> dict:
        """Layers: preset -> row -> profile; then the evaluations the columns need. A released row's config is
        its network row's (the authors' weights go into that network, evaluated with these columns)."""
        if row.released is not None:
            row = self.row(row.released.network)
        prof = self.profile(profile)
        tree: dict = {}
        where = str(self.path)
        merge(tree, self.preset, where=f"{where} (preset)")
        merge(tree, {"method.name": row.method}, where=where)
        merge(tree, row.overrides, where=f"{where}: row {row.label!r}")
        merge(tree, _for_method(prof.overrides, row.method, f"{where}: profile {profile!r}"),
              where=f"{where}: profile {profile!r}")
        merge(tree, prof.rows.get(row.label, {}), where=f"{where}: profiles.{profile}.rows[{row.label!r}]")
        eval_section(self.columns, prof.substitute, tree.setdefault("eval", {}))  # each evaluation sets its keys
        return tree

    def resolve(self, row: Row, profile: str):
        return build_config(self.config_tree(row, profile), where=f"{self.path}: row {row.label!r}, profile {profile!r}")


def _on_gpu(method: str) -> bool:
    spec = METHODS.get(method)
    return spec is None or spec.on_gpu


def _for_method(overrides: dict[str, Any], method: str, where: str) -> dict[str, Any]:
    """A profile's `method.*` keys apply to the rows whose method has that field (e.g. a smaller
    memory bank for every contrastive row); a key no method knows is still an error."""
    known = method_config_fields(None)
    mine = method_config_fields(method)
    out = {}
    for key, value in overrides.items():
        if key.startswith("method."):
            field_name = key.split(".", 1)[1]
            if field_name not in known:
                raise ConfigError(f"{where}: unknown key {key!r} (no method has it)")
            if field_name not in mine:
                continue
        out[key] = value
    return out


@cache
def method_config_fields(method: str | None) -> frozenset[str]:
    """The config fields of one method's schema (None: of every method); METHODS is fixed at import."""
    specs = METHODS.values() if method is None else (METHODS[method],)
    return frozenset(f.name for spec in specs for f in dataclasses.fields(spec.schema))


# Config trees already validated by build_config (their JSON with sorted keys). Rows of the large KD
# tables share trees under the small profiles (every pair runs the same mini networks), so each
# distinct tree is built once per process; the check itself is unchanged.
_VALIDATED: dict[str, int] = {}  # validated config trees -> their global batch size


def _validate(table: Table, row: Row, profile: str) -> None:
    tree = table.config_tree(row, profile)
    key = json.dumps(tree, sort_keys=True, default=repr)
    where = f"{table.path}: row {row.label!r}, profile {profile!r}"
    if key not in _VALIDATED:
        cfg = build_config(tree, where=where)
        check_dataset(cfg, where)
        _VALIDATED[key] = cfg.optim.batch_size
    check_batch_split(_VALIDATED[key], table.resources_for(row.label, profile), where)


def check_batch_split(batch: int, res: Resources, where: str) -> None:
    """The global batch (`optim.batch_size`) splits evenly over the row's processes (its GPUs, or its CPU tasks):
    every rank trains on its equal slice (semcl.runtime.distributed.local_slice), so a batch that does not split
    would pass the queue and fail at the job's first step."""
    ranks = res.gpus or res.tasks
    if ranks > 1 and batch % ranks:
        raise ConfigError(f"{where}: 'optim.batch_size' = {batch} does not split over the row's {ranks} "
                          f"{'GPUs' if res.gpus else 'tasks'} (each rank trains on an equal slice)")


def check_dataset(cfg: Any, where: str) -> None:
    """The method's own check of what its dataset's class count can serve (MethodSpec.check_dataset); a
    registered row's config and a `--set` variant's (semcl.registry.variant_rows) both pass through it."""
    data = DATASETS.get(cfg.data.name)
    if data is None:  # an unknown dataset is reported where the data are read
        return
    num_classes = data.synthetic_classes if cfg.data.synthetic else data.num_classes
    try:
        METHODS[cfg.method.name].check_dataset(cfg.method, num_classes)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err} ({cfg.data.name}{' synthetic' if cfg.data.synthetic else ''} "
                          f"has {num_classes} classes)") from None


def _link_rows(rows: list[Row], where: str) -> list[Row]:
    """Check `init_from` / `teacher` / `ensemble` references (known labels, no cycles, the kind the
    method's spec declares) and
    mark rows whose base or members are not implemented."""
    by_label = {r.label: r for r in rows}
    if len(by_label) != len(rows):
        dup = next(r.label for r in rows if sum(x.label == r.label for x in rows) > 1)
        raise ConfigError(f"{where}: two rows are labelled {dup!r}")
    for r in rows:
        rw = f"{where}: row {r.label!r}"
        if r.released is not None:
            net = by_label.get(r.released.network)
            if net is None or net.released or net.method in (DERIVED, REFERENCE) or net.select or net.depends_on:
                raise ConfigError(f"{rw}: 'released.network' = {r.released.network!r} names no trained row of "
                                  "this table (the row whose network the weights load into)")
        for a, b in r.derived:
            for label in (a, b):
                if label not in by_label or by_label[label].derived:
                    raise ConfigError(f"{rw}: 'derived.pairs' names no measured row {label!r}")
        used = [k for k in DEPENDENCY_KINDS if getattr(r, k)]
        if len(used) > 1:
            raise ConfigError(f"{rw}: keys {' and '.join(repr(k) for k in used)} exclude each other")
        kind = used[0] if used else None
        for dep in r.depends_on:
            if dep not in by_label:
                raise ConfigError(f"{rw}: {kind!r} names no row {dep!r}")
            if by_label[dep].released and kind != "teacher":
                raise ConfigError(f"{rw}: {kind!r} names row {dep!r}, the authors' checkpoint: only a 'teacher' "
                                  "can be a released row")
            if by_label[dep].select:
                raise ConfigError(f"{rw}: {kind!r} names row {dep!r}, which selects another table's row "
                                  "and has no runs of its own")
        spec = METHODS.get(r.method)
        if spec is None:  # planned: its dependency kind is unknown yet
            continue
        if spec.depends and kind != spec.depends:
            raise ConfigError(f"{rw}: method {r.method!r} builds on other runs: key {spec.depends!r} is required")
        if kind and spec.depends != kind:
            raise ConfigError(f"{rw}: key {kind!r}: method {r.method!r} does not take "
                              f"{'other runs' if spec.depends is None else repr(kind) + ' (it takes ' + repr(spec.depends) + ')'}")

    def ok(label: str, seen: tuple[str, ...]) -> bool:
        if label in seen:
            raise ConfigError(f"{where}: rows {' -> '.join((*seen, label))} depend on each other in a cycle")
        row = by_label[label]
        return (row.method in METHODS or row.released is not None) and all(ok(d, (*seen, label)) for d in row.depends_on)

    def usable(r: Row) -> bool:
        return all(ok(d, (r.label,)) for d in r.depends_on) and all(
            by_label[x].method in METHODS and all(ok(d, (x,)) for d in by_label[x].depends_on)
            for pair in r.derived for x in pair)

    return [dataclasses.replace(r, deps_implemented=usable(r)) for r in rows]


def _reported(value: Any, key: str, where: str) -> Reported | None:
    """null, one {value, provenance, source, std}, or a list of them (the first is the cell's value)."""
    if value is None:
        return None
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where}: '{key}' is an empty list of reported numbers (use null)")
        first, *rest = (_reported(v, f"{key}[{i}]", where) for i, v in enumerate(value))
        if first is None or None in rest:
            raise ConfigError(f"{where}: '{key}': a list of reported numbers may not hold null")
        return dataclasses.replace(first, also=tuple(rest))
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{key}' must be null or {{value, provenance, source}}")
    entry = build(ReportedEntry, value, key, where, {f"{key}.provenance": PROVENANCE_TAGS})
    return Reported(entry.value, entry.provenance, entry.source, entry.std)


def _column(c: Any, where: str, index: int | None = None) -> Column:
    """A column, validated by its evaluation (semcl.evals.protocols)."""
    return validate_column(c, where, index)


def _preset(path: Path) -> dict:
    return _parse_preset(path, path.stat().st_mtime_ns)


@cache
def _parse_preset(path: Path, mtime_ns: int) -> dict:
    """Presets are shared by many tables: parse each once (per modification). A preset is a mapping of config
    sections; anything else (a list, a bare string) is one line naming the file."""
    doc = load_yaml_file(path) or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a preset is a mapping of config sections (data, model, optim, ...), "
                          f"got a {type(doc).__name__}")
    return doc


def _row(r, i: int, keys: list[str], where: str) -> Row:
    """One registry row, checked on its own (method or derived or reference, reported columns, select column)."""
    rw = f"{where}: rows[{i}]"
    if r.derived is not None:
        extra = [k for k in ("method", "overrides", *DEPENDENCY_KINDS) if getattr(r, k)]
        if extra:
            raise ConfigError(f"{rw}: a 'derived' row has no key {extra[0]!r} (it runs nothing)")
        bad_pair = next((p for p in r.derived.pairs if len(p) != 2), None)
        if bad_pair is not None:
            raise ConfigError(f"{rw}: 'derived.pairs' entry {bad_pair!r} is not [row A, row B]")
        r = dataclasses.replace(r, method=DERIVED)
    elif r.released is not None:  # its exclusions are checked by parse_entry
        if r.released.layout not in RELEASED_LAYOUTS:
            raise ConfigError(f"{rw}: 'released.layout' = {r.released.layout!r} is no known layout "
                              f"(known: {', '.join(RELEASED_LAYOUTS)})")
        r = dataclasses.replace(r, method=RELEASED)
    elif r.method is None:
        raise ConfigError(f"{rw}: key 'method' is required (or 'derived' or 'released')")
    if r.method == REFERENCE:
        extra = [k for k in ("overrides", *DEPENDENCY_KINDS) if getattr(r, k)]
        if extra:
            raise ConfigError(f"{rw}: a reference row has no key {extra[0]!r} (it runs nothing)")
    if r.method not in (DERIVED, REFERENCE, RELEASED) and r.method not in METHODS and r.method not in PLANNED_METHODS:
        raise ConfigError(f"{rw}: unknown method {r.method!r} "
                          f"(known: {sorted([*METHODS, *PLANNED_METHODS, REFERENCE])})")
    reported = r.reported or {}
    bad = sorted(set(reported) - set(keys))
    if bad:
        raise ConfigError(f"{rw}: 'reported' names unknown column {bad[0]!r}")
    if r.select and r.select.column not in keys:
        raise ConfigError(f"{rw}: 'select.column' = {r.select.column!r} is not a column key of this table")
    refs = tuple(parse_same_as(v, k, f"rows[{i}].reported.{k}", where) for k, v in reported.items()
                 if isinstance(v, dict) and SAME_AS in v)
    own = {k: v for k, v in reported.items() if k not in {ref.column for ref in refs}}
    return Row(r.label, r.method, dict(r.overrides or {}),
               {k: _reported(own.get(k), f"rows[{i}].reported.{k}", where) for k in keys},
               r.init_from, tuple(r.ensemble or ()), r.teacher,
               Selection(r.select.table, r.select.column, r.select.best) if r.select else None,
               derived=tuple((a, b) for a, b in r.derived.pairs) if r.derived else (), refs=refs,
               released=Checkpoint(**dataclasses.asdict(r.released)) if r.released else None)


def load_table(path: Path, presets: Path) -> Table:
    where = str(path)
    doc = load_yaml_file(path)  # one line naming the file: invalid YAML, duplicate keys, alias bombs
    entry = parse_entry(doc, where)  # types, unknown keys, seeds, safe id and labels
    preset: dict = {}
    if entry.preset:
        ppath = presets / f"{entry.preset}.yaml"
        if not ppath.exists():
            raise ConfigError(f"{where}: key 'preset': no preset file {ppath}")
        preset = _preset(ppath)
    columns = [_column(c, where, i) for i, c in enumerate(entry.columns)]
    keys = [c.key for c in columns]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise ConfigError(f"{where}: 'columns[{i}].key' = {key!r} repeats an earlier column's key")
    rows = [_row(r, i, keys, where) for i, r in enumerate(entry.rows)]
    rows = _link_rows(rows, where)
    by_key = {c.key: c for c in columns}
    for c in columns:
        check = EVALUATIONS[c.eval].check_table
        if check is not None:  # its references need the whole table
            check(c, by_key, {r.label for r in rows}, where)
    labels = {r.label for r in rows}
    profiles = {}
    for name, p in (entry.profiles or {}).items():
        if name not in PROFILE_NAMES:
            raise ConfigError(f"{where}: profiles.{name}: profile must be one of {PROFILE_NAMES}")
        p = p or ProfileEntry()
        for label, over in (p.rows or {}).items():
            if label not in labels:
                raise ConfigError(f"{where}: profiles.{name}.rows: no row {label!r} in this table")
            if not isinstance(over, dict):
                raise ConfigError(f"{where}: profiles.{name}.rows[{label!r}] must be a mapping of dotted keys")
        profiles[name] = Profile(name, dict(p.overrides or {}), dict(p.substitute or {}), p.seeds, p.note,
                                 {k: dict(v) for k, v in (p.rows or {}).items()})
    profiles.setdefault("paper", Profile("paper"))
    resources = parse_resources(entry.resources, where)
    table = Table(entry.id, entry.paper, entry.source, entry.title, path, preset, list(entry.seeds),
                  columns, rows, profiles, list(entry.deviations or []), list(entry.notes or []),
                  resources, check_figure(entry.figure, keys, where),
                  row_resources=parse_row_resources(entry.resources, resources, labels, where))
    for row in rows:  # fail at load time, not when a job starts
        if row.implemented and not row.derived and not row.select and not row.reference and not row.released:
            for prof in profiles:
                _validate(table, row, prof)
        repeats = max((row.ensemble.count(x) for x in row.ensemble), default=0)
        for prof in profiles:
            if repeats > len(table.seeds_for(prof)):
                raise ConfigError(f"{where}: row {row.label!r}, profile {prof!r}: 'ensemble' repeats a row {repeats} "
                                  f"times but the profile has {len(table.seeds_for(prof))} seed(s); each repeat "
                                  f"needs its own seed")
    return table


@cache
def load_registry(root: Path | None = None) -> dict[str, Table]:
    root = root or registry_root()
    if not root.is_dir():
        raise ConfigError(f"{root}: registry folder not found (set SEMCL_REGISTRY)")
    tables: dict[str, Table] = {}
    for path in sorted(root.rglob("*.yaml")):
        if "presets" in path.relative_to(root).parts or path.name in (CLAIMS_FILE, PAPER_FILE):
            continue  # presets are layers, claims files judged claims (semcl.report.claims), paper files citations
        table = load_table(path, root / "presets")
        if table.id in tables:
            raise ConfigError(f"{path}: key 'id': {table.id!r} already defined in {tables[table.id].path}")
        tables[table.id] = table
    return _link_selections({tid: resolve_same_as(t, tables) for tid, t in tables.items()})


def _link_selections(tables: dict[str, Table]) -> dict[str, Table]:
    """Give each table with `select` rows the tables they read (checked: the table exists, has the
    column and every profile of the selecting table, and does not itself select)."""
    out = dict(tables)
    for table in tables.values():
        linked = {}
        for row in table.rows:
            if not row.select:
                continue
            rw = f"{table.path}: row {row.label!r}: select"
            src = tables.get(row.select.table)
            if src is None:
                raise ConfigError(f"{rw}: key 'table' = {row.select.table!r} is no table of the registry")
            if row.select.column not in [c.key for c in src.columns]:
                raise ConfigError(f"{rw}: key 'column' = {row.select.column!r} is not a column of {src.id}")
            lacking = sorted(set(table.profiles) - set(src.profiles))
            if lacking:
                raise ConfigError(f"{rw}: {src.id} has no profile {lacking[0]!r}")
            if any(r.select for r in src.rows):
                raise ConfigError(f"{rw}: {src.id} has selecting rows itself (one level only)")
            linked[src.id] = src
        if linked:
            out[table.id] = dataclasses.replace(table, linked=linked)
    return out


def unknown_table(table_id: str, known) -> ConfigError:
    """The one-line error for a table id the registry lacks: the close matches (case-insensitive), else the
    tables of the same paper, else where the list is."""
    import difflib

    known = sorted(known)
    lower = {k.lower(): k for k in known}
    # ids share their paper's prefix, so only a near-identical id is a likely typo
    close = ([lower[table_id.lower()]] if table_id.lower() in lower else
             [lower[m] for m in difflib.get_close_matches(table_id.lower(), list(lower), n=3, cutoff=0.9)])
    if close:
        return ConfigError(f"unknown table {table_id!r}; did you mean {' or '.join(close)}?")
    paper = table_id.split("/")[0].lower()
    same = [k for k in known if k.split("/")[0].lower() == paper]
    if same:
        return ConfigError(f"unknown table {table_id!r} (tables of {same[0].split('/')[0]}: {', '.join(same)})")
    papers = sorted({k.split("/")[0] for k in known})
    return ConfigError(f"unknown table {table_id!r} (papers: {', '.join(papers)}; `semcl list` shows the "
                       f"{len(known)} tables)")


def get_table(table_id: str, root: Path | None = None) -> Table:
    """One table, with the tables its `select` rows read. Where a current registry index exists (the whole
    registry was loaded and checked at these very files: semcl.registry.index), only those files are read."""
    reg = root or registry_root()
    paths = table_paths(reg) if reg.is_dir() else None
    if paths is not None:
        if table_id not in paths:
            raise unknown_table(table_id, paths)
        table = load_table(Path(paths[table_id]), reg / "presets")
        if table.id != table_id:  # the index names another table's file: read the registry whole instead
            return _get_from_registry(table_id, root, reg, replace=True)
        wanted = {table_id: table}
        for row in table.rows:
            if row.select and row.select.table in paths and row.select.table not in wanted:
                wanted[row.select.table] = load_table(Path(paths[row.select.table]), reg / "presets")
        # the tables its same_as cells read (their own references are not followed: a target holds a number)
        read = dict(wanted)
        for tid in same_as_targets([ref for row in table.rows for ref in row.refs], paths):
            if tid not in read:
                read[tid] = load_table(Path(paths[tid]), reg / "presets")
        wanted[table_id] = resolve_same_as(table, read)
        return _link_selections(wanted)[table_id]
    return _get_from_registry(table_id, root, reg, replace=True)  # the index was absent, stale or untrusted


def _get_from_registry(table_id: str, root: Path | None, reg: Path, replace: bool = False) -> Table:
    tables = load_registry(root)
    remember_tables(tables, reg, replace)
    if table_id not in tables:
        raise unknown_table(table_id, tables)
    return tables[table_id]
