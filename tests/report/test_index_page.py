"""`semcl report --index`: one self-contained page over every registry table, with runs done per profile, the
claims' verdicts under the chosen profile, and links into the paper pages that sit beside it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from semcl.cli.main import main
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.store import Store


class _Rows(HTMLParser):
    """The text of every body row's cells, and every link's target."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self._cell, self._in_body = [], [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self._cell = ""
        elif tag == "a":
            self.links.append(dict(attrs)["href"])

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _done(store: Store, run) -> None:
    store.write_record(run.run_id, {"run_id": run.run_id, "seed": run.seed, "metrics": {"linear_top1_last": 50.0},
                                    "world_size": 1})


@pytest.fixture
def index(tmp_path):
    store = Store(tmp_path / "results")
    runs = plan_runs(get_table("rince/tab2"), "mini")
    for run in runs[:2]:
        _done(store, run)
    reports = store.root / "reports"
    reports.mkdir(parents=True)
    (reports / "rince.mini.html").write_text("<html></html>")  # a paper page beside the index
    assert main(["--results", str(store.root), "report", "--index", "--profile", "mini"]) == 0
    return reports / "index.html", len({r.run_id for r in runs})


def test_every_table_has_a_line_with_its_runs_per_profile(index):
    path, planned = index
    parsed = _Rows()
    parsed.feed(path.read_text())
    registry = load_registry()
    assert [r[0] for r in parsed.rows] == sorted(registry)
    tab2 = next(r for r in parsed.rows if r[0] == "rince/tab2")
    assert tab2[3:6] == [f"0 / {len({r.run_id for r in plan_runs(registry['rince/tab2'], 'paper')})}",
                         f"2 / {planned}", f"0 / {len({r.run_id for r in plan_runs(registry['rince/tab2'], 'smoke')})}"]
    assert "rince.mini.html#t-rince-tab2" in parsed.links  # its paper's page is beside the index
    assert not any(link.startswith("gpaco.") for link in parsed.links)  # no page, no link
    no_mini = next(r for r in parsed.rows if r[0] == "gpaco/abl-alpha")
    assert no_mini[4] == "—"
    assert re.search(r"\d+ missing runs", "".join(r[6] for r in parsed.rows))  # claims' verdicts are counted


def test_the_index_is_self_contained(index):
    text = index[0].read_text()
    assert "<script" not in text and "http" not in text.replace('href="rince.mini.html', "")


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None and not os.environ.get("CI"), reason="chromium is not installed")
def test_chromium_renders_the_index(index, tmp_path):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'p'}",
             "--host-resolver-rules=MAP * ~NOTFOUND"]
    dom = subprocess.run([_chromium(), *flags, "--dump-dom", index[0].resolve().as_uri()], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    parsed = _Rows()
    parsed.feed(dom)
    assert len(parsed.rows) == len(load_registry())
