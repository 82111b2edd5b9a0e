"""CITATION.cff at the repository root: Citation File Format 1.2.0 for the software, whose references are exactly
the registry's papers (experiments/<paper>/paper.yaml: title, year, authors, arXiv id, as the fact sheets give them)."""

from __future__ import annotations

from pathlib import Path

import yaml

from semcl.registry.papers import load_paper

REPO = Path(__file__).resolve().parents[2]
PAPERS = ("rince", "paco", "gpaco", "hsa", "scns")


def test_citation_file_cites_the_software_and_every_registry_paper():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert (cff["cff-version"], cff["type"]) == ("1.2.0", "software")
    assert cff["title"] and cff["message"] and cff["authors"] and cff["version"]
    assert sorted(p.name for p in (REPO / "experiments").glob("*/paper.yaml")) == ["paper.yaml"] * len(PAPERS)
    refs = cff["references"]
    assert len(refs) == len(PAPERS)
    for ref, key in zip(refs, PAPERS, strict=True):
        paper = load_paper(key, REPO / "experiments")
        assert (ref["title"], ref["year"], ref["url"]) == (paper.title, paper.year, paper.url)
        assert [" ".join(filter(None, (a.get("given-names"), a["family-names"]))) for a in ref["authors"]] == paper.authors
        assert ref["identifiers"][0]["value"] == f"arXiv:{paper.arxiv}"
        assert ref.get("repository-code") == paper.code
