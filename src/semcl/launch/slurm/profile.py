"""Cluster profiles (slurm/profiles/*.yaml) and the SLURM request each run's resources become.

A table says what one run needs per profile (`resources:` in its registry entry: gpus, cpus,
mem_gb, time_min, tasks, nodes); the cluster profile says how this cluster hands that out (partition,
account, qos, constraint, GPUs, cpus and memory per GPU, time limits, extra sbatch options). A run
wider than one node becomes `gpus / gpus_per_node` nodes of one task per GPU. Its time limit is its
estimate times the profile's margin, on a coarse ladder, capped at the partition's limit. Runs with
the same resulting request travel together as one job array.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Any

from semcl.errors import ConfigError
from semcl.locations import profiles_root
from semcl.registry.resources import Resources
from semcl.schema import NON_NEGATIVE, POSITIVE, at_most, build
from semcl.yaml_strict import load_file as load_yaml_file

# time limits are rounded up to one of these (minutes): few distinct requests keep arrays together
# and give the backfill scheduler the usual shapes
TIME_LADDER_MIN = (15, 30, 60, 120, 240, 480, 720, 1440, 2160, 2880, 4320, 5760, 7200, 10080)
# slurm.conf's MaxArraySize may not exceed 4000001 (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxArraySize)
MAX_ARRAY_PARALLELISM = 4_000_001

# sbatch options `extra_sbatch` may not set, by who sets them: submitit's script (submitit/slurm/slurm.py,
# _make_sbatch_string, 1.5), semcl's request (slurm_parameters, submit.py), or what would break both
_SUBMITIT = "submitit sets it (its logs, signals and arrays depend on it)"
_SEMCL = "semcl sets it from the table's resources and this profile's keys"
RESERVED_SBATCH = {
    **dict.fromkeys(("job-name", "output", "error", "open-mode", "signal", "wckey", "array"), _SUBMITIT),
    **dict.fromkeys(("time", "nodes", "ntasks-per-node", "cpus-per-task", "gpus-per-node", "mem", "partition",
                     "account", "qos", "constraint", "dependency", "kill-on-invalid-dep",
                     # other spellings of the same request, which sbatch refuses beside them or lets win
                     "ntasks", "gpus", "gpus-per-task", "cpus-per-gpu", "mem-per-cpu", "mem-per-gpu"), _SEMCL),
    **dict.fromkeys(("wrap", "parsable", "wait", "test-only"),
                    "it replaces the job script or what sbatch prints (submitit reads the job id from it)"),
    **dict.fromkeys(("requeue", "no-requeue"), "submitit requeues the job itself (time-outs, preemption)"),
    **dict.fromkeys(("export", "export-file"),
                    "the job must see the submitting environment; put variables in 'setup' lines (export X=...)"),
}


def reserved_sbatch(option: str) -> str | None:
    """Why `option` may not be set by extra_sbatch, None when it may. Written as --option; sbatch also takes an
    unambiguous prefix of a long option (--outp is --output), and _ for - (submitit's spelling)."""
    name = option.replace("_", "-")
    hit = name if name in RESERVED_SBATCH else next((r for r in RESERVED_SBATCH if r.startswith(name)), None)
    if hit is None:
        return None
    return f"--{hit}: {RESERVED_SBATCH[hit]}" if hit == name else f"sbatch reads --{name} as --{hit}: {RESERVED_SBATCH[hit]}"


@dataclass(frozen=True)
class ClusterProfile:
    """One cluster's profile (slurm/profiles/<name>.yaml), checked strictly by `load_cluster_profile`:
    known keys, types, positive counts and durations, and sbatch values that stay on their #SBATCH line."""

    name: str
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_node: int = field(default=8, metadata=NON_NEGATIVE)  # 0: a CPU-only cluster
    cpus_per_gpu: int = field(default=8, metadata=POSITIVE)
    mem_per_gpu_gb: float = field(default=32.0, metadata=POSITIVE)
    # memory of one GPU (semcl check holds its estimate against it)
    gpu_mem_gb: float | None = field(default=None, metadata=POSITIVE)
    # the partition's limit; longer runs requeue from their checkpoints
    max_time_min: int = field(default=72 * 60, metadata=POSITIVE)
    min_time_min: int = field(default=60, metadata=POSITIVE)  # the shortest limit asked for (evaluation and start-up fit in it)
    time_margin: float = field(default=2.0, metadata=POSITIVE)  # time limit = estimated wall time x this margin
    # step-boundary checkpoints inside an epoch, this often
    checkpoint_every_min: float = field(default=30.0, metadata=POSITIVE)
    # a collective waits this long for a dead or stuck peer, then the job requeues
    collective_timeout_s: int = field(default=1800, metadata=POSITIVE)
    # requeues after a rank died (time-outs and preemptions: max_requeues)
    max_fault_requeues: int = field(default=2, metadata=NON_NEGATIVE)
    # a multi-GPU run's evaluations go out as their own job (after training) on this many GPUs, this long
    # rank 0 evaluates alone (semcl.engine.job), so a second GPU would only be held idle
    eval_gpus: int = field(default=1, metadata={**POSITIVE, **at_most(1, "the evaluation runs in one process")})
    eval_time_min: int = field(default=720, metadata=POSITIVE)
    precision: str | None = None  # `fast` plans this cluster's runs with bf16 + channels_last (semcl.runtime.precision)
    array_parallelism: int = field(default=64, metadata={**POSITIVE, **at_most(
        MAX_ARRAY_PARALLELISM, "SLURM's largest MaxArraySize, the most tasks an array can have")})
    signal_delay_s: int = field(default=120, metadata=NON_NEGATIVE)  # the requeue signal comes this long before the time limit
    max_requeues: int = field(default=3, metadata=NON_NEGATIVE)  # time-outs that are requeued (preemptions are always requeued)
    # e.g. {mail-type: FAIL}; a value `true` is a bare flag (--exclusive)
    extra_sbatch: dict[str, str | int | float | bool] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)  # shell lines before the job (module load ...), one per entry
    # the command that starts every job's Python (training, evaluation, requeues; submitit's `python=`), e.g.
    # `apptainer exec --nv semcl.sif python`; None: this host's sys.executable (semcl.launch.slurm.job_python)
    python: str | None = None

    def __post_init__(self):
        if self.min_time_min > self.max_time_min:
            raise ValueError(f"'min_time_min' ({self.min_time_min}) is above 'max_time_min' ({self.max_time_min})")


