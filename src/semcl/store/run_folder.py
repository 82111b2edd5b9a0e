"""The one owner of a run folder's layout: every file name inside results/runs/<run_id>/ is spelled here.

    config.yaml        the resolved config (written when the run starts)
    data.json          the data it read: splits, sizes, source files and their checksums
    log.txt            the run's log
    history.jsonl      one line per finished epoch
    progress.json      where the run stands now (phase, epoch, step, loss, rate, ETA), rewritten about once a
                       second while it trains; removed once the record is written (semcl.runtime.progress)
    lock.json          the owner's lock (semcl.runtime.runlock)
    checkpoints/last.pt  model, optimizer, RNG and queue state (resumes and dependent runs read it)
    trained.json       the training stage's record, beside the final checkpoint
    test_logits.pt     saved test logits (logit ensembles read them)
    metrics.json       the finished record, written once and never rewritten
    failed.json        the last failure (its error line)
    rank_errors/rank<R>.json  the error a rank other than 0 raised (rank 0 reads it instead of "peer died")
    faults/<job>.<restart>    one empty file per requeue after a peer's death (counted against max_fault_requeues)

Base layer (standard library only): the store, the engine, the launchers, the preflight and the methods that
read another run's files all name these files through a RunFolder, never by string.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONFIG, DATA, LOG, HISTORY, LOCK = "config.yaml", "data.json", "log.txt", "history.jsonl", "lock.json"
PROGRESS = "progress.json"
CHECKPOINTS, LAST_CHECKPOINT = "checkpoints", "last.pt"
TRAINED, LOGITS, METRICS, FAILED = "trained.json", "test_logits.pt", "metrics.json", "failed.json"
RANK_ERRORS, FAULTS = "rank_errors", "faults"
# the layout of a run's record (metrics.json `store_format`): 1 = records written before the field existed (read
# as they are); 2 = with training keys (trained.json beside every finished training, `trained_by` on shared ones).
# A record of a newer format than this code's is refused in one line: the code that wrote it reads it.
STORE_FORMAT = 2
# what a record set aside for a retrain is renamed to (nothing is deleted): metrics.replaced-<stamp>.json
REPLACED = "{stem}.replaced-{stamp}{suffix}"


@dataclass(frozen=True)
class RunFolder:
    """results/runs/<run_id>/ and the paths of the files in it."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def data(self) -> Path:
        return self.path / DATA

    @property
    def log(self) -> Path:
        return self.path / LOG

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def progress(self) -> Path:
        return self.path / PROGRESS

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def checkpoint(self) -> Path:
        """The last checkpoint (the final one once training is over)."""
        return self.checkpoints / LAST_CHECKPOINT

    @property
    def trained(self) -> Path:
        return self.path / TRAINED

    @property
    def logits(self) -> Path:
        return self.path / LOGITS

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def failed(self) -> Path:
        return self.path / FAILED

    @property
    def rank_errors(self) -> Path:
        return self.path / RANK_ERRORS

    def rank_error(self, rank: int) -> Path:
        return self.rank_errors / f"rank{rank}.json"

    @property
    def faults(self) -> Path:
        return self.path / FAULTS

    def set_aside(self, name: str, stamp: str) -> Path:
        """Where the file `name` of this folder goes when it is set aside (renamed, never deleted)."""
        stem, dot, suffix = name.rpartition(".")
        return self.path / REPLACED.format(stem=stem, stamp=stamp, suffix=dot + suffix)


def is_checkpoint_folder(path: Path) -> bool:
    """`path` is a run folder's checkpoints/ (the training loop keeps its time-based saves there only)."""
    return Path(path).name == CHECKPOINTS
