"""Fact-sheet citations in src/ and experiments/ resolve inside the repository.

A citation is `docs/papers/<paper>.md §<id>[, §<id> ...]` (ids joined by ", ", " / " or "-"). An id is a
section letter (`§g`, from a heading "## (g) ..."), a subsection (`§c.8`, from a heading "### c.8 ..."), or
`§<letter>.<N>`: row N of the numbered table in that section (the rows of each sheet's (g) table). The test
reads every text file under src/ and experiments/, finds each mention of a fact sheet, and checks that it is
written in that form, that the sheet is a tracked file and that every id names a heading or row of it.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHEETS = ("rince", "paco", "hsa", "scns")
SCANNED = ("src", "experiments")
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".txt", ".cfg", ".toml", ".json", ".sh", ".csv"}

_SEC = r"[a-h](?:\.\d+)?"
# a mention of a sheet, with whatever path precedes it (so `../shared/papers/` is caught too)
MENTION = re.compile(r"(?P<path>(?:[\w.~-]*/)*)(?P<paper>" + "|".join(SHEETS) + r")\.md\b")
# the ids that follow `.md`: `§c.7, §c.8`, `§c.2-§c.5`, `§e.5 / §f`; a YAML/Python line break may sit inside
_SEP = r"(?:\s*(?:#\s*)?(?:,|/|-|–|and)\s*(?:#\s*)?)"
IDS = re.compile(r"\s*(?:#\s*)?§(?P<first>" + _SEC + r")(?P<rest>(?:" + _SEP + r"§" + _SEC + r")*)")
BARE = re.compile(r"\s*(?:section\s*)?\(?" + _SEC + r"\b(?![\w'’-])")
OUTSIDE = re.compile(r"\.\./shared|/work/")
# the project's reference folders outside the repository: no prose and no `source:` field names them (a paper is
# cited by its arXiv id with table or section, or by docs/papers/)
PROJECT_FOLDERS = re.compile(r"(?<![\w./-])shared/(?:papers|rince|seeds)\b")


def _text_files():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                yield path


def citations():
    """(file, line, paper, path prefix, [ids]) for every mention of a fact sheet under src/ and experiments/."""
    found = []
    for path in _text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in MENTION.finditer(text):
            tail = text[m.end():m.end() + 200]
            ids = []
            run = IDS.match(tail)
            if run:
                ids = [run["first"]] + re.findall(r"§(" + _SEC + r")", run["rest"])
            elif BARE.match(tail):
                ids = None  # a section written without its §: malformed
            line = text.count("\n", 0, m.start()) + 1
            found.append((path.relative_to(ROOT).as_posix(), line, m["paper"], m["path"], ids))
    return found


@cache
def anchors(paper: str) -> frozenset:
    """The ids a sheet defines: its section letters, its numbered subsections and its tables' numbered rows."""
    ids, section = set(), None
    for line in (ROOT / "docs" / "papers" / f"{paper}.md").read_text(encoding="utf-8").splitlines():
        top = re.match(r"#{2,4}\s+\(([a-h])\)", line)
        sub = re.match(r"#{2,4}\s+(" + _SEC + r")\s", line)
        row = re.match(r"\|\s*(\d+)\s*\|", line)
        if top:
            section = top[1]
            ids.add(section)
        elif sub:
            ids.add(sub[1])
        elif row and section:
            ids.add(f"{section}.{row[1]}")
    return frozenset(ids)


@cache
def tracked() -> frozenset | None:
    try:
        out = subprocess.run(["git", "ls-files", "docs/papers"], cwd=ROOT, capture_output=True, text=True,
                             check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout (e.g. an unpacked sdist): the file-exists check still holds
    return frozenset(out.split())


def unresolved():
    """One line per citation that does not resolve, naming the file, line and why."""
    bad = []
    files = tracked()
    for where, line, paper, prefix, ids in citations():
        at = f"{where}:{line}: {prefix}{paper}.md"
        sheet = f"docs/papers/{paper}.md"
        if prefix != "docs/papers/":
            bad.append(f"{at}: write the path as {sheet}")
        if not (ROOT / sheet).is_file() or (files is not None and sheet not in files):
            bad.append(f"{at}: {sheet} is not a tracked file")
            continue
        if ids is None:
            bad.append(f"{at}: write the section as §<id>")
        elif not ids:
            bad.append(f"{at}: no §section")
        for i in ids or ():
            if i not in anchors(paper):
                bad.append(f"{at}: §{i} is not a section of {sheet}")
    return bad


def test_scanner_reads_each_citation_form(tmp_path):
    # the parser on hand-written lines: ids after `.md` only, with their separators; bare ids flagged
    text = ("(docs/papers/rince.md §c.7, §c.8) x §9\n"
            "# docs/papers/hsa.md §c.2-§c.5 / §f\n"
            "../shared/papers/paco.md d.2;\n"
            "docs/papers/scns.md\n  # §g.1 and §d.3\n")
    got = []
    for m in MENTION.finditer(text):
        run = IDS.match(text[m.end():])
        ids = ([run["first"]] + re.findall(r"§(" + _SEC + r")", run["rest"])) if run else None
        bare = bool(BARE.match(text[m.end():])) if run is None else False
        got.append((m["path"], m["paper"], ids, bare))
    assert got == [("docs/papers/", "rince", ["c.7", "c.8"], False),
                   ("docs/papers/", "hsa", ["c.2", "c.5", "f"], False),
                   ("../shared/papers/", "paco", None, True),
                   ("docs/papers/", "scns", ["g.1", "d.3"], False)]


def test_sheets_define_the_anchor_forms():
    rince = anchors("rince")
    assert {"a", "b", "c", "g", "b.1", "c.8", "c.10", "g.1", "g.7"} <= rince
    assert "c.99" not in rince and "g.99" not in rince


@pytest.mark.parametrize("paper", SHEETS)
def test_every_sheet_is_tracked(paper):
    files = tracked()
    assert (ROOT / "docs" / "papers" / f"{paper}.md").is_file()
    if files is not None:
        assert f"docs/papers/{paper}.md" in files


def test_every_citation_resolves():
    found = citations()
    assert len(found) > 100  # the scan saw the suite's citations (about 270 when this test was written)
    bad = unresolved()
    assert not bad, f"{len(bad)} unresolved citations:\n" + "\n".join(bad)


def test_no_citation_points_outside_the_repository():
    # no ../shared or /work path anywhere (docs/papers included); in src/ and experiments/ no prose names the
    # project's shared/ folders either (cite the paper, docs/papers/ or src/semcl/data/files/ instead)
    assert PROJECT_FOLDERS.search("(shared/seeds/000_x.txt, Fig. 6)") and not PROJECT_FOLDERS.search("../unshared/x")
    bad = []
    for path in [*_text_files(), *sorted((ROOT / "docs" / "papers").glob("*.md"))]:
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            prose = path.suffix != ".md" or "docs" not in path.parts
            if OUTSIDE.search(line) or (prose and PROJECT_FOLDERS.search(line)):
                bad.append(f"{path.relative_to(ROOT).as_posix()}:{n}: {line.strip()[:120]}")
    assert not bad, "paths outside the repository:\n" + "\n".join(bad)