# what may stand in an #SBATCH line: SLURM names (partition, account, qos: comma-separated lists), constraint
# expressions (a100&ib, [rack1|rack2]*2), option names; nothing that ends the line or the shell word
SLURM_NAMES = re.compile(r"[A-Za-z0-9_.@+-]+(,[A-Za-z0-9_.@+-]+)*")
SLURM_CONSTRAINT = re.compile(r"[A-Za-z0-9_.,:@+&|*!()\[\]-]+")
SBATCH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
PROFILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # newline, carriage return, tab, NUL ...
PRECISIONS = {"official", "fast"}


def load_cluster_profile(name: str) -> ClusterProfile:
    if not PROFILE_NAME.fullmatch(name):
        raise ConfigError(f"--cluster {name!r}: not a profile name (letters, digits, _ . -; a file "
                          f"{profiles_root()}/<name>.yaml)")
    path = profiles_root() / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in profiles_root().glob("*.yaml"))
        raise ConfigError(f"{path}: no cluster profile {name!r} (known: {', '.join(known)}; copy "
                          f"{profiles_root() / 'example-a100.yaml'} to {path.name} there and edit it, or point "
                          "$SEMCL_CLUSTER_PROFILES at a folder of your own)")
    return parse_cluster_profile(load_yaml_file(path), name, str(path))


