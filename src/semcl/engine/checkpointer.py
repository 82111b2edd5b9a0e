"""The training loop's checkpoint: what it holds (model, optimiser, loss scaler, every rank's RNG states, the
position inside the schedule) and how a resume reads it back (semcl.engine.train)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from semcl.errors import ResultsError
from semcl.methods.base import Method
from semcl.runtime import distributed
from semcl.runtime.checkpoint import RESTART, load_resumable, restore, rng_state, save_atomic, set_rng_state

log = logging.getLogger("semcl.train")


@dataclass
class Position:
    """Where training stands: the next epoch and step, the finished epochs' history, and inside an epoch (a
    checkpoint taken on a requeue signal) the epoch generator's state and the loss summed so far."""

    epoch: int = 0
    step: int = 0
    history: list[dict] = field(default_factory=list)
    generator: torch.Tensor | None = None
    loss_sum: float = 0.0
    rng: dict | None = None  # this rank's global RNG states as checkpointed


@dataclass
class Checkpointer:
    """Writes and restores the run's checkpoint: model, optimiser, loss scaler, every rank's RNG states, the
    position. All ranks call `save` together (they agree on the step); rank 0 writes, atomically."""

    method: Method
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    path: Path
    history: list[dict] = field(default_factory=list)

    def resume(self, epochs: int) -> Position:
        state = load_resumable(self.path)
        if state is None:
            return Position(history=self.history)
        if state["epoch"] > epochs:
            raise ResultsError(f"{self.path}: key 'epoch' = {state['epoch']} beyond the run's {epochs} epochs; "
                               f"{RESTART}")
        restore(self.method, state["method"], self.path)  # before the optimiser: its state follows the params
        restore(self.opt, state["optimizer"], self.path)
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        ranks = state.get("rng_ranks")
        if ranks is not None and len(ranks) != distributed.world_size() and state["epoch"] < epochs:
            log.warning("checkpoint from %d ranks resumed on %d: RNG states of rank 0 for all", len(ranks),
                        distributed.world_size())
        exact = ranks is not None and len(ranks) == distributed.world_size()
        rng = ranks[distributed.rank()] if exact else state["rng"]
        set_rng_state(rng)
        self.history = state["history"]
        log.info("resumed from %s at epoch %d step %d", self.path, state["epoch"], state.get("step", 0))
        return Position(state["epoch"], state.get("step", 0), self.history, state.get("generator"),
                        state.get("loss_sum", 0.0), rng)

    def save(self, epoch: int, step: int, g: torch.Generator | None, loss_sum: float) -> None:
        rng = rng_state()
        ranks = distributed.gather_rng_states(rng)
        if distributed.rank() == 0:  # one writer (atomic rename: readers never see half a file)
            state = {"method": self.method.state_dict(), "optimizer": self.opt.state_dict(), "epoch": epoch,
                     "step": step, "rng": rng, "history": self.history}
            if ranks is not None:
                state["rng_ranks"] = ranks
            if self.scaler.is_enabled():
                state["scaler"] = self.scaler.state_dict()
            if g is not None:
                state.update(generator=g.get_state(), loss_sum=loss_sum)
            save_atomic(state, self.path)
        distributed.barrier()
