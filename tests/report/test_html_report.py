"""`semcl report <paper> --html`: the page's cells are the Markdown report's, each paper value carries its
provenance, the page fetches nothing, and a real browser (headless Chromium) renders it.

The page is built once per module from a one-table registry (gpaco/fig1a and a claim on it) and generated run
records: three rows whose latency is 3 ms under the paper's (flagged *), one on it (not flagged).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml

from semcl.cli.main import main
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
NOISE = {123: -0.1, 546: 0.0, 937: 0.1}  # per seed: sample std 0.1
TOP1 = {123: 60.0, 546: 62.0, 937: 67.0}
OFFSET = {"RIDE-ResNet (3 experts)": 0.0}  # ours − paper latency per row; the other rows −3
CLAIMS = """\
paper: gpaco
claims:
  - {id: gpaco50-faster, table: gpaco/fig1a, column: latency_ms, a: "ResNeXt-50-32x4d (GPaCo)",
     b: "RIDE-ResNeXt (3 experts)", direction: less, provenance: paper-prose, source: "test source <Fig. 1>",
     quote: "GPaCo ResNeXt-50 is faster than RIDE-ResNeXt."}
"""


class Cells(HTMLParser):
    """Every <table>'s cells as (tag, attributes, text), row by row."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self.imgs: list[dict] = []
        self.tags: list[str] = []
        self.cell: list | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"class": attrs.get("class", ""), "rows": []})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self.cell = [tag, attrs, ""]
        elif tag == "img":
            self.imgs.append(attrs)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1]["rows"][-1].append(tuple(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data


def parse_html(text: str) -> Cells:
    p = Cells()
    p.feed(text)
    return p


def md_tables(text: str) -> list[list[list[str]]]:
    """The Markdown pipe tables, in order, as rows of cells; inline code shown as its text (as in a browser)."""
    tables, cur = [], None
    for line in text.splitlines():
        if line.startswith("| "):
            if cur is None:
                cur = []
                tables.append(cur)
            cur.append(line[2:-2].replace("`", "").split(" | "))
        elif line.startswith("|---"):
            continue
        else:
            cur = None
    return tables


def texts(table: dict) -> list[list[str]]:
    return [[c[2] for c in row] for row in table["rows"]]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(html path, md path) of `semcl report gpaco --profile paper --html` over the one-table registry."""
    tmp = tmp_path_factory.mktemp("html")
    reg = tmp / "experiments"
    shutil.copytree(REPO / "experiments" / "presets", reg / "presets")
    (reg / "gpaco").mkdir()
    # fig1a's four rows with a paper latency, without top-1 paper values: the other rows and those values
    # reference entries (same_as) this one-table registry does not hold
    doc = yaml.safe_load((REPO / "experiments" / "gpaco" / "fig1a.yaml").read_text())
    doc["rows"] = [{**r, "reported": {"latency_ms": r["reported"]["latency_ms"]}} for r in doc["rows"]
                   if "latency_ms" in (r.get("reported") or {})]
    (reg / "gpaco" / "fig1a.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (reg / "gpaco" / "claims.yaml").write_text(CLAIMS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMCL_REGISTRY", str(reg))
        load_registry.cache_clear()
        table = get_table("gpaco/fig1a")
        store = Store(tmp / "results")
        for run in plan_runs(table, "paper"):
            paper = table.row(run.row_label).reported["latency_ms"].value
            latency = paper + OFFSET.get(run.row_label, -3.0) + NOISE[run.seed]
            write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
                "acc_overall": TOP1[run.seed], "latency_ms": latency}})
        assert main(["--results", str(store.root), "report", "gpaco", "--profile", "paper", "--html",
                     "--out", str(tmp / "reports")]) == 0
        sources = {r.label: r.reported["latency_ms"].source for r in table.rows}
        load_registry.cache_clear()
    return tmp / "reports" / "gpaco.paper.html", tmp / "reports" / "gpaco.paper.md", sources


def test_page_cells_are_the_markdown_cells(page):
    html_path, md_path, _ = page
    dom, md = parse_html(html_path.read_text()), md_tables(md_path.read_text())
    assert [t["class"] for t in dom.tables] == ["overview", "results", "claims"]
    assert [texts(t) for t in dom.tables] == md
    results = texts(dom.tables[1])
    assert results[1] == ["RIDE-ResNet (3 experts)", "63.00 ± 3.61 (n=3)", "15.30 ± 0.10 (n=3) / 15.30 / 0.00"]
    assert results[2][2] == "10.10 ± 0.10 (n=3) / 13.10 / -3.00*"
    assert texts(dom.tables[0])[1] == ["gpaco/fig1a", "Fig. 1(a)", "4/4", "12/12", "4", "3"]
    assert texts(dom.tables[2])[1][-1] == "supported"
    assert dom.tables[2]["rows"][1][-1][1]["class"] == "verdict-supported"


def test_each_paper_value_names_its_provenance_and_flags_show(page):
    html_path, _, sources = page
    rows = parse_html(html_path.read_text()).tables[1]["rows"][1:]
    for i, (row, (label, source)) in enumerate(zip(rows, sources.items(), strict=True)):
        latency, top1 = row[2], row[1]
        paper = {"RIDE-ResNet (3 experts)": "15.3", "ResNeXt-50-32x4d (GPaCo)": "13.1",
                 "RIDE-ResNeXt (3 experts)": "26", "ResNeXt-101-32x4d (GPaCo)": "25"}[label]
        assert latency[1]["title"] == f"[{i + 1}] paper {paper} [paper-prose]: {source}"
        assert latency[1]["class"] == ("paper" if label in OFFSET else "paper flag")
        assert "title" not in top1[1] and "class" not in top1[1]  # no paper value: plain cell
    text = html_path.read_text()
    first = sources["RIDE-ResNet (3 experts)"]
    assert f"<li>RIDE-ResNet (3 experts) / Latency (ms): paper 15.3 [paper-prose]: {first}</li>" in text
    assert 'title="paper-prose: test source &lt;Fig. 1&gt;"' in text  # the claim's provenance, escaped


def test_page_is_self_contained_with_the_figure_inline(page):
    html_path, _, _ = page
    text = html_path.read_text()
    dom = parse_html(text)
    assert "<script" not in text and "<link" not in text and "http://" not in text and "https://" not in text
    assert len(dom.imgs) == 1
    head, data = dom.imgs[0]["src"].split(",", 1)
    assert head == "data:image/png;base64"
    assert base64.b64decode(data) == (html_path.parent / "figures" / "gpaco_fig1a.paper.png").read_bytes()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND"]  # no network, by construction too
    return subprocess.run([chromium(), *flags, *args], capture_output=True, text=True, timeout=60, check=True)


@pytest.mark.skipif(chromium() is None and not os.environ.get("CI"),
                    reason="chromium is not installed (apt-get install chromium; .ci/run installs it in CI)")
def test_chromium_renders_the_page_with_the_markdown_cells(page, tmp_path):
    assert chromium() is not None, "CI: chromium must be installed (.ci/run installs it)"
    html_path, md_path, _ = page
    url = html_path.resolve().as_uri()
    dom = parse_html(_browser(["--dump-dom", url], tmp_path / "profile").stdout)
    assert [texts(t) for t in dom.tables] == md_tables(md_path.read_text())
    shot = tmp_path / "page.png"
    _browser([f"--screenshot={shot}", "--window-size=1200,1400", url], tmp_path / "profile")
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape == (1400, 1200)
    assert pixels.std() > 10.0  # text, tables and the figure; a blank page is one grey level
    assert (pixels < 128).mean() > 0.005  # some dark ink (text), not only a background colour