def parse_cluster_profile(doc: Any, name: str, where: str) -> ClusterProfile:
    """A profile's parsed YAML, checked (ClusterProfile's docstring); one ConfigError naming `where` and the key."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: a cluster profile must be a mapping of keys (partition: gpu, ...), "
                          f"got {type(doc).__name__}")
    if "name" in doc:  # the file's name is the profile's
        raise ConfigError(f"{where}: unknown key 'name' (a profile is named by its file)")
    profile = build(ClusterProfile, {**doc, "name": name}, "", where,
                    {"precision": PRECISIONS})
    for key, pattern, what in (("partition", SLURM_NAMES, "a SLURM name (or comma-separated names)"),
                               ("account", SLURM_NAMES, "a SLURM name"), ("qos", SLURM_NAMES, "a SLURM name"),
                               ("constraint", SLURM_CONSTRAINT, "a SLURM constraint expression")):
        value = getattr(profile, key)
        if value is not None and not pattern.fullmatch(value):
            raise ConfigError(f"{where}: '{key}' = {value!r} is not {what} (letters, digits, _ . @ + - ,"
                              f"{' & | * ! ( ) [ ] :' if key == 'constraint' else ''}; no spaces, quotes or newlines)")
    for option, value in profile.extra_sbatch.items():
        if not SBATCH_OPTION.fullmatch(option):
            raise ConfigError(f"{where}: 'extra_sbatch' key {option!r} is not an sbatch option name "
                              "(letters, digits, - and _, e.g. mail-type)")
        if (why := reserved_sbatch(option)) is not None:
            raise ConfigError(f"{where}: 'extra_sbatch.{option}' may not be set here ({why})")
        if value is False:
            raise ConfigError(f"{where}: 'extra_sbatch.{option}' is false: leave the option out instead")
        if isinstance(value, str) and (not value or CONTROL.search(value)):
            raise ConfigError(f"{where}: 'extra_sbatch.{option}' = {value!r} must be one non-empty line "
                              "(no newline or control character)")
    if profile.python is not None:
        from semcl.launch.slurm.job_python import python_words

        python_words(profile.python, where)  # one shell line whose words parse
    for i, line in enumerate(profile.setup):
        if not line.strip() or CONTROL.search(line.replace("\t", " ")):
            raise ConfigError(f"{where}: 'setup[{i}]' = {line!r} must be one non-empty shell line "
                              "(one list entry per line)")
    return profile


def layout(res: Resources, cluster: ClusterProfile, where: str) -> tuple[int, int]:
    """(nodes, tasks per node) of one run: one task per GPU, nodes filled to gpus_per_node; a CPU-only
    run's tasks spread evenly over its nodes. An uneven split is a ConfigError naming `where`."""
    if res.gpus:
        per_node = cluster.gpus_per_node
        if per_node <= 0:
            raise ConfigError(f"{where}: a run needs {res.gpus} GPU(s) but cluster profile {cluster.name!r} "
                              f"has gpus_per_node {per_node}")
        if res.gpus <= per_node:
            return 1, res.gpus
        if res.gpus % per_node:
            raise ConfigError(f"{where}: a run needs {res.gpus} GPUs, not a whole number of nodes of "
                              f"{per_node} (cluster profile {cluster.name!r}, gpus_per_node)")
        return res.gpus // per_node, per_node
    if res.tasks % res.nodes:
        raise ConfigError(f"{where}: {res.tasks} tasks do not split evenly over {res.nodes} nodes (resources)")
    return res.nodes, res.tasks // res.nodes


def time_limit(res: Resources, cluster: ClusterProfile, estimate_min: float | None) -> int:
    """Minutes asked for: the resources' time_min if set, else the estimate (minutes of one GPU or
    one CPU) spread over the job's GPUs or CPUs, x time_margin, rounded up the ladder; always within
    [min_time_min, max_time_min]."""
    if res.time_min is not None:
        return min(res.time_min, cluster.max_time_min)
    if estimate_min is None:
        return cluster.max_time_min
    workers = res.gpus if res.gpus else res.cpus * res.tasks
    want = max(estimate_min / max(workers, 1) * cluster.time_margin, cluster.min_time_min)
    rung = next((t for t in TIME_LADDER_MIN if t >= want), cluster.max_time_min)
    return int(min(max(rung, cluster.min_time_min), cluster.max_time_min))


