"""Runs and their ids: a table's rows × seeds × profile expanded into runs (the store keeps them: semcl.store).

A Run is (table, row, seed, profile) with its resolved config. The id hashes the config's
result-defining part and the seed, so the same run always lands in the same folder, a rerun
is skipped, and a changed config is a new run. The store never overwrites a finished or
unreadable record.

Training is keyed by what trains it: a run's training key hashes the config without its evaluation settings
(`eval`, `probe`, the test split and its limit), the seed, and the training keys of the runs whose weights it
starts from. Runs that differ only in how they evaluate share one training: the first to start it claims the
key (results/trained/<key>.json names its run), the others evaluate that run's final checkpoint. Run ids keep
hashing the whole config, so a store written before training keys reads back unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from semcl.config import RunConfig, hashable_config
from semcl.registry.tables import Table


@dataclass(frozen=True)
class ReleasedFile:
    """The authors' checkpoint an evaluation-only run reads (a released row: semcl.engine.released)."""

    path: str
    sha256: str
    layout: str


@dataclass(frozen=True)
class Run:
    table_id: str
    row_label: str
    seed: int
    profile: str
    config: RunConfig
    run_id: str
    # runs this one reads (a base run's weights, an ensemble's members), in the row's order
    depends_on: tuple[str, ...] = ()
    # what trains it (module docstring): runs with one training key share one training
    train_key: str = ""
    # runs that must finish first without being read (the run that trains this one's shared key); not in the id
    waits_for: tuple[str, ...] = ()
    # a released row's run: no training, the file's weights are evaluated (its sha256 is in the run id)
    released: ReleasedFile | None = None

    @property
    def after(self) -> tuple[str, ...]:
        """Every run this one is scheduled after."""
        return self.depends_on + tuple(w for w in self.waits_for if w not in self.depends_on)


# what only evaluates: settings that never change the trained weights (no method reads them while training)
EVALUATION_SECTIONS = ("eval", "probe")
EVALUATION_KEYS = {"data": ("test_split", "test_limit")}


def training_config(hashed: dict) -> dict:
    """`hashable_config(cfg)` without its evaluation settings: what the training key hashes."""
    out = {k: v for k, v in hashed.items() if k not in EVALUATION_SECTIONS}
    for section, keys in EVALUATION_KEYS.items():
        if section in out:
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    return out


def make_train_key(hashed: dict, seed: int, starts_from: tuple[str, ...] = (), ranks: int = 1) -> str:
    """12 hex digits of sha256(training config, seed[, the training keys of the runs it builds on][, the ranks it
    trains on]): the same config on another number of ranks is another training (per-rank BatchNorm statistics,
    per-rank draws), though its run id, which predates training keys, does not say so."""
    key: dict = {"train": training_config(hashed), "seed": seed}
    if starts_from:
        key["after"] = list(starts_from)
    if ranks > 1:
        key["ranks"] = ranks
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def make_run_id(cfg: RunConfig, seed: int, depends_on: tuple[str, ...] = (), *, hashed: dict | None = None) -> str:
    """12 hex digits of sha256(config, seed[, the runs it builds on]); a run without dependencies
    keeps the id it had before dependencies existed. `hashed`: `hashable_config(cfg)` if already at hand."""
    key: dict = {"config": hashable_config(cfg) if hashed is None else hashed, "seed": seed}
    if depends_on:
        key["after"] = list(depends_on)
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def released_run_id(hashed: dict, seed: int, sha256: str) -> str:
    """12 hex digits of sha256(the network row's config, seed, the released file's sha256): the evaluation-only run
    of the authors' checkpoint (semcl.engine.released); another file is another run."""
    key = {"config": hashed, "seed": seed, "released": sha256}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def member_seeds(row_deps: tuple[str, ...], seeds: list[int], seed: int) -> list[tuple[str, int]]:
    """(row, seed) of each dependency of a row's run with `seed`: the same seed, except that the
    k-th repeat of a label takes the seed k places further along the seed list (cyclic)."""
    out, seen = [], {}
    for label in row_deps:
        k = seen.get(label, 0)
        seen[label] = k + 1
        if k >= len(seeds):
            raise ValueError(f"the ensemble uses row {label!r} {k + 1} times but the profile has only {len(seeds)} "
                             f"seed(s) {seeds}: each repeat needs its own seed")
        out.append((label, seeds[(seeds.index(seed) + k) % len(seeds)]))
    return out


