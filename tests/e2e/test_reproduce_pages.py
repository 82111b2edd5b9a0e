"""The tracked reproduction pages (reproduce/<paper>.<profile>.md) cannot drift from the code.

`semcl report <paper> --profile <profile> --out reproduce/ --runs-file` wrote each page from a run set and kept the
per-seed values it shows beside it (<paper>.<profile>.runs.json, semcl.report.run_values). For each page that
has one: (1) the page is exactly what those values render to, under the run ids the code plans today, and names no
machine path; (2) its cheapest run (the plan's CPU estimate), retrained now on the real Fashion-MNIST / MNIST,
ends with the recorded metrics bit for bit, pinned to the instruction set it was recorded with (conftest.py).
A change that moves a shown number fails until the pages are rebuilt (docs/usage.md, "The reproduction pages")."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from semcl.estimate.cost import estimated_minutes
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.reproduction import collect_report, render_report_md
from semcl.report.run_values import store_of

REPRODUCE = Path(__file__).resolve().parents[2] / "reproduce"
PAGES = sorted(p for p in REPRODUCE.glob("*.runs.json") if p.name != "README.runs.json")  # README: its own test
# the paths a building machine would leak: an absolute folder, a home
MACHINE_PATH = re.compile(r"(?<![\w.])(?:/(?:home|work|tmp|Users|scratch|mnt|root)/|~/|[A-Z]:\\)")


def _page(runs_file: Path) -> tuple[str, str, Path]:
    """(paper, profile, the page) of reproduce/<paper>.<profile>.runs.json."""
    paper, profile, _ = runs_file.name.split(".", 2)
    return paper, profile, runs_file.with_name(f"{paper}.{profile}.md")


def _runs(runs_file: Path) -> list[dict]:
    doc = json.loads(runs_file.read_text())
    assert doc["page"] == _page(runs_file)[2].name, f"{runs_file}: key 'page' is {doc['page']!r}"
    return doc["runs"]


@functools.cache
def _plan(table_id: str, profile: str) -> tuple:
    """A table's planned runs, once per table (a page's file names a table's runs many times: one entry a row)."""
    return tuple(plan_runs(get_table(table_id), profile))


@pytest.mark.parametrize("runs_file", PAGES, ids=lambda p: p.name)
def test_the_page_renders_from_its_per_seed_values_under_todays_run_ids(runs_file, tmp_path):
    paper, profile, page = _page(runs_file)
    runs = _runs(runs_file)
    data = collect_report(paper, profile, store_of(runs, tmp_path / "results"), REPRODUCE, draw=False)
    text = page.read_text()
    assert render_report_md(data) == text, (
        f"{page.name} is not what {runs_file.name} renders to today: rebuild it (docs/usage.md, 'The reproduction pages')")
    assert [r["run_id"] for r in data.runs] == [r["run_id"] for r in runs], f"{runs_file.name}: runs the page no longer shows"
    for r in runs:
        planned = {(p.row_label, p.seed): p.run_id for p in _plan(r["table"], r["profile"])}
        assert planned.get((r["row"], r["seed"])) == r["run_id"], f"{r['table']} {r['row']} seed {r['seed']}: its run id moved"
    assert not MACHINE_PATH.search(text), f"{page.name}: a machine path: {MACHINE_PATH.search(text)[0]!r}"


def cheapest(runs: list[dict]) -> dict | None:
    """The run to retrain: the least CPU-minutes by the plan's estimate (semcl.estimate.cost), among the runs
    that train alone (no run before them: a base's weights, a shared training), first in the file on a tie;
    None for a page without runs."""
    best = None
    for r in runs:
        run = next(p for p in _plan(r["table"], r["profile"]) if p.run_id == r["run_id"])
        if not run.after and run.released is None:
            cost = estimated_minutes(run.config, r["profile"])
            best = best if best is not None and best[0] <= cost else (cost, r)
    assert best is not None or not runs, "no run of the page trains alone"
    return best and best[1]


@pytest.mark.parametrize("runs_file", PAGES, ids=lambda p: p.name)  # one item a page: xdist's workers share them
def test_the_cheapest_run_of_the_page_retrains_to_its_recorded_values_bit_for_bit(runs_file, retrain):
    want = cheapest(_runs(runs_file))
    if want is None:
        pytest.skip(f"{runs_file.name}: the page shows no run")
    for w, got in retrain([want], runs_file.name):  # conftest.retrain_pinned
        assert got == w["metrics"], (f"{runs_file.name}: {w['table']} {w['row']} seed {w['seed']} ({w['cpu_isa']}): "
                                     "metrics moved; rebuild the reproduction pages (docs/usage.md, 'The reproduction "
                                     "pages')")
