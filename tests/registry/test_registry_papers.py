"""experiments/<paper>/paper.yaml: every registry paper has one, read strictly; a missing or malformed one is one
line naming the file and key; the registry's table loader does not take it for a table."""

from __future__ import annotations

import pytest

from semcl.errors import ConfigError
from semcl.registry.papers import load_paper
from semcl.registry.tables import load_registry


def test_every_registry_paper_has_its_paper_file():
    papers = {t.paper for t in load_registry().values()}
    assert papers == {"rince", "paco", "gpaco", "hsa", "scns"}
    rince = load_paper("rince")
    assert (rince.arxiv, rince.url, rince.year) == ("2201.11736", "https://arxiv.org/abs/2201.11736", 2022)
    assert rince.source == "docs/papers/rince.md §a"


def test_a_bad_paper_file_is_one_line_naming_file_and_key(registry_copy):
    path = registry_copy / "rince" / "paper.yaml"
    text = path.read_text()
    path.write_text(text.replace("year: 2022", "year: twenty"))
    with pytest.raises(ConfigError, match=rf"^{path}: .*'year'"):
        load_paper("rince", registry_copy)
    path.write_text(text + "doi: x\n")
    with pytest.raises(ConfigError, match=rf"^{path}: unknown key 'doi'"):
        load_paper("rince", registry_copy)
    path.write_text(text.replace("paper: rince", "paper: hsa"))
    with pytest.raises(ConfigError, match=rf"^{path}: key 'paper' is 'hsa', expected 'rince'"):
        load_paper("rince", registry_copy)
    path.unlink()
    with pytest.raises(ConfigError, match=rf"^{path}: missing"):
        load_paper("rince", registry_copy)
    assert "rince/tab2" in load_registry(registry_copy)  # the loader never read it as a table
