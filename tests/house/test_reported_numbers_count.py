"""docs/papers/README.md states the row count of reported_numbers.csv twice (the index and the per-paper counts):
the two agree. The file itself is project reference data outside the repository (314 data rows when counted
with Python's csv at the time of writing), so the test ties the index to the per-paper counts it sums."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "docs" / "papers" / "README.md"


def test_index_count_is_the_sum_of_the_per_paper_counts():
    text = README.read_text(encoding="utf-8")
    total = int(re.search(r"every known reported number \((\d+) rows", text).group(1))
    line = next(ln for ln in text.splitlines() if ln.startswith("Row counts:"))
    per_paper = {m.group(1): int(m.group(2)) for m in re.finditer(r"(gpaco|paco|hsa|scns) (\d+) \(", line)}
    assert per_paper == {"gpaco": 79, "paco": 25, "hsa": 17, "scns": 193}
    assert total == sum(per_paper.values()) == 314
    # each paper's count is the sum of its provenance counts
    for paper, inner in re.findall(r"(gpaco|paco|hsa|scns) \d+ \(([^)]*)\)", line):
        assert sum(int(n) for n in re.findall(r" (\d+)", " " + inner)) == per_paper[paper], paper
