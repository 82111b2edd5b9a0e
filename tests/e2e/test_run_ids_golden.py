"""Every table's run ids per profile equal tests/golden/run_ids.json: an id that changes (a default, preset
or profile edit) fails here, naming the table / profile / row, until `make ids` rewrites the file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("run_ids_script", REPO / "scripts" / "run_ids.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_differences_names_table_profile_and_row():
    script = _script()
    old = {"t/a": {"smoke": {"R1": ["aa", "bb"], "R2": ["cc"]}}, "t/gone": {"smoke": {}}}
    new = {"t/a": {"smoke": {"R1": ["aa", "bx"], "R3": ["dd"]}, "mini": {}}}
    assert script.differences(old, new) == [
        "t/a / mini: profile added",
        "t/a / smoke / R1: ['aa', 'bb'] -> ['aa', 'bx']",
        "t/a / smoke / R2: ['cc'] -> None",
        "t/a / smoke / R3: None -> ['dd']",
        "t/gone: table removed",
    ]
    assert script.differences(new, new) == []


def test_run_ids_match_golden_file(monkeypatch):
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    script = _script()
    golden = json.loads(script.GOLDEN.read_text())
    changed = script.differences(golden, script.current_ids())
    assert not changed, ("run ids changed (if intended, run `make ids` and say which tables in the commit):\n"
                         + "\n".join(changed[:40]) + (f"\n... and {len(changed) - 40} more" if len(changed) > 40 else ""))