def plan_runs(table: Table, profile: str, rows: list[str] | None = None, precision: str | None = None,
              released: dict[str, ReleasedFile] | None = None) -> list[Run]:
    """Every implemented row x seed of a table under one profile, in table order. Selecting rows
    also brings in the runs they build on (bases first). `precision` (default: $SEMCL_PRECISION, which
    `semcl --precision` sets; unset = official) is part of every run's config and id. `released`: the authors'
    files at hand (released row label -> file); a row that learns from a released row (a KD student of the
    authors' teacher) is planned only when that file is given, its run id and training key then hold the file's
    sha256 (through the released row's evaluation run, semcl.engine.released)."""
    from semcl.runtime.precision import planned, stored

    precision = stored(precision) if precision is not None else planned()
    seeds = table.seeds_for(profile)
    made: dict[tuple[str, int], Run] = {}
    by_row: dict[str, tuple[RunConfig, dict]] = {}  # a row's config (and its hashed part) is the same for every seed
    ranks = {r.label: max(res.gpus, res.tasks) for r in table.rows
             for res in [table.resources_for(r.label, profile)]} if profile in table.profiles else {}

    released = released or {}

    def make(label: str, seed: int) -> Run:
        row = table.row(label)
        if row.released is not None:  # the authors' file: one evaluation-only run, whatever the seed asking
            seed = seeds[0]
        if (label, seed) not in made:
            if label not in by_row:
                resolved = table.resolve(row, profile)
                if precision is not None:
                    resolved.optim.precision = precision
                by_row[label] = (resolved, hashable_config(resolved))
            cfg, hashed = by_row[label]
            if row.released is not None:
                file = released[label]
                made[(label, seed)] = Run(table.id, label, seed, profile, cfg,
                                          released_run_id(hashed, seed, file.sha256), released=file)
                return made[(label, seed)]
            bases = [make(d, s) for d, s in member_seeds(row.depends_on, seeds, seed)]
            deps = tuple(b.run_id for b in bases)
            # a released base has no training of its own: its file's sha256 stands for one in the training key
            starts = tuple(b.train_key or f"released:{b.released.sha256}" for b in bases)
            # the seeds of a row share one config object: run configs are read-only
            made[(label, seed)] = Run(table.id, label, seed, profile, cfg, make_run_id(cfg, seed, deps, hashed=hashed),
                                      deps, make_train_key(hashed, seed, starts, ranks.get(label, 1)))
        return made[(label, seed)]

    def at_hand(row) -> bool:  # every released row it learns from (through its bases too) has its file given
        return all((d in released) if table.row(d).released else at_hand(table.row(d)) for d in row.depends_on)

    # a `select` row has no runs: it shows a row of another table; a derived row computes from others; a
    # reference row shows another source's number
    wanted = [r for r in table.rows
              if r.implemented and not r.select and not r.derived and not r.reference and not r.released
              and at_hand(r) and (not rows or r.label in rows)]
    for row in wanted:
        for seed in seeds:
            make(row.label, seed)
    order = {r.label: i for i, r in enumerate(table.rows)}
    return sorted(made.values(), key=lambda r: (order[r.row_label], seeds.index(r.seed)))


def waves(runs: list[Run]) -> list[list[Run]]:
    """Runs in dependency order: wave 0 needs nothing from `runs`, wave k only earlier waves."""
    ids = {r.run_id for r in runs}
    depth: dict[str, int] = {}
    by_id = {r.run_id: r for r in runs}

    def level(rid: str) -> int:
        if rid not in depth:
            depth[rid] = 1 + max((level(d) for d in by_id[rid].after if d in ids), default=-1)
        return depth[rid]

    out: list[list[Run]] = []
    for run in runs:
        k = level(run.run_id)
        out.extend([] for _ in range(k + 1 - len(out)))
        out[k].append(run)
    return out
