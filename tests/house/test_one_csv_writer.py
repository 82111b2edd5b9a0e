"""Every CSV semcl writes goes through semcl.csv_files (which keeps a text cell from reading as a spreadsheet
formula): no other module of src/semcl calls pandas' `to_csv` or the csv module's writers."""

from __future__ import annotations

import re
from pathlib import Path

import semcl

SRC = Path(semcl.__file__).parent
WRITER = SRC / "csv_files.py"
DIRECT = re.compile(r"\.to_csv\(|csv\.writer\(|DictWriter\(")


def direct_csv_writes(root: Path, writer: Path) -> list[str]:
    """`path:line` of every direct CSV write under `root` outside `writer`."""
    return [f"{f.relative_to(root)}:{n}" for f in sorted(root.rglob("*.py")) if f != writer
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if DIRECT.search(line)]


def test_no_module_writes_csv_except_through_the_one_writer():
    assert DIRECT.search(WRITER.read_text())  # the pattern sees the writer's own calls
    bad = direct_csv_writes(SRC, WRITER)
    assert not bad, "write CSV with semcl.csv_files (csv_text / write_csv / frame_csv_text):\n" + "\n".join(bad)


def test_the_check_sees_each_kind_of_direct_write(tmp_path):
    (tmp_path / "a.py").write_text("frame.to_csv(index=False)\n")
    (tmp_path / "b.py").write_text("import csv\nw = csv.writer(buf)\n")
    (tmp_path / "c.py").write_text("w = csv.DictWriter(buf, fieldnames=[])\n")
    (tmp_path / "d.py").write_text("rows = list(csv.reader(f))\n")  # reading is fine
    assert direct_csv_writes(tmp_path, tmp_path / "none.py") == ["a.py:1", "b.py:2", "c.py:1"]
