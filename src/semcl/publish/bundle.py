"""`semcl publish <table|paper> --profile P --out DIR`: a table's (or a paper's tables') finished runs as a bundle:

    DIR/README.md  model-index.yml  environment.json  SHA256SUMS
    DIR/runs/<run_id>/{metrics.json, config.yaml, history.jsonl, log.txt, trained.json, tensorboard/, weights/}

The bundle is written into a temporary folder beside DIR, verified (semcl.publish.verify), and only then renamed
into place: a failure leaves DIR as it was. An existing non-empty DIR is replaced only with `force`, and only when
it is itself a bundle; DIR never lies inside the results store, nor holds it. Nothing is read from the network.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from semcl.errors import ResultsError, SemclError
from semcl.files import SUMS_FILE, file_mode, write_bytes_atomic, write_json_atomic, write_sha256sums, write_text_atomic
from semcl.locations import shown_path
from semcl.publish import card as card_mod
from semcl.publish import model_index as mi
from semcl.publish.environment import environment
from semcl.publish.verify import CARD, ENVIRONMENT, MODEL_INDEX, RUNS, verify_bundle
from semcl.publish.weights import TIMM_CONFIG, WEIGHTS_DIR, WEIGHTS_FILE, PublishedWeights, write_weights
from semcl.registry.tables import Table
from semcl.store import Store
from semcl.store.run_folder import CONFIG, RunFolder

TENSORBOARD = "tensorboard"  # runs/<id>/tensorboard/: the run's event files


@dataclass
class Published:
    folder: Path
    runs: int
    models: int
    without_weights: list[str] = field(default_factory=list)  # "<run id>: why"


def tables_of(target: str, profile: str) -> list[Table]:
    """The table `target`, or every table of the paper `target` that has the profile."""
    from semcl.registry.tables import get_table, load_registry, unknown_table

    if "/" in target:
        return [get_table(target)]
    tables = [t for t in load_registry().values() if t.paper == target and profile in t.profiles]
    if not tables:
        raise unknown_table(target, load_registry())
    return sorted(tables, key=lambda t: t.id)


def check_out(out: Path, store: Path, force: bool) -> None:
    """SemclError (one line) when DIR may not be written: inside the results store or holding it, a file, or a
    non-empty folder without `force` (with it: one that is not a bundle)."""
    target, root = out.resolve(), store.resolve()
    if target.is_relative_to(root) or root.is_relative_to(target):
        raise SemclError(f"--out {out}: {'inside' if target.is_relative_to(root) else 'holds'} the results store "
                         f"{store}; a bundle goes elsewhere")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SemclError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise SemclError(f"--out {out}: exists and is not empty; pass --force to replace the bundle in it")
        if not ((out / SUMS_FILE).is_file() and (out / MODEL_INDEX).is_file()):
            raise SemclError(f"--out {out}: not a bundle (no {SUMS_FILE} and {MODEL_INDEX}); --force replaces bundles "
                             "only: choose another folder")


def _copy(src: Path, dst: Path) -> None:
    """A plain copy of a regular file (a link's target is read, the link is not copied)."""
    write_bytes_atomic(dst, src.read_bytes())


def _copy_run_files(store: Store, run_id: str, into: Path) -> None:
    folder = store.folder(run_id)
    for src in (folder.metrics, folder.config, folder.history, folder.log, folder.trained):
        if src.is_file():
            _copy(src, into / src.name)
    from semcl.runtime.tracking import TB_OWNER, run_label, tensorboard_dir

    try:
        tb = tensorboard_dir(store.root, run_label(folder.path))
    except (OSError, KeyError, ValueError, SemclError):
        return
    owner = tb / TB_OWNER
    if tb.is_dir() and owner.is_file() and owner.read_text().strip() == run_id:
        for src in sorted(p for p in tb.rglob("*") if p.is_file() and not p.is_symlink() and p.name != TB_OWNER):
            _copy(src, into / TENSORBOARD / src.relative_to(tb))


def _weights(store: Store, run_id: str, record: dict, table: Table, into: Path) -> tuple[PublishedWeights | None, str]:
    """The run's published weights (from the run that holds its training), or None and why there are none."""
    source = record.get("trained_by") or run_id
    if not RunFolder(store.run_dir(source)).checkpoint.is_file():
        return None, f"no checkpoint in {store.run_dir(source)} (a run that trains no network, or set aside)"
    labels = {"run_id": run_id, "table": table.id, "row": record.get("row", ""), "profile": record.get("profile", ""),
              "seed": str(record.get("seed"))}
    return write_weights(store.root, source, into / WEIGHTS_DIR, labels), ""


def build_bundle(target: str, profile: str, store: Store, into: Path) -> Published:
    """Write the bundle of `target` under `profile` into the empty folder `into`."""
    from semcl.registry.papers import load_paper
    from semcl.registry.plan import plan_runs
    from semcl.report.tables import long_table, render, summary

    tables = tables_of(target, profile)
    models, records_all, weights_of, tables_md, missing = [], {}, {}, [], []
    for table in tables:
        runs = plan_runs(table, profile)
        records = store.records([r.run_id for r in runs])
        summ = summary(table, profile, long_table(table, profile, store))
        tables_md.append(render(table, profile, summ, "md"))
        for label in dict.fromkeys(r.row_label for r in runs):
            recs = [records[r.run_id] for r in runs if r.row_label == label and r.run_id in records]
            if not recs:
                continue
            for rec in recs:
                rid = rec["run_id"]
                if rid not in records_all:
                    records_all[rid] = rec
                    run_dir = into / RUNS / rid
                    _copy_run_files(store, rid, run_dir)
                    weights_of[rid], why = _weights(store, rid, rec, table, run_dir)
                    if why:
                        missing.append(f"{rid}: {why}")
            first = recs[0]["run_id"]
            pw = weights_of[first]
            models.append(mi.model(
                table, label, profile, recs, summ, registry_file=shown_path(table.path),
                parameters=pw.parameters if pw else None, network=pw.network if pw else None,
                weights=f"{RUNS}/{first}/{WEIGHTS_DIR}/{WEIGHTS_FILE}" if pw else None,
                config_file=f"{RUNS}/{first}/{CONFIG}"))
    if not models:
        raise ResultsError(f"{target}: no finished run under profile {profile!r} in {store.root} (semcl run {target} "
                           f"--profile {profile} first)")
    papers = dict.fromkeys(t.paper for t in tables)
    doc = {"Collections": [mi.collection(load_paper(p)) for p in papers], "Models": models}
    text = card_mod.dump_yaml(doc)
    write_text_atomic(into / MODEL_INDEX, text)
    timm = [f"{RUNS}/{rid}/{WEIGHTS_DIR}" for rid in records_all if (into / RUNS / rid / WEIGHTS_DIR / TIMM_CONFIG).is_file()]
    commits = sorted({str((r.get("git") or {}).get("commit")) for r in records_all.values()})
    write_text_atomic(into / CARD, card_mod.card(doc, target=target, profile=profile, tables_md=tables_md,
                                                 runs=len(records_all), with_weights=sum(1 for w in weights_of.values() if w),
                                                 timm_folders=timm, commits=commits))
    write_json_atomic(into / ENVIRONMENT, environment(list(records_all.values())))
    write_sha256sums(into)
    return Published(into, len(records_all), len(models), missing)


def publish(target: str, profile: str, out: Path, results: Path, force: bool = False) -> Published:
    """Write the bundle of `target` to `out` (see the module docstring); verified before it is put in place."""
    out, store = Path(out), Store(results)
    if not store.folders.runs.is_dir():
        raise ResultsError(f"{store.root}: no results store here (no runs/ folder); --results names it")
    check_out(out, store.root, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    os.chmod(work, file_mode() | (file_mode() & 0o444) >> 2)  # a plain folder's mode (mkdtemp's is 0700)
    try:
        done = build_bundle(target, profile, store, work)
        problems = verify_bundle(work)
        if problems:  # a bug of this writer: say so rather than publish it
            raise ResultsError(f"the bundle written to {work} fails its own check: {problems[0]}")
        old = None
        if out.exists():
            old = out.parent / f"{work.name}.old"
            out.rename(old)
        work.rename(out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    done.folder = out
    return done
