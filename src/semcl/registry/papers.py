"""The papers of the registry: experiments/<paper>/paper.yaml, one per paper folder, validated strictly.

Each holds what a citation needs (title, authors, venue, year, arXiv id, official code) as the paper's fact sheet
gives it (`source`, a docs/papers/ citation). `semcl publish` writes it as the model-index Collection of the
paper (semcl.publish.model_index); CITATION.cff cites the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from semcl.errors import ConfigError
from semcl.locations import registry_root
from semcl.registry.tables import PAPER_FILE
from semcl.schema import build
from semcl.yaml_strict import load_file

ARXIV_ABS = "https://arxiv.org/abs/{}"


@dataclass(frozen=True)
class Paper:
    paper: str
    title: str
    authors: list[str]
    venue: str
    year: int
    arxiv: str
    code: str | None
    source: str

    @property
    def url(self) -> str:
        return ARXIV_ABS.format(self.arxiv)


def load_paper(paper: str, root: Path | None = None) -> Paper:
    """The paper of registry folder `paper`; ConfigError naming the file and key when absent or malformed."""
    path = (root or registry_root()) / paper / PAPER_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: missing (the paper's title, authors and arXiv id for `semcl publish`)")
    values = load_file(path)
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: not a mapping of paper fields")
    found = build(Paper, values, "", str(path))
    if found.paper != paper:
        raise ConfigError(f"{path}: key 'paper' is {found.paper!r}, expected {paper!r} (its folder)")
    return found
