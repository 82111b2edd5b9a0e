"""The launching seam: one `Backend` class per executor (`semcl run --executor NAME`), the way submitit
declares `Executor` with abstract hooks and one module per backend. The CLI knows backends only through
this interface and the table `semcl.launch.backends.BACKENDS`; no backend name is branched on outside launch/.

A backend receives the planned runs with the resources their registry rows ask for, and:
- `submit` sends out the missing ones (a done run is never resubmitted: `semcl.launch.backends.runs_to_submit`);
- `preview` renders what `submit` would send (a job layout), for `semcl plan --executor NAME`;
- `states` reattaches to runs it submitted earlier (queued or running elsewhere), for `status` and `wait`;
- `precision` is the arithmetic its cluster plans runs with, when `--precision` is not given.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from semcl.registry.plan import Run
    from semcl.registry.resources import Resources
    from semcl.store import Store

# the cluster profile used when none is named: slurm/profiles/local.yaml, the single-node cluster of the tests
DEFAULT_CLUSTER = "local"


@dataclass(frozen=True)
class LaunchOptions:
    """What `semcl run` hands every backend; a backend ignores what it has no use for."""

    data_root: Path
    retry_failed: bool = False
    workers: int | None = None  # local processes (None: the CPU count, at most 4)
    cluster: str = DEFAULT_CLUSTER  # the cluster profile (slurm/profiles/<name>.yaml) of backends that use one
    allow_cpu: bool = False  # local executors: train rows that ask for a GPU on a machine without CUDA


class Backend(abc.ABC):
    """One executor. Subclasses set `name` and implement `submit`; every other hook has a default."""

    name: ClassVar[str]
    # `semcl run` refuses a table whose full-size `semcl check` has not passed (unless --no-check): a
    # backend whose runs wait in a queue for hours should not find a shape error after the wait
    needs_preflight: ClassVar[bool] = False
    # `plan` renders `preview` (which needs the resolved runs) instead of reading the cached index
    previews_layout: ClassVar[bool] = False

    @abc.abstractmethod
    def submit(self, runs: list[tuple[Run, Resources]], store: Store, options: LaunchOptions) -> None:
        """Send out the runs not yet done (or failed, with options.retry_failed)."""

    def check(self, runs: list[tuple[Run, Resources]], store: Store, options: LaunchOptions) -> None:  # noqa: B027 (optional hook)
        """Refuse, in one line (ConfigError), runs this backend cannot run as their rows ask; called by `semcl run`
        before the data root is checked or anything is written."""

    def preview(self, runs: list[tuple[Run, Resources]], store: Store, cluster: str) -> str:
        """What `submit` would send, as text shown under `semcl plan`'s run lines ("" for nothing more)."""
        return ""

    def states(self, store: Store, runs: list[Run]) -> dict[str, tuple[str, str]]:
        """run id -> (status, detail) for runs this backend knows more of than the store (queued, requeued);
        runs left out are read from the store alone."""
        return {}

    def precision(self, cluster: str) -> str | None:
        """The `precision` runs are planned with when the command line names none (None: `official`)."""
        return None
