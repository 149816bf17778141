"""The batch assembler (core/batching.py) against independent expectations: chunks never exceed the limit,
groups are complete, tails are flushed, a failure is split so that only the bad item fails; grouping by key."""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo.core.batching import Assembler, GroupOverflow, chunks, split_on_failure
from rewardzoo.shared.groups import group_key, group_members


def _rounds(rng: np.random.Generator, n: int) -> list[range]:
    """``range(n)`` cut at random points: the samples as a trainer adds them, round by round."""
    cuts = sorted(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 6))), replace=False).tolist())
    bounds = [0, *cuts, n]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("seed", range(20))
def test_pointwise_chunks_are_the_slices_of_the_whole_batch_however_the_items_arrive(seed):
    rng = np.random.default_rng(seed)
    n, limit = int(rng.integers(1, 60)), int(rng.integers(1, 9))
    assembler: Assembler[int] = Assembler(limit)
    calls = []
    for part in _rounds(rng, n) if n > 1 else [range(n)]:
        due = assembler.extend(part)
        assert all(len(c) == limit for c in due)  # only full chunks are due before the flush
        calls += due
    calls += assembler.flush()
    expected = [list(range(n))[i : i + limit] for i in range(0, n, limit)]  # plain slicing
    assert calls == expected
    assert chunks(list(range(n)), limit) == expected
    assert len(assembler) == 0 and assembler.flush() == []


@pytest.mark.parametrize("seed", range(20))
def test_sized_items_are_never_split_and_a_chunk_never_exceeds_the_limit(seed):
    rng = np.random.default_rng(100 + seed)
    limit = int(rng.integers(2, 12))
    sizes = rng.integers(1, limit + 4, size=int(rng.integers(1, 30))).tolist()  # some larger than the limit
    assembler: Assembler[int] = Assembler(limit)
    calls = []
    for item, size in enumerate(sizes):
        calls += assembler.add(item, size=size)
    calls += assembler.flush()
    # independent: a greedy walk that starts a new chunk when the next item would overflow the current one
    expected: list[list[int]] = []
    current: list[int] = []
    total = 0
    for item, size in enumerate(sizes):
        if current and total + size > limit:
            expected.append(current)
            current, total = [], 0
        current.append(item)
        total += size
        if total >= limit:
            expected.append(current)
            current, total = [], 0
    if current:
        expected.append(current)
    assert calls == expected
    assert [i for c in calls for i in c] == list(range(len(sizes)))
    for chunk in calls:
        assert len(chunk) == 1 or sum(sizes[i] for i in chunk) <= limit


@pytest.mark.parametrize("seed", range(20))
def test_groups_are_emitted_complete_when_their_last_member_arrives_and_the_rest_at_the_flush(seed):
    rng = np.random.default_rng(200 + seed)
    size = int(rng.integers(1, 5))
    keys = rng.integers(0, 6, size=int(rng.integers(1, 40))).tolist()
    assembler: Assembler[int] = Assembler(groupwise=True, group_size=size)
    emitted = []
    for item, key in enumerate(keys):
        for group in assembler.add(item, key=key):
            emitted.append((item, group))
    tails = assembler.flush()
    # independent: per key, its items in runs of `size`; a full run is due at its last item
    runs: dict[int, list[list[int]]] = {}
    for item, key in enumerate(keys):
        key_runs = runs.setdefault(key, [[]])
        if len(key_runs[-1]) == size:
            key_runs.append([])
        key_runs[-1].append(item)
    full = sorted((run[-1], run) for rs in runs.values() for run in rs if len(run) == size)
    assert emitted == full
    open_runs = sorted((run[0], run) for rs in runs.values() for run in rs if len(run) < size)
    assert tails == [run for _, run in open_runs]
    for _, group in emitted:
        assert len({keys[i] for i in group}) == 1


def test_without_a_group_size_every_group_waits_for_the_flush_in_order_of_first_appearance():
    assembler: Assembler[str] = Assembler(groupwise=True)
    assert assembler.extend("abcdef", [2, 1, 2, 3, 1, 2]) == []
    assert len(assembler) == 6
    assert assembler.flush() == [["a", "c", "f"], ["b", "e"], ["d"]]
    assert len(assembler) == 0


def test_a_strict_assembler_refuses_a_member_past_a_complete_group():
    assembler: Assembler[int] = Assembler(groupwise=True, group_size=2, strict=True)
    assert assembler.extend([0, 1, 2], ["x", "y", "x"]) == [[0, 2]]
    with pytest.raises(GroupOverflow) as info:
        assembler.add(3, key="x")
    assert (info.value.key, info.value.item) == ("x", 3)
    lenient: Assembler[int] = Assembler(groupwise=True, group_size=2)
    assert lenient.extend([0, 1, 2, 3], ["x", "x", "x", "x"]) == [[0, 1], [2, 3]]


def test_an_open_group_can_be_taken_out():
    assembler: Assembler[int] = Assembler(groupwise=True, group_size=3)
    assembler.extend([0, 1, 2], ["a", "b", "a"])
    assert list(assembler.open_groups) == ["a", "b"]
    assert assembler.pop("a") == [0, 2]
    assert assembler.flush() == [[1]]


@pytest.mark.parametrize("seed", range(10))
def test_a_failed_call_is_split_so_that_only_the_bad_items_fail(seed):
    rng = np.random.default_rng(300 + seed)
    items = list(range(int(rng.integers(1, 20))))
    bad = set(rng.choice(items, size=int(rng.integers(0, 3)), replace=True).tolist()) if items else set()
    batches = []

    def run(batch: list[int]) -> list[int]:
        batches.append(list(batch))
        hit = [i for i in batch if i in bad]
        if hit:
            raise ValueError(f"bad item {hit[0]}")
        return [10 * i for i in batch]

    out = split_on_failure(run, items)
    assert len(out) == len(items)
    for i, outcome in zip(items, out):
        if i in bad:
            assert isinstance(outcome, ValueError) and str(outcome) == f"bad item {i}"
        else:
            assert outcome == 10 * i
    expected_calls = 1 if not bad or len(items) == 1 else 1 + len(items)
    assert len(batches) == expected_calls


def test_a_group_is_never_split_every_member_gets_its_error():
    calls = []

    def run(batch: list[str]) -> list[str]:
        calls.append(batch)
        raise RuntimeError("the group failed")

    out = split_on_failure(run, ["a", "b", "c"], split=False)
    assert calls == [["a", "b", "c"]]
    assert [str(e) for e in out] == ["the group failed"] * 3


def test_group_keys_tell_types_apart_and_members_keep_their_order():
    assert group_key(7) != group_key("7") and group_key(1) != group_key(True) and group_key(7) == group_key(7)
    ids = ["1", 1, "1", 2, None]
    with pytest.raises(LookupError, match="4"):
        group_members(enumerate(ids), missing=lambda i: LookupError(str(i)))
    groups = group_members(enumerate(ids[:4]), missing=LookupError)
    assert list(groups.values()) == [[0, 2], [1], [3]]
    assert list(groups) == [("str", "1"), ("int", 1), ("int", 2)]
