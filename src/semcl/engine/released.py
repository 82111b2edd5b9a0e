"""The authors' released checkpoints: read into the row's network (whole or not at all) and evaluated as runs.

A released row (registry `released:`) names its file, the official layout (semcl.models.released) and the row of
the same table whose network the weights load into; the network is that row's method under the profile, built
as a run builds it, and the file's tensors replace its state under semcl's names. Its run evaluates with the
row's columns and never trains; the run id hashes the network row's config, the seed and the file's sha256, so
another file (a re-upload, a fine-tuned copy) is another run. Which run shows in the table is kept per table and
profile in the store (results/released/), since the sha256 is often known only once the file is here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from semcl.config import hashable_config
from semcl.errors import ConfigError, DataError, ResultsError
from semcl.files import sha256_file, write_json_atomic
from semcl.registry.plan import ReleasedFile, Run
from semcl.registry.plan import released_run_id as run_id_of
from semcl.registry.tables import Row, Table, get_table
from semcl.store import Store

if TYPE_CHECKING:
    import torch

INDEX = "released"  # results/released/<table id with / as __>.<profile>.json: released row -> run id


@dataclass(frozen=True)
class Loaded:
    """What a file put into a network: counts, what the layout dropped, semcl's own keys kept, the file's sha256."""

    tensors: int
    parameters: int
    dropped: tuple[str, ...]
    kept: tuple[str, ...]
    sha256: str


def released_row(table: Table, label: str) -> tuple[Row, Row]:
    """(the released row, the row whose network it loads into); ConfigError naming the released rows otherwise."""
    row = table.row(label)
    if row.released is None:
        have = [r.label for r in table.rows if r.released]
        raise ConfigError(f"{table.path}: row {label!r} of {table.id} is no released row "
                          f"(the authors' checkpoints here: {', '.join(map(repr, have)) or 'none'})")
    return row, table.row(row.released.network)


def network_config(table: Table, row: Row, profile: str, precision: str | None = None):
    """The resolved config of the row the released `row` loads into, with the table's evaluations."""
    from semcl.runtime.precision import planned, stored

    cfg = table.resolve(table.row(row.released.network), profile)
    precision = stored(precision) if precision is not None else planned()
    if precision is not None:
        cfg.optim.precision = precision
    return cfg


def spec_info(cfg):
    """A DataInfo from the dataset's registry entry (no data read): classes, channels, the superclasses where the
    entry holds them (CIFAR-100's), placeholder class names (ImageNet-100's real wnids, from the shipped list, for
    RINCE's name similarities) and uniform class counts. These set only what a method trains with (loss offsets,
    ranks), never what a loaded network computes."""
    import torch

    from semcl.data.registry import DATASETS
    from semcl.methods.base import DataInfo

    spec = DATASETS[cfg.data.name]
    n = spec.synthetic_classes if cfg.data.synthetic else spec.num_classes
    groups = spec.synthetic_groups if spec.has_coarse and len(spec.synthetic_groups) == n else None
    f2c = torch.tensor(groups, dtype=torch.long) if groups else (torch.zeros(n, dtype=torch.long)
                                                                  if spec.has_coarse else None)
    names = tuple(str(i) for i in range(n))
    if cfg.data.name == "imagenet100" and not cfg.data.synthetic:  # RINCE's name ranks read the classes' words
        from semcl.data.imagenet100 import imagenet100_wnids

        names = tuple(imagenet100_wnids())  # the folders' order, as the loader names the classes
    return DataInfo(n, spec.channels, f2c, torch.ones(n, dtype=torch.long), names)


def load_weights(method: torch.nn.Module, table_id: str, row: Row, path: Path, sha256: str | None = None) -> Loaded:
    """Put the file's tensors into `method` (its whole state, semcl's names): DataError in one line naming the
    file, the row and the first offending keys when the file is not the row's network; nothing loads then."""
    # here, not at the top: `semcl table` reads the verified files' index from this module without torch (~1 s)
    from semcl.models.released import layout_module
    from semcl.models.released.common import convert, read_official

    ck = row.released
    where = f"{path}: row {row.label!r} of {table_id} (layout {ck.layout})"
    layout = layout_module(ck.layout)
    obj = read_official(path, where)
    want = {k: v.shape for k, v in method.state_dict().items()}
    try:
        state = layout.unwrap(obj)
        weights = convert(state, layout.rename, want, layout.OURS_ALONE)
    except ValueError as err:
        raise DataError(f"{where}: {err}") from None
    sha = sha256 or sha256_file(path)
    if ck.sha256 and sha != ck.sha256:
        raise DataError(f"{where}: sha256 {sha[:12]}... differs from the registry's {ck.sha256[:12]}... "
                        "(not the file as the authors released it)")
    missing, unexpected = method.load_state_dict(weights, strict=False)
    assert not unexpected and set(missing) <= set(layout.OURS_ALONE), (missing, unexpected)  # convert checked it
    dropped = tuple(k for k in state if layout.rename(str(k)) is None)
    params = sum(int(v.numel()) for v in weights.values() if v.is_floating_point())
    return Loaded(len(weights), params, dropped, tuple(missing), sha)


