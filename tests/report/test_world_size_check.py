"""A table refuses to average runs of a row that trained with another number of processes than the row asks
for (its GPUs, or CPU tasks), naming them; records without the field are read as before."""

from __future__ import annotations

import pytest

from semcl.errors import ResultsError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.tables import long_table
from semcl.store import Store


def _write(store: Store, run, world_size):
    rec = {"run_id": run.run_id, "seed": run.seed, "metrics": {"linear_top1_last": 50.0 + run.seed % 7}}
    if world_size is not None:
        rec["world_size"] = world_size
    store.write_record(run.run_id, rec)


def test_a_row_trained_with_another_world_size_is_refused_by_name(tmp_path):
    table = get_table("rince/tab2")
    runs = [r for r in plan_runs(table, "mini") if r.row_label == "RINCE-in"]
    store = Store(tmp_path)
    _write(store, runs[0], 1)
    _write(store, runs[1], None)  # an older record: not checked
    assert len(long_table(table, "mini", store).query("row == 'RINCE-in' and column == 'top1'")) == 2
    _write(store, runs[2], 2)
    with pytest.raises(ResultsError) as err:
        long_table(table, "mini", store)
    assert str(err.value) == (
        f"rince/tab2 row 'RINCE-in' (mini): the registry asks for 1 process(es) a run but {runs[2].run_id} "
        "(2 processes) trained with another number; set those run folders aside and run them again with the GPUs "
        "the row asks for (--executor slurm)")
