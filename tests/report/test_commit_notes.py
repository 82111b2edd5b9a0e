"""A table says when its cells come from runs at different code commits (records' `git.commit`)."""

import pandas as pd

from semcl.report.tables import commit_notes, summary


def test_one_commit_or_none_known_adds_no_line():
    summ = pd.DataFrame()
    summ.attrs["commits"] = {"a": "1" * 40, "b": "1" * 40}
    assert commit_notes(summ) == []
    summ.attrs["commits"] = {"a": None, "b": None}
    assert commit_notes(summ) == []
    assert commit_notes(None) == []


def test_mixed_commits_are_named_with_their_run_counts_most_runs_first():
    summ = pd.DataFrame()
    summ.attrs["commits"] = {"r1": "abcdef0123456789", "r2": "abcdef0123456789", "r3": "9876543210fedcba", "r4": None}
    assert commit_notes(summ) == ["Code: the cells come from runs at 3 commits: abcdef0123 (2 runs), "
                                  "9876543210 (1 run), unknown (1 run)."]


def test_summary_carries_the_long_tables_commits():
    class _Table:  # summary reads rows and columns only
        rows, columns = [], []

    long = pd.DataFrame(columns=["table", "row", "column", "seed", "value", "run_id", "source"])
    long.attrs["commits"] = {"r1": "a", "r2": "b"}
    assert summary(_Table(), "mini", long).attrs["commits"] == {"r1": "a", "r2": "b"}
