"""The seeds a claim needs to be decided: Welch's t needs two per side, so a claim reads its table's own seeds of
the profile when it lists two or more, else the three `--seeds 3` gives (semcl.registry.seeds). One-seed tables
(HSA's) stay one seed by default, their paper-scale cost being what it is; the claims page says so per table."""

from __future__ import annotations

from semcl.registry.seeds import seed_list
from semcl.registry.tables import Table
from semcl.report.claims import ClaimsFile

TEST_SEEDS = 3  # seeds a one-seed table gets for a test (--seeds 3)


def seeds_needed(table: Table, profile: str, wanted: int | list[int] | None = None) -> tuple[list[int], bool]:
    """(the seeds a claim on `table` needs, whether they go beyond the registered ones): `wanted` (--seeds) when
    given, the registered seeds when two or more, else `--seeds 3`'s."""
    own = table.seeds_for(profile)
    if wanted is not None:
        seeds = seed_list(own, wanted)
    else:
        seeds = own if len(own) >= 2 else seed_list(own, TEST_SEEDS)
    return seeds, not set(seeds) <= set(own)


def seeds_text(seeds: tuple[int, ...] | list[int]) -> str:
    return ", ".join(map(str, seeds))


def seeds_lines(cf: ClaimsFile, profile: str, registry: dict[str, Table]) -> list[str]:
    """For the claims page: per table the claims read, the seeds a claim on it needs; a one-seed table says it stays
    one seed, decidable with --seeds 3 (its cost: `semcl claims <paper> --plan --seeds 3`)."""
    by_table: dict[str, list[str]] = {}
    for c in cf.claims:
        by_table.setdefault(c.table, []).append(c.id)
    out = []
    for tid, ids in by_table.items():
        table = registry.get(tid)
        if table is None or profile not in table.profiles:
            continue
        own = table.seeds_for(profile)
        seeds, beyond = seeds_needed(table, profile)
        names = ", ".join(f"`{i}`" for i in ids)
        if beyond:
            out.append(f"{tid}: seeds {seeds_text(seeds)}; the table registers {seeds_text(own)} only, so these "
                       f"claims are decidable with `--seeds {TEST_SEEDS}` (runs and cost: `semcl claims {cf.paper} "
                       f"--plan --profile {profile} --seeds {TEST_SEEDS}`) → {names}")
        else:
            out.append(f"{tid}: seeds {seeds_text(seeds)} (as registered) → {names}")
    return out
