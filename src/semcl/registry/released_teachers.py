"""`--teachers released` (`semcl table`, `semcl verify --students`): a table's students learn from the authors'
released teachers, every distillation method at once, without a twin row per student in the registry.

A teacher row T has a released twin when a released row names T as its network (`released.network`, e.g.
"Teacher resnet56 (authors checkpoint)" loads into "Teacher resnet56"). In the view, every row whose `teacher` is
such a T distils from the released row instead, keeping its label, method and overrides: its run id and training
key then hold the teacher file's sha256 (semcl.registry.plan), so these are runs of their own and the registered
rows (teachers trained here) keep theirs. Only teachers whose file is at hand are swapped (verified into the store
for `table`, found in --weights for `verify`); the others' students stand in with the teacher trained here, and
the table's notes say which is which. The registry's explicit twins ("<label> (authors teacher)", plain KD) are
the same rows as the swapped ones and are left out of the view rather than shown twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from semcl.errors import ConfigError
from semcl.registry.tables import Row, Table

TEACHERS = ("trained", "released")  # --teachers: the registered rows (default), or the authors' files
TWIN_SUFFIX = " (authors teacher)"  # the registry's explicit twins of plain KD rows
NOTE = "Teachers (--teachers released):"  # the view's lines in the table's notes, which the rendered tables show


def released_twins(table: Table) -> dict[str, str]:
    """teacher row label -> the released row whose file loads into its network."""
    return {r.released.network: r.label for r in table.rows if r.released is not None}


def _same_student(a: Row, b: Row) -> bool:
    return (a.method, a.overrides, a.teacher, a.init_from, a.ensemble) == (b.method, b.overrides, b.teacher,
                                                                           b.init_from, b.ensemble)


def with_released_teachers(table: Table, at_hand: Iterable[str]) -> Table:
    """The view described above. `at_hand`: the released rows whose files are given. ConfigError when no row
    of the table learns from a teacher the authors released."""
    twins, at_hand = released_twins(table), set(at_hand)
    students = [r for r in table.rows if r.teacher in twins]
    if not students:
        have = sorted(twins) or ["none"]
        raise ConfigError(f"{table.path}: --teachers released: no row of {table.id} learns from a teacher the "
                          f"authors released (rows with a released checkpoint: {', '.join(have)})")
    rows, swapped, standing = [], {}, {}
    for r in table.rows:
        twin = twins.get(r.teacher) if r.teacher else None
        if twin is not None and twin in at_hand:
            rows.append(dataclasses.replace(r, teacher=twin))
            swapped.setdefault(twin, []).append(r.label)
        else:
            rows.append(r)
            if twin is not None:
                standing.setdefault(r.teacher, []).append(r.label)
    by_label = {r.label: r for r in rows}
    kept = [r for r in rows if not (r.label.endswith(TWIN_SUFFIX) and r.teacher in swapped
                                    and r.label[: -len(TWIN_SUFFIX)] in by_label
                                    and _same_student(r, by_label[r.label[: -len(TWIN_SUFFIX)]]))]
    notes = [f"{NOTE} the {len(labels)} rows taught by {table.row(twin).released.network!r} "
             f"learn from {twin!r}, the authors' file (its sha256 in their run ids)" for twin, labels in swapped.items()]
    notes += [f"{NOTE} no file of the authors' {t!r} here (semcl verify {table.id} "
              f"--weights DIR): its {len(labels)} students learn from the teacher trained here"
              for t, labels in standing.items()]
    return dataclasses.replace(table, rows=kept, notes=[*table.notes, *notes])
