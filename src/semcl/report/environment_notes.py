"""A table cell whose seeds ran in different environments (the records' `environment`, runtime.environment): the
cell gets MIXED_ENV and the notes say which environments, with how many runs each. Only the fields that change
numbers count (SAME_RESULTS: torch, CUDA, cuDNN, GPU, lock hash), not the host or the driver's patch level."""

from __future__ import annotations

import pandas as pd

from semcl.runtime.environment import SAME_RESULTS, describe_key


def mixed_environments(long: pd.DataFrame) -> dict[tuple[str, str], dict[tuple, int]]:
    """(row, column) -> {environment key: runs} for the cells whose seeds ran in more than one environment
    (SAME_RESULTS: torch, CUDA, cuDNN, GPU, lock hash; not the host). Records without the field are not counted."""
    envs = long.attrs.get("environments") or {}
    out = {}
    for (row, col), ids in long.groupby(["row", "column"], sort=False)["run_id"] if len(long) else []:
        count: dict[tuple, int] = {}
        for rid in ids:
            if envs.get(rid) is not None:
                count[envs[rid]] = count.get(envs[rid], 0) + 1
        if len(count) > 1:
            out[(row, col)] = count
    return out


MIXED_ENV = "¤"  # a cell whose seeds ran in different environments (mixed_environments); † ‡ are taken, § cites sections


def environment_notes(summ: pd.DataFrame | None) -> list[str]:
    """One line per row's cells marked MIXED_ENV with the same environments: which, and how many runs ran in each."""
    mixed = (summ.attrs.get("mixed_env") or {}) if summ is not None else {}
    if not mixed:
        return []
    head = (f"{MIXED_ENV} the cell's seeds ran in different environments (any of {', '.join(SAME_RESULTS)} differ; "
            "`semcl diff RUN RUN` shows them):")
    # the cells of a row with the same environments share a line (a row's seeds usually differ in every column)
    grouped: dict[tuple, list[str]] = {}
    for (row, col), count in mixed.items():
        grouped.setdefault((row, tuple(count.items())), []).append(col)
    return [head] + [f"{MIXED_ENV} {row} / {', '.join(cols)}: " + "; ".join(
        f"{describe_key(k)} ({n} run{'s' if n > 1 else ''})" for k, n in count) for (row, count), cols in grouped.items()]
