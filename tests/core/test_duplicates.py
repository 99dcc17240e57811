"""Near-duplicate detection over a page of results (pure function)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tui_search.core.duplicates import near_duplicate_groups

BASE = (
    "The Get-Process cmdlet gets the processes on a local or remote computer. Without "
    "parameters, this cmdlet gets all of the processes on the local computer. You can also "
    "specify a particular process by process name or process ID (PID) or pass a process object "
    "through the pipeline to this cmdlet."
)


def test_versioned_copies_group_under_the_best_ranked() -> None:
    texts = [
        "Sourdough: feed the starter, mix flour and water, bake at high heat.",
        BASE,
        BASE.replace("local or remote computer", "local computer"),  # an edited version
        "Backups run nightly; a job restores the latest backup every Sunday.",
        BASE + " This example works in PowerShell 7.",
    ]
    groups = near_duplicate_groups(texts)
    assert [1, 2, 4] in groups
    assert [0] in groups and [3] in groups
    assert sorted(i for g in groups for i in g) == list(range(len(texts)))


def test_different_texts_on_the_same_topic_stay_apart() -> None:
    other = (
        "The Stop-Process cmdlet stops one or more running processes. You can specify a process "
        "by process name or process ID (PID), or pass a process object to Stop-Process."
    )
    assert near_duplicate_groups([BASE, other]) == [[0], [1]]


def test_short_and_empty_texts() -> None:
    assert near_duplicate_groups([]) == []
    assert near_duplicate_groups(["", "", "ok"]) == [[0, 1], [2]]
    assert near_duplicate_groups(["Install", "install", "Remove"]) == [[0, 1], [2]]


@given(st.lists(st.text(max_size=200), max_size=20))
def test_any_texts_partition_in_rank_order(texts: list[str]) -> None:
    groups = near_duplicate_groups(texts)
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(len(texts)))
    assert all(g == sorted(g) for g in groups)
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    group_of = {i: n for n, g in enumerate(groups) for i in g}
    for i, a in enumerate(texts):  # identical texts always share a group
        for j, b in enumerate(texts):
            if a == b:
                assert group_of[i] == group_of[j]
