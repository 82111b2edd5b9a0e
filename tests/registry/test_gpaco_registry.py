"""Every GPaCo/PaCo number of the shared reported-numbers CSV sits in its registry entry, with its
provenance and source; every table names its split and epoch rule."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from semcl.evals.protocols import describe
from semcl.registry.tables import Reported, load_registry

CSV = Path("/work/shared/papers/reported_numbers.csv")
# the CSV names the paper excerpts by file; the registry cites the paper itself (a reader can open it)
EXCERPTS = {"shared/seeds/001_4c857a723e127c30.txt": "GPaCo paper, arXiv 2209.12400"}
EXPECTED_TABLES = {
    "gpaco/cifar100-lt", "gpaco/imagenet-lt", "gpaco/inat18", "gpaco/places-lt", "gpaco/tab5",
    "gpaco/full-cifar100", "gpaco/tab1", "gpaco/tab2", "gpaco/fig1a", "gpaco/tab10", "gpaco/tab12",
    "gpaco/tab13", "gpaco/tab13-vit", "gpaco/abl-crop", "gpaco/abl-alpha", "gpaco/abl-momentum", "gpaco/abl-queue",
    "gpaco/abl-formulation", "gpaco/mae-robustness", "gpaco/seg", "paco/full-imagenet",
    "paco/imagenet-lt", "paco/inat18", "paco/places-lt", "paco/cifar100-lt", "paco/ablations",
}


def _cited(source: str) -> str:
    for excerpt, paper in EXCERPTS.items():
        source = source.replace(excerpt, paper)
    return source


def _all_reported(table) -> list[Reported]:
    out = []
    for row in table.rows:
        for rep in row.reported.values():
            if rep is not None:
                out += [rep, *rep.also]
    return out


def test_every_table_is_registered():
    assert EXPECTED_TABLES <= set(load_registry())


@pytest.mark.skipif(not CSV.exists(), reason="shared reported-numbers CSV not present")
def test_every_csv_row_is_in_its_entry():
    tables = load_registry()
    rows = [r for r in csv.DictReader(CSV.open()) if r["paper"] in ("gpaco", "paco")]
    assert len(rows) == 104
    for r in rows:
        found = [rep for rep in _all_reported(tables[r["table"]])
                 if rep.value == float(r["value"]) and rep.provenance == r["provenance"]
                 and _cited(r["source"].split(" (")[0]) in rep.source]
        assert found, f"{r['table']}: {r['row']} / {r['column']} = {r['value']} [{r['provenance']}] missing"


def test_secondary_values_never_lead_a_cell_with_a_better_source():
    for table in load_registry().values():
        for row in table.rows:
            for rep in row.reported.values():
                if rep is not None and rep.also:
                    assert rep.provenance not in ("secondary", "derived"), (table.id, row.label)


def test_lt_tables_name_split_and_epoch():
    for tid in ("gpaco/places-lt", "paco/places-lt"):
        t = load_registry()[tid]
        splits = [t.resolve(r, "paper").data.test_split for r in t.rows if not r.released]
        assert splits == [None, "val"]  # OLTR test (default) and the official code's val split
    for col in load_registry()["gpaco/cifar100-lt"].columns:
        assert col.epoch == "last" and "last epoch" in describe(col)
