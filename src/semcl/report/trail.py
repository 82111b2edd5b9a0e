"""The files behind a table's rows (`semcl show <table> --files`): registry YAML, preset, method spec, Method
class, losses, network builder, dataset reader, and per column the evaluation protocol and its metric code.

Everything comes from declarations: MethodSpec.cls / losses / builder, DatasetSpec.reader, the
EVALUATION object of each protocol module and the metric functions that module imports from semcl.evals.
Torch-free: modules not yet imported are located on disk (importlib's path finder), never imported, so a
method's class module (which imports torch) is named without loading it.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from semcl.errors import ConfigError

PROFILE = "paper"  # the profile whose resolved config names a row's dataset
# the steps from a row's YAML to one of its cells (what `cell_files` counts); builder and dataset are shown
# beside them but are not on the way from the registry entry to the number
CELL_ROLES = ("registry", "preset", "spec", "class", "loss", "protocol", "metric")


@dataclass(frozen=True)
class Ref:
    """One file of a trail: what it is (`role`), where, and the object in it (module, name) where one is meant."""

    role: str
    path: Path
    shown: str  # the path as printed: under experiments/ or the package's folder
    module: str | None = None
    name: str | None = None
    note: str = ""


@dataclass(frozen=True)
class ColumnTrail:
    key: str
    eval: str
    protocol: Ref | None  # None: an evaluation whose module declares no EVALUATION (never so in the registry)
    metrics: tuple[Ref, ...] = ()


@dataclass(frozen=True)
class RowTrail:
    label: str
    method: str
    state: str
    refs: tuple[Ref, ...]  # registry, preset, spec, class, losses, builder, dataset (those that apply)
    columns: tuple[ColumnTrail, ...]
    # rows whose runs make this row's cells: a `select` row's candidates, a derived row's pairs
    sources: tuple[RowTrail, ...] = field(default=())
    note: str = ""
    selects: str | None = None  # the table a `select` row shows a row of

    def cell_files(self, key: str) -> set[Path]:
        """The distinct files from this row's YAML to its cell `key` (CELL_ROLES)."""
        files = {r.path for r in self.refs if r.role in CELL_ROLES}
        column = next((c for c in self.columns if c.key == key), None)
        if column is not None and not self.sources and self.method != "reference":
            files |= {r.path for r in (column.protocol, *column.metrics) if r is not None}
        if self.sources:
            # a select row shows one of its candidates' cells, a derived row all its pairs' (the union)
            each = [s.cell_files(key) for s in self.sources]
            files |= max(each, key=len) if self.selects else set().union(*each)
        return files

    def files_to_a_cell(self) -> int:
        """The most files any of this row's cells is away from its YAML."""
        return max((len(self.cell_files(c.key)) for c in self.columns), default=len(self.cell_files("")))


@cache
def module_file(module: str) -> Path:
    """The source file of a dotted module, located without importing it (ConfigError if there is none)."""
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__file__", None):
        return Path(loaded.__file__)
    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])  # a top-level name is located, not imported
    for i in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            break
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), list(spec.submodule_search_locations))
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ConfigError(f"module {module!r}: no source file found")
    return Path(spec.origin)


def _shown(path: Path, module: str) -> str:
    """`path` below the folder that holds the top-level package (semcl/losses/ranked.py, torch/nn/functional.py)."""
    top = module_file(module.split(".")[0])
    base = top.parent.parent if top.name == "__init__.py" else top.parent
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return str(path)


def code_ref(role: str, ref: str, note: str = "") -> Ref:
    """A "module:name" reference (a MethodSpec / DatasetSpec string) as a file of the trail."""
    module, _, name = ref.partition(":")
    path = module_file(module)
    return Ref(role, path, _shown(path, module), module, name or None, note)


def _registry_ref(role: str, path: Path, root: Path) -> Ref:
    try:
        shown = path.relative_to(root.parent).as_posix()
    except ValueError:
        shown = str(path)
    return Ref(role, path, shown)


@cache
def _preset_path(path: Path, mtime_ns: int) -> tuple[Path, Path] | None:
    """(preset file, registry root) of a table file: its `preset:` key, looked up in <root>/presets as the loader does."""
    from semcl.yaml_strict import load_file

    name = (load_file(path) or {}).get("preset")
    if not name:
        return None
    for parent in path.parents:
        candidate = parent / "presets" / f"{name}.yaml"
        if candidate.is_file():
            return candidate, parent
    raise ConfigError(f"{path}: key 'preset': no preset file {name}.yaml in a presets/ folder above it")


def spec_ref(spec) -> Ref:
    """The module that declares `spec` (beside its schema, by the methods' convention) and the name it has there."""
    module = spec.schema.__module__
    name = None
    for key, value in vars(sys.modules[module]).items():
        if value is spec:
            name = key
            break
        if isinstance(value, tuple) and any(v is spec for v in value):
            name = f"{key}[{next(i for i, v in enumerate(value) if v is spec)}]"
    path = module_file(module)
    return Ref("spec", path, _shown(path, module), module, name, f"method {spec.name!r}")