def slurm_parameters(res: Resources, cluster: ClusterProfile, where: str,
                     estimate_min: float | None = None, single_process: bool = False) -> dict[str, Any]:
    """submitit SlurmExecutor parameters (sbatch names) for one run with these needs on this cluster;
    `estimate_min` is the run's estimate in minutes of one GPU (paper) or one CPU. `single_process`: a run that
    trains nothing itself and hands its GPUs to a program that starts its own processes (detectron2's
    launcher): one task holding all of them, never split into a training and an evaluation job."""
    nodes, per_node = layout(res, cluster, where)
    params: dict[str, Any] = {"time": time_limit(res, cluster, estimate_min), "nodes": nodes,
                              "signal_delay_s": cluster.signal_delay_s}
    if res.gpus and single_process:
        if nodes > 1:
            raise ConfigError(f"{where}: gpus {res.gpus} > gpus_per_node {cluster.gpus_per_node} of cluster "
                              f"{cluster.name!r}, but the run's program uses the GPUs of one node")
        params.update(gpus_per_node=per_node, ntasks_per_node=1, cpus_per_task=cluster.cpus_per_gpu * per_node,
                      mem=f"{int(cluster.mem_per_gpu_gb * per_node)}GB")
    elif res.gpus:
        # one task per GPU: DistributedDataParallel across the job's GPUs (mem is per node)
        params.update(gpus_per_node=per_node, ntasks_per_node=per_node, cpus_per_task=cluster.cpus_per_gpu,
                      mem=f"{int(cluster.mem_per_gpu_gb * per_node)}GB")
    else:
        params.update(ntasks_per_node=per_node, cpus_per_task=res.cpus, mem=f"{int(res.mem_gb * per_node)}GB")
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(cluster, key):
            params[key] = getattr(cluster, key)
    # Slurm >= 22.05: srun no longer inherits sbatch's --cpus-per-task, so under CPU binding each task would get
    # one CPU and the loader none; the srun line asks for them again
    params["srun_args"] = [f"--cpus-per-task={params['cpus_per_task']}"]
    if cluster.extra_sbatch:
        params["additional_parameters"] = dict(cluster.extra_sbatch)
    return params


def separate_evaluation(params: dict[str, Any]) -> bool:
    """A job of several tasks (GPUs) evaluates in a job of its own: the evaluation runs on one process,
    and would otherwise hold the whole allocation while it does."""
    return params.get("nodes", 1) * params.get("ntasks_per_node", 1) > 1


def evaluation_parameters(params: dict[str, Any], cluster: ClusterProfile, where: str) -> dict[str, Any]:
    """sbatch parameters of the evaluation job that follows a multi-task training job of `params`."""
    if params.get("gpus_per_node"):
        res = Resources(gpus=cluster.eval_gpus, time_min=cluster.eval_time_min)
    else:  # CPU tasks: one of them, with its CPUs and memory
        per_task_gb = int(str(params["mem"]).removesuffix("GB")) / params["ntasks_per_node"]
        res = Resources(cpus=params["cpus_per_task"], mem_gb=per_task_gb, time_min=cluster.eval_time_min)
    return slurm_parameters(res, cluster, where)


def signature(params: dict[str, Any]) -> tuple:
    """Runs with equal parameters share one array."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def max_array_size(default: int = 1001) -> int:
    """The cluster's MaxArraySize (array task ids must stay below it)."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return default
    for line in out.splitlines():
        if line.strip().startswith("MaxArraySize"):
            return int(line.split("=")[1].strip())
    return default
