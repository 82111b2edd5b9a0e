"""The results root's layout: every folder the tool writes under `--results` (default results/), named once.

    runs/<run_id>/          one folder per run (semcl.store.run_folder names its files)
    trained/<key>.json      which run holds the training of a training key (shared trainings)
    tables/ figures/ claims/ curves/ reports/ preflight/   what the reader commands write; a `--set` variant's
                            own outputs go to <folder>/variants/<slug>/ so they never replace the registry rows'
    exports/<run_id>/       `semcl export` weights
    manifests/ submitit/ snapshots/ doctor/   the SLURM backend's submissions, job folders, code snapshots, doctor jobs
    synthetic/              the smoke profile's synthetic data sets, written once per store
    memory/                 the preflight's private memory checks
    imports/                results of runs made by other tools (`semcl results import`), apart from runs/
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

VARIANTS = "variants"


@dataclass(frozen=True)
class ResultsRoot:
    """The folders under one results root; `variant` (a `--set` slug) selects that variant's own subfolder."""

    path: Path

    def _out(self, name: str, variant: str = "") -> Path:
        return self.path / name / VARIANTS / variant if variant else self.path / name

    @property
    def runs(self) -> Path:
        return self.path / "runs"

    @property
    def trainings(self) -> Path:
        return self.path / "trained"

    def tables(self, variant: str = "") -> Path:
        return self._out("tables", variant)

    def figures(self, variant: str = "") -> Path:
        return self._out("figures", variant)

    def claims(self, variant: str = "") -> Path:
        return self._out("claims", variant)

    def curves(self, variant: str = "") -> Path:
        return self._out("curves", variant)

    def reports(self, variant: str = "") -> Path:
        return self._out("reports", variant)

    def preflight(self, variant: str = "") -> Path:
        return self._out("preflight", variant)

    @property
    def preflight_cache(self) -> Path:
        return self.path / "preflight" / "cache"

    @property
    def exports(self) -> Path:
        return self.path / "exports"

    @property
    def manifests(self) -> Path:
        return self.path / "manifests"

    @property
    def submitit(self) -> Path:
        return self.path / "submitit"

    @property
    def snapshots(self) -> Path:
        return self.path / "snapshots"

    @property
    def doctor(self) -> Path:
        return self.path / "doctor"

    @property
    def synthetic(self) -> Path:
        return self.path / "synthetic"

    @property
    def memory(self) -> Path:
        return self.path / "memory"

    @property
    def imports(self) -> Path:
        return self.path / "imports"
