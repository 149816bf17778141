"""Groupwise rewards across 2 gloo ranks (CPU) against the single-process result, and failure handling.

One launch of two processes runs every scenario (dist_worker.py); the tests read its results.
"""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo import RewardProcessor

from ..ranks import launch_ranks, load_result
from .rewards import (
    DIST_GIDS,
    CenteredJpeg,
    CenteredValue,
    dist_samples,
    dist_specs,
    rank_indices,
)

WORKER = "tests.execution.dist_worker"
LAUNCH_TIMEOUT = 120


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    pytest.importorskip("torch.distributed")
    codes, logs, files = launch_ranks(WORKER, tmp_path_factory.mktemp("dist"), timeout=LAUNCH_TIMEOUT)
    results = [load_result(f, log) for f, log in zip(files, logs)]
    assert codes[0] == 0, logs[0]
    assert codes[1] == 3, logs[1]  # rank 1 leaves on purpose in the last scenario
    return results


@pytest.fixture(scope="module")
def reference():
    """The single-process result over the whole batch."""
    return RewardProcessor(dist_specs())(dist_samples())


def _assert_rank_matches(result, reference, rank):
    idx = rank_indices(rank)
    assert set(result["rewards"]) == set(reference.rewards)
    for name, values in reference.rewards.items():
        np.testing.assert_array_equal(result["rewards"][name], values[idx], err_msg=f"{name} on rank {rank}")
    np.testing.assert_array_equal(result["total"], reference.total[idx])
    assert result["applied"] == [reference.applied[i] for i in idx]
    for name, extras in reference.extras.items():
        for key, values in extras.items():
            np.testing.assert_array_equal(result["extras"][name][key], values[idx], err_msg=f"{name}.{key}")


@pytest.mark.parametrize("rank", [0, 1])
def test_cross_rank_scores_equal_the_single_process_result(ranks, reference, rank):
    _assert_rank_matches(ranks[rank]["sync"], reference, rank)
    # the groupwise streams really saw whole groups: group sizes reported by the reward
    sizes = reference.extras["centered"]["group_size"][rank_indices(rank)]
    assert np.nanmax(sizes) > 1


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("round_", [0, 1])
def test_async_runner_across_ranks_equals_the_single_process_result(ranks, reference, rank, round_):
    _assert_rank_matches(ranks[rank]["async"][round_], reference, rank)


@pytest.mark.parametrize("rank", [0, 1])
def test_results_across_ranks_are_the_rows_of_the_single_process_result(ranks, reference, rank):
    rows = ranks[rank]["ready_rows"]
    idx = rank_indices(rank)
    assert [i for i, _ in rows] == list(range(len(idx)))
    for (i, row), g in zip(rows, idx):
        for name, values in reference.rewards.items():
            np.testing.assert_array_equal(row["rewards"][name], values[[g]], err_msg=f"{name}, sample {i}")
        np.testing.assert_array_equal(row["total"], reference.total[[g]])
        assert row["applied"] == [reference.applied[g]]
    _assert_rank_matches(ranks[rank]["ready_final"], reference, rank)  # finalize after reading: the same


def test_each_group_is_scored_exactly_once(ranks):
    scored = [group for r in range(2) for _, group in ranks[r]["scored"]]
    keys = [(type(g[0]).__name__, g[0]) for g in scored]
    assert len(keys) == len(set(keys))  # no group twice
    applicable = {(type(g).__name__, g) for i, g in enumerate(DIST_GIDS) if dist_samples()[i].dataset != "video"}
    assert set(keys) == applicable  # every applicable group once; 7 and "7" are different groups
    pids = {pid for r in range(2) for pid, _ in ranks[r]["scored"]}
    assert len(pids) == 2  # both ranks took a share of the groups


def test_only_declared_fields_group_id_and_dataset_travel(ranks):
    declared = {"centered": CenteredValue.inputs.fields, "centered_jpeg": CenteredJpeg.inputs.fields}
    payloads = []
    for r in range(2):
        for status, item in ranks[r]["sent"][: ranks[r]["rounds_sync"]]:
            assert status == "ok"
            for name, groups in item.items():
                if isinstance(groups, dict):  # the fields round: stream -> group key -> payload
                    payloads.extend((name, p) for p in groups.values())
    assert {name for name, _ in payloads} == set(declared)  # split groups of both streams travelled
    for name, payload in payloads:
        assert set(payload) == {"index", "fields", "dataset", "group_id"}
        assert set(payload["fields"]) == set(declared[name])  # never the prompt, image only if declared


def test_a_failing_reward_on_one_rank_fails_every_rank_promptly(ranks):
    own, other = ranks[1]["fail_group"], ranks[0]["fail_group"]
    assert own["type"] == "RewardExecutionError" and own["reward"] == "failing"
    assert "cannot be scored here" in own["message"]
    assert other["type"] == "RemoteRankError" and other["rank"] == 1 and other["reward"] == "failing"
    assert "rank 1 failed" in other["message"] and "cannot be scored here" in other["message"]


def test_bad_input_on_one_rank_fails_every_rank_at_finalize(ranks):
    own, other = ranks[1]["fail_input"], ranks[0]["fail_input"]
    assert own["type"] == "InputError" and "field 'prompt'" in own["message"] and "sample 0" in own["message"]
    assert other["type"] == "RemoteRankError" and other["rank"] == 1 and other["reward"] == "rec"


def test_a_malformed_sample_on_one_rank_fails_every_rank_in_the_sync_call(ranks):
    own, other = ranks[1]["fail_malformed"], ranks[0]["fail_malformed"]
    assert own["type"] == "InputError" and "field 'colour'" in own["message"] and "sample 0" in own["message"]
    assert other["type"] == "RemoteRankError" and other["rank"] == 1 and "colour" in other["message"]


@pytest.mark.parametrize("rank", [0, 1])
def test_collectives_stay_matched_after_failures(ranks, reference, rank):
    _assert_rank_matches(ranks[rank]["after_failures"], reference, rank)


def test_a_dead_peer_makes_the_survivor_fail_not_hang(ranks):
    died = ranks[0]["peer_died"]
    assert died is not None and died["type"] == "RewardExecutionError"
    assert "cross-rank reward exchange failed" in died["message"]
    assert died["elapsed"] < 20 + 5  # within the process group's timeout (20 s) at worst


def test_rank_ordered_loading_and_one_construction_per_identity(ranks):
    ((_start0, end0),) = ranks[0]["built"]  # train and eval SlowInit specs share one instance
    ((start1, _end1),) = ranks[1]["built"]
    assert start1 >= end0  # rank 1 started only after rank 0 had finished
    assert ranks[0]["constructions"] == ranks[1]["constructions"] == 2  # SlowInit + one jpeg
