"""What one run of a table asks of a cluster: the registry entry's `resources:` (gpus, cpus, mem_gb,
time_min, tasks, nodes per profile, with per-row exceptions), checked strictly when the table loads.
How a cluster hands that out is its profile's business (semcl.launch.slurm.profile)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from semcl.errors import ConfigError
from semcl.schema import NON_NEGATIVE, POSITIVE, at_most, build


@dataclass(frozen=True)
class Resources:
    """What one run of a table needs (registry `resources.<profile>`)."""

    # bounds: far above any job here, so a typo of a few zeros is one line at load, not a job no cluster can hold
    gpus: int = field(default=0, metadata={**NON_NEGATIVE, **at_most(4_096)})  # 0: a CPU-only run
    # for CPU-only runs; GPU runs get cpus_per_gpu from the cluster profile
    cpus: int = field(default=1, metadata={**POSITIVE, **at_most(1_024)})
    mem_gb: float = field(default=4.0, metadata={**POSITIVE, **at_most(65_536)})  # for CPU-only runs; GPU runs get mem_per_gpu_gb
    # the job's time limit; None: the run's estimate x the cluster profile's time_margin
    time_min: int | None = field(default=None, metadata={**POSITIVE, **at_most(525_600, "a year")})
    # processes of a CPU-only run (data-parallel over gloo, `cpus` each): the multi-GPU path on CPUs,
    # e.g. on the local test cluster; GPU runs get one process per GPU
    tasks: int = field(default=1, metadata={**POSITIVE, **at_most(4_096)})
    # nodes a CPU-only run's tasks spread over (tasks / nodes per node); GPU runs: gpus / gpus_per_node
    nodes: int = field(default=1, metadata={**POSITIVE, **at_most(1_024)})


DEFAULT_RESOURCES = {
    "paper": Resources(gpus=1),
    "mini": Resources(cpus=2, mem_gb=4),
    "smoke": Resources(cpus=1, mem_gb=2),
}
# a row whose method computes on the CPU alone (MethodSpec.on_gpu False: a logit ensemble) in a profile that holds GPUs:
# the members' saved logits of the largest test set here (iNaturalist 2018 val, 24,426 x 8,142 classes) are 0.8 GB
# each in float32, summed in minutes
CPU_ONLY = Resources(gpus=0, cpus=2, mem_gb=16.0, time_min=60)

def parse_resources(value: Any, where: str) -> dict[str, Resources]:
    """A registry entry's `resources:` (profile -> {gpus, cpus, mem_gb, time_min, tasks}), checked strictly
    (semcl.schema: integers, positive counts); a profile's missing keys keep its defaults."""
    if value is None:
        return dict(DEFAULT_RESOURCES)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'resources' must map profile names to {{gpus, cpus, mem_gb, time_min, tasks}}")
    out = dict(DEFAULT_RESOURCES)
    for profile, spec in value.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: 'resources.{profile}' must be a mapping {{gpus, cpus, mem_gb, time_min, tasks}}")
        spec = {k: v for k, v in spec.items() if k != "rows"}  # per-row exceptions: parse_row_resources
        out[profile] = _layer(DEFAULT_RESOURCES.get(profile, Resources()), spec, f"resources.{profile}", where)
    return out


def parse_row_resources(value: Any, base: dict[str, Resources], labels: set[str],
                        where: str) -> dict[str, dict[str, Resources]]:
    """`resources.<profile>.rows: {row label: {gpus, ...}}`: a row whose jobs differ from the table's (e.g. an
    8-GPU ResNet row in a table of one-process ViT rows), its missing keys taken from the profile's."""
    out: dict[str, dict[str, Resources]] = {}
    for profile, spec in (value or {}).items():
        rows = spec.get("rows") if isinstance(spec, dict) else None
        if rows is None:
            continue
        if not isinstance(rows, dict):
            raise ConfigError(f"{where}: 'resources.{profile}.rows' must map row labels to {{gpus, cpus, ...}}")
        for label, row_spec in rows.items():
            key = f"resources.{profile}.rows[{label!r}]"
            if label not in labels:
                raise ConfigError(f"{where}: '{key}': no row {label!r} in this table")
            if not isinstance(row_spec, dict):
                raise ConfigError(f"{where}: '{key}' must be a mapping {{gpus, cpus, mem_gb, time_min, tasks}}")
            out.setdefault(profile, {})[label] = _layer(base[profile], row_spec, key, where)
    return out


def _layer(under: Resources, spec: dict, key: str, where: str) -> Resources:
    checked = build(Resources, spec, key, where)
    return dataclasses.replace(under, **{k: getattr(checked, k) for k in spec})
