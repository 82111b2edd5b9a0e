"""The README's result block cannot drift from the code.

`semcl readme` rewrote the block from a run set and kept that set's per-seed values in
reproduce/README.runs.json. Here (1) the block is exactly what those values render to, under the run ids the
code plans today, and (2) one seed of each row, retrained now on the real Fashion-MNIST the demo reads, ends with
those values bit for bit, in a process pinned to the instruction set each was recorded with (conftest.py).
A change that moves a published number fails (2) until the block is rebuilt:
`make demo && .venv/bin/semcl readme` (the README says so)."""

from __future__ import annotations

import json
from pathlib import Path

from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.readme import BLOCK, compact_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
README, RUNS_FILE = REPO / "README.md", REPO / "reproduce" / "README.runs.json"


def _committed() -> list[dict]:
    return json.loads(RUNS_FILE.read_text())["runs"]


def test_the_readme_block_renders_from_the_committed_per_seed_values_under_todays_run_ids(tmp_path):
    runs = _committed()
    store = Store(tmp_path)
    for r in runs:
        store.folder(r["run_id"]).path.mkdir(parents=True)
        store.metrics_path(r["run_id"]).write_text(json.dumps({"run_id": r["run_id"], "metrics": r["metrics"]}))
    blocks = [m for m in BLOCK.finditer(README.read_text())
              if any(r["table"] == m["table"] and r["profile"] == m["profile"] for r in runs)]
    assert blocks, "the README has no block built from reproduce/README.runs.json"
    for m in blocks:
        table = get_table(m["table"])
        assert m["body"] == compact_table(table, m["profile"], store, m["rows"]), \
            f"README block {m['table']} {m['profile']}: rebuild it with `semcl readme`"
        planned = {(r.row_label, r.seed): r.run_id for r in plan_runs(table, m["profile"])}
        for r in runs:
            if r["table"] == m["table"]:
                assert planned[(r["row"], r["seed"])] == r["run_id"], f"{r['row']} seed {r['seed']}: its run id moved"


def test_one_seed_of_each_readme_row_retrains_to_the_published_values_bit_for_bit(retrain):
    first = {}
    for r in _committed():  # the first seed of each row
        first.setdefault((r["table"], r["profile"], r["row"]), r)
    for w, got in retrain(list(first.values()), str(RUNS_FILE)):  # conftest.retrain_pinned: pinned to cpu_isa
        assert got == w["metrics"], (f"{w['table']} {w['row']} seed {w['seed']} ({w['cpu_isa']}): metrics moved; "
                                     "rebuild the README block (make demo, semcl readme)")


def test_the_readmes_paper_bill_is_what_semcl_plan_prints_today(capsys):
    """The prose figures of the paper profile's bill (runs, GPU-hours, shared trainings) are `semcl plan`'s."""
    import re

    from semcl.cli import main as cli

    assert cli.main(["plan", "--all", "--profile", "paper"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    got = re.search(r"(\d+) runs, ([\d.e+]+) GPU-h;.*; (\d+) runs evaluate .*: (\d+) GPU-h saved", last)
    runs, gpu_h, shared, saved = int(got[1]), float(got[2]), int(got[3]), float(got[4])
    text = " ".join(README.read_text().split())
    assert f"**{runs:,} runs, ≈ {gpu_h / 1000:.1f}k GPU-h**" in text, last
    assert f"{shared} runs evaluate a training another run does, saving ≈ {saved / 1000:.1f}k GPU-h" in text, last
