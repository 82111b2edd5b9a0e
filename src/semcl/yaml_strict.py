"""Strict YAML reading: the one loader behind every YAML file the tool reads (registry tables, presets,
claims, cluster profiles, a run's saved config.yaml).

PyYAML's safe loader has two habits a registry cannot live with:
- two equal keys in one mapping silently keep the last (`schedule.epochs: 3` then `7` runs 7);
  here they are refused, naming the key and both lines. Merge keys (`<<: *anchor`) still override,
  as YAML intends: only keys written twice in the same mapping are duplicates.
- aliases expand without bound: ten aliases of ten aliases of ... is a kilobyte of text and a
  billion values for whatever walks the result (the config checker, deepcopy, json for the run id).
  Before anything is constructed, the document's size with every alias expanded is counted (each
  distinct node once, so the count is cheap) and held against MAX_NODES; a recursive alias is refused.

Dates are not read as dates: `2019-01-01` stays a string, which the config schema then refuses or keeps.

Every failure is one line naming the file (and the line where YAML knows it), as the error class the
caller asks for (ConfigError by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from semcl.errors import ConfigError

# the C (libyaml) parser where PyYAML was built with it: the same safe subset, several times faster;
# construction (where the checks below live) is Python in both
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# values of one document with aliases expanded; the largest registry entry has a few thousand
MAX_NODES = 200_000
MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictYAMLError(yaml.YAMLError):
    """A duplicate key or an over-budget / recursive alias (a YAMLError, so `except yaml.YAMLError` sees it)."""

    def __init__(self, problem: str, node: Node):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = getattr(node, "start_mark", None)  # as PyYAML's own errors have it
        self.line = _line(node)  # 1-based, None if unknown

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}" if self.line else self.problem


def _line(node: Node) -> int | None:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def expanded_size(root: Node, budget: int = MAX_NODES) -> int:
    """Nodes of the document under `root` with every alias expanded, counting each distinct node once
    (memoised, iteratively: no recursion limit); StrictYAMLError past `budget` or on a recursive alias."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            size = 1 + sum(sizes[id(c)] for c in _children(node))
            if size > budget:
                raise StrictYAMLError(f"the document expands to more than {budget} values through its aliases "
                                      "(an alias bomb?)", node)
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise StrictYAMLError("a recursive alias (a value that contains itself)", node)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise StrictYAMLError("a recursive alias (a value that contains itself)", child)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class StrictLoader(_BaseLoader):
    """The safe loader, refusing duplicate keys and alias bombs (module docstring)."""

    def construct_document(self, node: Node) -> Any:
        expanded_size(node)
        return super().construct_document(node)

    def construct_mapping(self, node: Node, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            self._refuse_duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def _refuse_duplicates(self, node: MappingNode) -> None:
        seen: dict[Any, int | None] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key, ...)
            except TypeError:  # an unhashable key: the safe constructor's own error says so
                continue
            if first is not ...:
                at = f" (first at line {first})" if first else ""
                raise StrictYAMLError(f"duplicate key {key!r}{at}", key_node)
            seen[key] = _line(key_node)


# a date-like scalar (`2019-01-01`) stays the text it is: no setting of the tool is a date, and a datetime object
# would pass the reader only to fail as a traceback where the config is hashed (`--set optim.lr=2019-01-01`)
StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))


def load_text(text: str, where: str, error: type[Exception] = ConfigError) -> Any:
    """Parse one YAML document strictly; `error` (one line: `where`, the line, the problem) otherwise."""
    try:
        return yaml.load(text, Loader=StrictLoader)
    except StrictYAMLError as err:
        line = f" line {err.line}:" if err.line else ""
        raise error(f"{where}:{line} {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        line = f" line {mark.line + 1}:" if mark else ""
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise error(f"{where}:{line} invalid YAML ({problem})") from None
    except RecursionError:  # nesting deeper than Python's stack
        raise error(f"{where}: invalid YAML (nested too deeply)") from None


def load_file(path: Path, error: type[Exception] = ConfigError) -> Any:
    """`load_text` of a file; an unreadable or non-UTF-8 file is the same one-line `error`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text (byte {err.start}): not a YAML file") from None
    except OSError as err:
        raise error(f"{path}: cannot read ({err.strerror or err})") from None
    return load_text(text, str(path), error)
