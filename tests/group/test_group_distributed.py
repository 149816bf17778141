"""The groupwise wrappers on 2 gloo ranks (CPU) give the single-process result, each group judged once.

Groups are split across the ranks (samples alternate between them); the distributed processor
(rewardzoo.core.distributed) gathers each group to one rank, which calls the wrapper once per group.
"""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo.core.processor import RewardProcessor

from ..ranks import launch_ranks, load_result
from .dist_worker import ITEMS, SPECS, rank_indices
from .rewards import meta_samples

WORKER = "tests.group.dist_worker"
LAUNCH_TIMEOUT = 90


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    pytest.importorskip("torch.distributed")
    codes, logs, files = launch_ranks(WORKER, tmp_path_factory.mktemp("group_dist"), timeout=LAUNCH_TIMEOUT)
    assert codes == [0, 0], "\n".join(logs)
    return [load_result(f, log) for f, log in zip(files, logs)]


@pytest.fixture(scope="module")
def single():
    proc = RewardProcessor(SPECS)
    return proc, proc(meta_samples(ITEMS))


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("name", [s["name"] for s in SPECS])
def test_two_ranks_equal_one_process(ranks, single, rank, name):
    idx = rank_indices(rank)
    expected = single[1].rewards[name][idx]
    np.testing.assert_allclose(ranks[rank]["rewards"][name], expected, rtol=1e-6, atol=1e-7)
    assert not np.isnan(ranks[rank]["rewards"][name]).any()


def test_each_sample_evaluated_once_across_ranks(ranks, single):
    proc = single[0]
    n = len(ITEMS)
    # one base instance per process, shared by the base stream and the four wrappers over it:
    # n evaluations for the base stream + n for each wrapper (each group once, on its owner rank)
    assert sum(proc.rewards["base"].calls) == 5 * n
    assert ranks[0]["base_inputs"] + ranks[1]["base_inputs"] == 5 * n
    sizes = {}
    for gid, _ in ITEMS:
        sizes[gid] = sizes.get(gid, 0) + 1
    pairs = sum(m * (m - 1) // 2 for m in sizes.values())
    assert ranks[0]["judge_pairs"] + ranks[1]["judge_pairs"] == pairs


def test_pref_grpo_advantages_renormalise_over_every_ranks_samples(ranks, single):
    """Pref-GRPO's ``compute_weighted_advantages`` with ``use_group`` and ``apply_gdpo`` (dispatcher.py 616-702,
    3e787f6) re-computed: on each rank each reward normalised within the rank's groups by ``std(ddof=1) + 1e-8``
    (a group of one member: 0), summed with weight 1, then the sums of both ranks z-scored together."""
    sums = []
    for rank in (0, 1):
        idx = rank_indices(rank)
        groups = np.array([str(ITEMS[i][0]) for i in idx])
        total = np.zeros(len(idx))
        for spec in SPECS:
            values = single[1].rewards[spec["name"]][idx].astype(np.float64)
            for g in set(groups):
                members = groups == g
                if members.sum() > 1:
                    v = values[members]
                    total[members] += (v - v.mean()) / (v.std(ddof=1) + 1e-8)
        sums.append(total)
    everyone = np.concatenate(sums)
    for rank in (0, 1):
        want = (sums[rank] - everyone.mean()) / (everyone.std(ddof=1) + 1e-8)
        np.testing.assert_allclose(ranks[rank]["pref_grpo"], want, rtol=1e-5, atol=1e-5)
