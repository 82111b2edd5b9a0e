"""One training per training key (semcl.registry.plan): which run trains a key that several planned runs share, and the
one-time mapping of a store written before training keys.

A store from before holds trained run folders but no claims (results/trained/<key>.json). The first submission
of the new code maps each trained folder to its training key through the current registry's plan of its table
and profile, and claims the key for it (the first folder of a key wins; a claim is never overwritten), so a run
that differs only in evaluation evaluates that folder's final checkpoint instead of training again. Folders whose
run id the current plan no longer holds (an older config, a `--set` variant) keep working as before, unshared,
and are listed once; nothing is moved, rewritten or deleted. A marker file makes it run once; a crash before the
marker repeats it, and the claims it already wrote stay (idempotent).
"""

from __future__ import annotations

import dataclasses

import yaml

from semcl.errors import SemclError
from semcl.registry.plan import Run, plan_runs
from semcl.store import Store
from semcl.store.run_folder import RunFolder

LEGACY_MARKER = ".legacy-claimed"


def share_trainings(todo: list[Run], planned: list[Run], store: Store) -> list[Run]:
    """Runs of one training key (semcl.registry.plan) train once: the run that claimed the key, else a planned run that
    already trained it (a store from before the claims), else the first run to go out, trains; the others are
    scheduled after it (`waits_for`, not part of their ids) and evaluate its final checkpoint."""
    trainer_of: dict[str, str] = {}
    out = []
    for run in todo:
        key = run.train_key
        if key and key not in trainer_of:
            owner = store.trainer_of(key)
            if owner is None:
                owner = next((r.run_id for r in planned if r.train_key == key and store.trained(r.run_id)), None)
                if owner is not None:
                    store.claim_training(key, owner)
            trainer_of[key] = owner or run.run_id
        trainer = trainer_of.get(key, run.run_id)
        if trainer != run.run_id and not store.trained(trainer):
            run = dataclasses.replace(run, waits_for=(trainer,))
        out.append(run)
    return out


def evaluates_only(run: Run, store: Store) -> bool:
    """The run's training is another run's (scheduled after it, or claimed by it): it only evaluates."""
    if run.waits_for:
        return True
    trainer = store.trainer_of(run.train_key) if run.train_key else None
    return trainer is not None and trainer != run.run_id


def claim_legacy_trainings(store: Store) -> list[str]:
    """Claim the training keys of the store's trained folders once (module docstring); the lines naming the
    folders that could not be mapped."""
    from semcl.registry.tables import get_table

    marker = store.folders.trainings / LEGACY_MARKER
    runs_dir = store.folders.runs
    if marker.exists() or not runs_dir.is_dir():
        return []
    plans: dict[tuple[str, str], dict[str, str]] = {}
    unmapped, claims = [], {}
    for folder in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        run_id = folder.name
        if not store.trained(run_id):
            continue
        try:
            head = yaml.safe_load(RunFolder(folder).config.read_text())
            where = (str(head["table"]), str(head["profile"]))
        except (OSError, yaml.YAMLError, KeyError, TypeError):
            unmapped.append(f"{RunFolder(folder).config}: unreadable; its training is not shared")
            continue
        if where not in plans:
            try:
                plans[where] = {r.run_id: r.train_key for r in plan_runs(get_table(where[0]), where[1])}
            except SemclError:
                plans[where] = {}
        key = plans[where].get(run_id)
        if key is None:
            unmapped.append(f"{folder}: not a run of the current {where[0]} ({where[1]}) plan (an older config or a "
                            "variant); its training is not shared")
            continue
        if store.trainer_of(key) is None:  # the first folder of a key wins; a claim is never overwritten
            claims.setdefault(key, run_id)
    for key, run_id in claims.items():
        store.claim_training(key, run_id)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("claims of the trained folders written before training keys: done\n")
    except OSError:
        if claims:
            raise
        # nothing was claimed: the marker only saves the next scan, and a read-only store needs no claims
    if unmapped:
        unmapped.insert(0, f"semcl: {len(unmapped)} trained run folder(s) of this store keep their training unshared:")
    return unmapped
