"""CLI start-up (item 1) and orchestration (item 6): subprocess wall times against a bare interpreter.

* ``semcl list`` and ``semcl plan rince/tab2`` over ``python -c "import yaml"`` (target ≤ 2×): the CLI
  must not pay for torch or pandas when it only reads the registry.
* the same ``semcl list`` with a cold registry index (a fresh ``$SEMCL_CACHE``: the whole registry
  validated and every run id hashed once; informational);
* the demo wall time: ``make demo``'s main job + table as it last ran here (``results/demo_time.json``,
  written by the Makefile), against the 10-minute target; "not measured" until ``make demo`` ran;
* ``semcl plan --all`` and ``semcl table`` over a store of ~1,000 synthetic run records: under 2 s
  each; reported as a ratio over ``python -c "import pandas"`` (the table command needs pandas).

All commands run against an empty (or synthetic) results store in a temp folder, so the numbers do
not depend on what is in ./results. Each command runs ``repeats`` times, interleaved, median taken.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import yaml
from common import PYTHON, ROOT, Row, interleaved, median, ratio_row, subprocess_env, time_command

SEMCL = str(Path(PYTHON).parent / "semcl")
N_RECORDS = 1000


def _synthetic_registry(tmp: Path) -> tuple[Path, str, int]:
    """Copy of the registry plus `bench/many_seeds`: rince/tab2 with enough seeds for ~1,000 runs."""
    reg = tmp / "experiments"
    shutil.copytree(ROOT / "experiments", reg)
    entry = yaml.safe_load((ROOT / "experiments" / "rince" / "tab2.yaml").read_text())
    from semcl.methods.registry import METHODS

    n_impl = sum(r.get("method") in METHODS for r in entry["rows"])  # released rows (no method) train nothing
    n_seeds = math.ceil(N_RECORDS / n_impl)
    entry["id"] = "bench/many_seeds"
    entry["seeds"] = list(range(1000, 1000 + n_seeds))
    for prof in (entry.get("profiles") or {}).values():
        if isinstance(prof, dict):
            prof.pop("seeds", None)
    (reg / "bench").mkdir()
    (reg / "bench" / "many_seeds.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    return reg, entry["id"], n_impl * n_seeds


def _fill_store(reg: Path, table_id: str, results: Path) -> int:
    """Write one finished metrics.json per planned run (values made up, keys the real ones)."""
    import random

    from semcl.evals.protocols import metric_key
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table
    from semcl.store import Store

    table = get_table(table_id, reg)
    store = Store(results)
    subst = table.profile("paper").substitute
    keys = [k for k in (metric_key(c, subst) for c in table.columns) if k is not None]
    rng = random.Random(0)
    runs = plan_runs(table, "paper")
    for run in runs:
        folder = store.run_dir(run.run_id)
        folder.mkdir(parents=True)
        record = {"run_id": run.run_id, "seed": run.seed, "table": table_id, "row": run.row_label,
                  "metrics": {k: rng.uniform(40, 80) for k in keys}, "wall_time_s": 1.0}
        (folder / "metrics.json").write_text(json.dumps(record))
    return len(runs)


def run(repeats: int = 7) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="semcl-bench-cli-") as tmp_s:
        tmp = Path(tmp_s)
        empty = tmp / "empty-results"
        empty.mkdir()
        env = subprocess_env()
        cmds = {
            "import yaml": [PYTHON, "-c", "import yaml"],
            "import pandas": [PYTHON, "-c", "import pandas"],
            "semcl list": [SEMCL, "--results", str(empty), "list"],
            "semcl plan rince/tab2": [SEMCL, "--results", str(empty), "plan", "rince/tab2"],
            "semcl plan --all": [SEMCL, "--results", str(empty), "plan", "--all"],
        }
        reg, table_id, n_planned = _synthetic_registry(tmp)
        results = tmp / "results"
        n_written = _fill_store(reg, table_id, results)
        syn_env = subprocess_env(SEMCL_REGISTRY=str(reg))
        table_cmd = [SEMCL, "--results", str(results), "table", table_id]
        fns = {name: (lambda argv=argv: time_command(argv, env)) for name, argv in cmds.items()}
        fns[f"semcl table ({n_written} records)"] = lambda: time_command(table_cmd, syn_env)
        times = {k: median(v) for k, v in interleaved(fns, repeats).items()}
        # Check that the table really read the records (n=<seeds> in its cells).
        import subprocess

        out = subprocess.run(table_cmd, env=syn_env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        read_ok = f"(n={n_planned // max(1, n_written // max(1, n_planned))}" in out or "(n=" in out

    base_yaml, base_pd = times["import yaml"], times["import pandas"]
    for name in ("semcl list", "semcl plan rince/tab2"):
        rows.append(ratio_row(f"CLI start: {name}", times[name], base_yaml, "s", 2.0,
                              floor_label="python -c 'import yaml'"))
    for name in ("semcl plan --all", f"semcl table ({n_written} records)"):
        t = times[name]
        note = f"{t / base_pd:.2f}× python -c 'import pandas' ({base_pd:.3g} s)"
        if name.startswith("semcl table") and not read_ok:
            note += "; WARNING: table output shows no seeds read"
        rows.append(Row(f"Orchestration: {name}", f"{t:.3g} s", "2 s (absolute)", t / 2.0, "< 2 s", t < 2.0, note))
    cold_env = subprocess_env(SEMCL_CACHE=tempfile.mkdtemp(prefix="semcl-bench-cold-"))
    cold = time_command([SEMCL, "--results", str(ROOT / "bench"), "list"], cold_env)
    shutil.rmtree(cold_env["SEMCL_CACHE"], ignore_errors=True)
    rows.append(Row("CLI start: semcl list, cold index (once per source change)", f"{cold:.3g} s",
                    f"{base_yaml:.3g} s (python -c 'import yaml')", cold / base_yaml, "—", None,
                    "rebuilt after any edit under src/semcl or experiments/ (semcl.registry.index)"))
    rows.append(demo_row(ROOT / "results" / "demo_time.json"))
    return rows


DEMO_TARGET_S = 10 * 60


def demo_row(path: Path) -> Row:
    """`make demo`'s last wall time (main job + table), from the file the Makefile writes."""
    if not path.exists():
        return Row("Demo wall time (make demo: main job + table)", "not measured", "—", None, "≤ 10 min", None,
                   f"run `make demo` (writes {path.relative_to(ROOT)})")
    info = json.loads(path.read_text())
    s = float(info["seconds"])
    note = f"finished {info.get('finished_at', '?')} on {info.get('cpus', '?')} CPUs"
    return Row("Demo wall time (make demo: main job + table)", f"{s / 60:.1f} min", "10 min (target)",
               s / DEMO_TARGET_S, "≤ 10 min", s <= DEMO_TARGET_S, note)


if __name__ == "__main__":
    for r in run():
        print(r)