@cache
def metric_refs(protocol_module: str) -> tuple[Ref, ...]:
    """The functions a protocol module imports from the metric modules of semcl.evals (its lazy imports in `run`)."""
    tree = ast.parse(module_file(protocol_module).read_text(encoding="utf-8"))
    refs = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("semcl.evals.")
                and not node.module.startswith("semcl.evals.protocols")):
            refs += [code_ref("metric", f"{node.module}:{alias.name}") for alias in node.names]
    return tuple(dict.fromkeys(refs))  # first occurrence order, each once


def column_trail(column) -> ColumnTrail:
    from semcl.evals.protocols import EVALUATIONS

    evaluation = EVALUATIONS[column.eval]
    module = next((name for name, mod in list(sys.modules.items())
                   if name.startswith("semcl.evals.protocols.") and getattr(mod, "EVALUATION", None) is evaluation), None)
    if module is None:
        return ColumnTrail(column.key, column.eval, None)
    path = module_file(module)
    return ColumnTrail(column.key, column.eval, Ref("protocol", path, _shown(path, module), module, "EVALUATION"),
                       metric_refs(module))


def row_trail(table, row, columns: tuple[ColumnTrail, ...] | None = None) -> RowTrail:
    """The files behind one row of `table` (a registry Table), resolved under the paper profile."""
    from semcl.data.registry import DATASETS
    from semcl.methods.registry import METHODS

    columns = columns if columns is not None else tuple(column_trail(c) for c in table.columns)
    preset = _preset_path(table.path, table.path.stat().st_mtime_ns)
    root = preset[1] if preset else table.path.parent.parent
    refs = [_registry_ref("registry", table.path, root)]
    state = row.state
    if row.select:
        linked = table.linked.get(row.select.table)
        sources = tuple(row_trail(linked, r) for r in linked.rows if r.implemented) if linked else ()
        return RowTrail(row.label, row.method, state, tuple(refs), columns, sources,
                        f"selects the row of {row.select.table} with the {row.select.best} mean {row.select.column}",
                        selects=row.select.table)
    if row.derived:
        by_label = {r.label: r for r in table.rows}
        labels = dict.fromkeys(label for pair in row.derived for label in pair)
        sources = tuple(row_trail(table, by_label[label], columns) for label in labels)
        return RowTrail(row.label, row.method, state, tuple(refs), columns, sources,
                        f"derived: the mean of A - B over {len(row.derived)} row pair(s), the first "
                        f"{row.derived[0][0]!r} - {row.derived[0][1]!r}")
    if row.reference:
        return RowTrail(row.label, row.method, state, tuple(refs), columns, note="a published number; nothing runs")
    if preset:
        refs.append(_registry_ref("preset", preset[0], root))
    spec = METHODS.get(row.method)
    if spec is None:
        return RowTrail(row.label, row.method, state, tuple(refs), columns, note="planned method: no code yet")
    refs.append(spec_ref(spec))
    if isinstance(spec.cls, str):
        refs.append(code_ref("class", spec.cls))
    else:  # a class given directly (tests): already imported, so its module is known
        refs.append(code_ref("class", f"{spec.cls.__module__}:{spec.cls.__qualname__}"))
    refs += [code_ref("loss", ref) for ref in spec.losses]
    if spec.builder:
        refs.append(code_ref("builder", spec.builder))
    cfg = table.resolve(row, PROFILE)
    data = DATASETS.get(cfg.data.name)
    if data is not None:
        refs.append(code_ref("dataset", data.reader, f"data.name {cfg.data.name}"))
    return RowTrail(row.label, row.method, state, tuple(refs), columns)


def table_trails(table, rows) -> list[RowTrail]:
    columns = tuple(column_trail(c) for c in table.columns)
    return [row_trail(table, row, columns) for row in rows]


def pick_rows(table, labels: list[str]) -> list:
    """The rows named by `--row LABEL` (exact labels, in the order given)."""
    by_label = {r.label: r for r in table.rows}
    unknown = [label for label in labels if label not in by_label]
    if unknown:
        raise ConfigError(f"{table.path}: --row {unknown[0]!r}: table {table.id} has no such row "
                          f"({len(table.rows)} rows; `semcl show {table.id}` lists their labels)")
    return [by_label[label] for label in dict.fromkeys(labels)]


def print_trails(table, trails: list[RowTrail]) -> None:
    """The text form: each row's files, then the columns' protocol and metric files (the same for every row)."""
    print(f"{table.id}: {table.title}\n  the files behind each row (paths under the registry and package folders)")
    for t in trails:
        print(f"  {t.label} (method {t.method}, {t.state}): {t.files_to_a_cell()} files from its YAML to a cell")
        if t.note:
            print(f"    {t.note}")
        for r in t.refs:
            what = " ".join(x for x in (r.name, f"({r.note})" if r.note else "") if x)
            print(f"    {r.role:<9} {r.shown}{'  ' + what if what else ''}")
        if t.sources:
            named = ", ".join(repr(s.label) for s in t.sources[:4])
            named += f" and {len(t.sources) - 4} more" if len(t.sources) > 4 else ""
            print(f"    its cells come from: {named} "
                  f"(`semcl show {t.selects or table.id} --files`)")
    print("  columns (each row's cells):")
    for c in trails[0].columns if trails else ():
        protocol = c.protocol.shown if c.protocol else "(no protocol module)"
        metrics = ", ".join(f"{m.shown} {m.name}" for m in c.metrics) or "no metric code (a number read, not computed)"
        print(f"    {c.key:<20} {c.eval:<14} protocol {protocol}; metric {metrics}")