def _network(table: Table, row: Row, profile: str):
    """The released row's network, built untrained as a run of its network row builds it (no data read)."""
    from semcl.methods.registry import method_spec

    cfg = network_config(table, row, profile)
    return method_spec(cfg.method.name).load()(cfg, spec_info(cfg))


def load_released_summary(table_id: str, row_label: str, path: Path, profile: str = "paper"):
    """(the network with the file's weights in, in eval mode; what loaded; the row it is the network of)."""
    table = get_table(table_id)
    if profile not in table.profiles:
        table.profile(profile)  # the one-line error naming the profiles
    row, net = released_row(table, row_label)
    method = _network(table, row, profile)
    loaded = load_weights(method, table.id, row, Path(path))
    return method.eval(), loaded, net.label


def load_released(table_id: str, row_label: str, path: str | Path, profile: str = "paper"):
    """The released row's network (its method, as a run builds it) in eval mode with the file's weights in."""
    return load_released_summary(table_id, row_label, Path(path), profile)[0]


def check_file(run: Run) -> None:
    """Refuse, in one line, a released run whose file is not its row's network (before anything is submitted)."""
    table = get_table(run.table_id)
    row = table.row(run.row_label)
    load_weights(_network(table, row, run.profile), table.id, row, Path(run.released.path), run.released.sha256)


def released_run_id(cfg, seed: int, sha256: str) -> str:
    """12 hex digits of sha256(the network row's config, seed, the file's sha256) (semcl.runs.released_run_id)."""
    return run_id_of(hashable_config(cfg), seed, sha256)


def released_run(table: Table, row: Row, profile: str, path: Path, sha256: str, precision: str | None = None) -> Run:
    """The evaluation-only run of `path` under `profile` (the profile's first seed: nothing trains)."""
    cfg = network_config(table, row, profile, precision)
    seed = table.seeds_for(profile)[0]
    return Run(table.id, row.label, seed, profile, cfg, released_run_id(cfg, seed, sha256),
               released=ReleasedFile(str(Path(path).resolve()), sha256, row.released.layout))


def find_files(table: Table, folder: Path) -> list[tuple[Row, Path | None, str]]:
    """(released row, its file in `folder` or None, how it was found or why not): by the registry's file name
    (a relative path under `folder`), else by the registry's sha256 among the folder's files."""
    if not folder.is_dir():
        raise DataError(f"{folder}: --weights is not a folder")
    by_sha: dict[str, Path] | None = None
    out = []
    for row in table.rows:
        ck = row.released
        if ck is None:
            continue
        path = folder / ck.file
        if path.is_file():
            out.append((row, path, "by name"))
            continue
        if ck.sha256:
            if by_sha is None:
                by_sha = {sha256_file(p): p for p in sorted(folder.rglob("*")) if p.is_file() and p.stat().st_size > 0}
            if ck.sha256 in by_sha:
                out.append((row, by_sha[ck.sha256], "by sha256"))
                continue
        out.append((row, None, f"no {ck.file}" + (" and no file of its sha256" if ck.sha256 else "")))
    return out


def index_path(store: Store, table_id: str, profile: str) -> Path:
    return store.root / INDEX / f"{table_id.replace('/', '__')}.{profile}.json"


def read_index(store: Store, table_id: str, profile: str) -> dict[str, str]:
    """released row label -> the run id shown for it (the file verified last); {} when none was verified."""
    path = index_path(store, table_id, profile)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ResultsError(f"{path}: unreadable ({type(err).__name__}); delete it and run semcl verify again") from None
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise ResultsError(f"{path}: not a mapping of row labels to run ids; delete it and run semcl verify again")
    return doc


def remember(store: Store, runs: list[Run]) -> None:
    """Record which run each released row shows (the file just verified)."""
    for (table_id, profile) in {(r.table_id, r.profile) for r in runs}:
        index = read_index(store, table_id, profile)
        index.update({r.row_label: r.run_id for r in runs if (r.table_id, r.profile) == (table_id, profile)})
        write_json_atomic(index_path(store, table_id, profile), index)


def released_files(table: Table, profile: str, store: Store) -> dict[str, ReleasedFile]:
    """released row label -> the file verified last for it into this store (its finished evaluation's record)."""
    out = {}
    for label, run_id in read_index(store, table.id, profile).items():
        rec = store.read_record(run_id)
        row = next((r for r in table.rows if r.label == label and r.released), None)
        rel = (rec or {}).get("released")
        if row is not None and isinstance(rel, dict) and isinstance(rel.get("sha256"), str):
            out[label] = ReleasedFile(str(rel.get("file", "")), rel["sha256"], row.released.layout)
    return out


def released_runs(table: Table, profile: str, store: Store) -> tuple[list[Run], dict[str, ReleasedFile]]:
    """(the runs the released rows show, the files they read): those verified into this store."""
    files = released_files(table, profile, store)
    runs = [released_run(table, table.row(label), profile, Path(f.path), f.sha256) for label, f in files.items()]
    return runs, files
