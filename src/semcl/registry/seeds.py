"""`--seeds`: which seeds a table's runs use, from the command line (`--seeds 3`, or a list `--seeds 1,2,3`).

Seeds decide which runs exist, nothing else: a run's id hashes its config and its seed, so a seed the table
already has keeps its run and a new one is a new run. `--seeds N` takes the table's own seeds of the profile
first and, past them, the suite's usual seeds (SEED_POOL, the ones most tables list), then 1, 2, 3 ...: a
one-seed table (HSA's, the video tables) gets three seeds with `--seeds 3`, so its claims can be decided.
"""

from __future__ import annotations

import dataclasses

from semcl.errors import ConfigError

SEED_POOL = (123, 546, 937)  # the seeds most registry tables list
MAX_SEEDS = 100


def parse_seeds(text: str) -> int | list[int]:
    """`N` (a count) or `a,b,c` (distinct seeds); ConfigError naming --seeds otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise ConfigError(f"--seeds {text!r}: a count (e.g. 3) or a list of whole-number seeds (e.g. 123,546,937)")
    values = [int(p) for p in parts]
    if len(values) == 1:
        if not 1 <= values[0] <= MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: a count from 1 to {MAX_SEEDS}")
        return values[0]
    if len(set(values)) != len(values):
        raise ConfigError(f"--seeds {text!r}: a seed given twice")
    return values


def seed_list(own: list[int], wanted: int | list[int]) -> list[int]:
    """The seeds `wanted` names, given the table's own seeds of the profile."""
    if isinstance(wanted, list):
        return wanted
    out = list(dict.fromkeys([*own, *SEED_POOL]))
    n = 1
    while len(out) < wanted:
        if n not in out:
            out.append(n)
        n += 1
    return out[:wanted]


def with_seeds(table, profile: str, wanted: int | list[int]):
    """`table` whose `profile` runs these seeds (the tables its select rows read as well); a table without the
    profile is returned as it is."""
    if profile not in table.profiles:
        return table
    seeds = seed_list(table.seeds_for(profile), wanted)
    profiles = dict(table.profiles)
    if profile in profiles:
        profiles[profile] = dataclasses.replace(profiles[profile], seeds=seeds)
    linked = {tid: with_seeds(t, profile, wanted) for tid, t in (table.linked or {}).items()}
    return dataclasses.replace(table, profiles=profiles, linked=linked)
