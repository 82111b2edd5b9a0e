"""--seeds decides which runs exist and nothing else: a seed the table has keeps its run id, new seeds are new
runs; a one-seed table gets three with --seeds 3, so its claims can be decided."""

from __future__ import annotations

import pytest

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.seeds import parse_seeds, seed_list, with_seeds
from semcl.registry.tables import get_table


def test_counts_and_lists():
    assert parse_seeds("3") == 3 and parse_seeds("7, 8") == [7, 8]
    assert seed_list([123], 3) == [123, 546, 937] and seed_list([5], 5) == [5, 123, 546, 937, 1]
    assert seed_list([123, 546, 937], 2) == [123, 546] and seed_list([1], [9, 8]) == [9, 8]
    for bad in ("x", "0", "1,1", "-2", "101"):
        with pytest.raises(ConfigError, match=r"^--seeds "):
            parse_seeds(bad)


def test_a_seed_the_table_has_keeps_its_run():
    table = get_table("hsa/linear")
    mine = {(r.row_label, r.seed): r.run_id for r in plan_runs(table, "mini")}
    assert {s for _, s in mine} == {123}
    more = plan_runs(with_seeds(table, "mini", 3), "mini")
    assert {r.seed for r in more} == {123, 546, 937} and len(more) == 3 * len(mine)
    assert {(r.row_label, r.seed): r.run_id for r in more if r.seed == 123} == mine


def test_plan_and_claims_take_seeds(tmp_path, capsys):
    assert main(["plan", "rince/tab2", "--profile", "smoke", "--seeds", "1,2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "# rince/tab2 profile=smoke: 34 runs" and " seed=2 " in out
    assert main(["--results", str(tmp_path), "claims", "hsa", "--profile", "mini", "--seeds", "3"]) == 0
    assert (tmp_path / "claims" / "hsa.mini.3-seeds.md").is_file()
    assert not (tmp_path / "claims" / "hsa.mini.md").exists()


def test_video_table_registers_the_papers_three_seeds_at_paper_scale(capsys):
    """rince/tab4 (and fig6, which reads its runs) plan seeds 123 / 546 / 937 per row at the paper profile, so the
    video claims are decidable by default; mini and smoke keep one seed."""
    assert main(["plan", "rince/tab4", "--profile", "paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# rince/tab4 profile=paper: 60 runs"
    seeds: dict[str, list[int]] = {}
    for line in out[1:]:
        if not line.startswith("#"):
            label, seed = line[14:].split(" seed=")[0].rstrip(), int(line.split(" seed=")[1].split()[0])
            seeds.setdefault(label, []).append(seed)
    assert len(seeds) == 20 and all(s == [123, 546, 937] for s in seeds.values())
    assert out[-1] == "# rince/tab4 total: 60 runs, 346.1 GPU-h; not done: 60 runs, 346.1 GPU-h"
    for tid in ("rince/tab4", "rince/fig6"):
        t = get_table(tid)
        assert t.seeds_for("paper") == [123, 546, 937] and t.seeds_for("mini") == t.seeds_for("smoke") == [123]
