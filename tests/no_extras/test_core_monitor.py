"""RewardMonitor against NumPy on synthetic runs whose answer is known (planted divergence, saturation,
inseparable groups, conflicting rewards), the ``monitor:`` section's strict parsing, and the JSONL log."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

import rewardzoo
from rewardzoo.core.resolve import load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.monitor import RewardMonitor
from rewardzoo.spec.monitor import MonitorSettings, parse_monitor

N, GROUP = 256, 8
WINDOW = 10
PLANT = 40
STEPS = 80


def result(rewards: dict, weights: dict | None = None, groups=None) -> SimpleNamespace:
    rewards = {k: np.asarray(v, np.float32) for k, v in rewards.items()}
    weights = weights or {k: 1.0 for k in rewards}
    stacked = np.stack([weights[k] * rewards[k].astype(np.float64) for k in rewards])
    total = np.where(np.isnan(stacked).all(0), np.nan, np.nansum(stacked, 0)).astype(np.float32)
    return SimpleNamespace(rewards=rewards, total=total, group_ids=list(groups) if groups is not None else [])


def run(planted: bool, seed: int = 0) -> tuple[list[tuple[int, str]], list[dict]]:
    """60-80 steps of a train reward rising 0.05 std per step; the eval reward rises too, or (planted) falls
    from step PLANT on."""
    rng = np.random.default_rng(seed)
    mon = RewardMonitor(settings={"window": WINDOW, "saturation": None, "inseparable": None, "conflict": None})
    raised, all_metrics = [], []
    for step in range(STEPS):
        train = 0.05 * step + rng.normal(size=N)
        gold_mean = 0.05 * step if not planted or step < PLANT else 0.05 * PLANT - 0.05 * (step - PLANT)
        gold = gold_mean + rng.normal(size=N)
        all_metrics.append(mon.update(result({"proxy": train}), step))
        all_metrics[-1].update(mon.update(result({"gold": gold}), step, split="eval"))
    raised = [(a.step, a.name) for a in mon.alarms]
    return raised, all_metrics


def test_a_planted_proxy_gold_divergence_raises_its_alarm_within_the_window():
    raised, _ = run(planted=True)
    assert [name for _, name in raised] == ["divergence/gold"]
    assert PLANT <= raised[0][0] <= PLANT + WINDOW


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_without_divergence_raises_no_alarm(seed):
    raised, metrics = run(planted=False, seed=seed)
    assert raised == []
    assert not any(k.startswith("alarm/") for m in metrics for k in m)


def test_trends_equal_numpy_polyfit_over_the_window():
    rng = np.random.default_rng(3)
    mon = RewardMonitor(settings={"window": WINDOW})
    means, stds, gmeans, gstds = [], [], [], []
    for step in range(25):
        train = rng.normal(0.1 * step, 1 + 0.01 * step, size=N)
        gold = rng.normal(-0.02 * step, 2.0, size=N)
        mon.update(result({"proxy": train}), step)
        metrics = mon.update(result({"gold": gold}, groups=None), step, split="eval")
        total = train.astype(np.float32).astype(np.float64)
        gold32 = gold.astype(np.float32).astype(np.float64)
        means.append(total.mean()), stds.append(total.std()), gmeans.append(gold32.mean()), gstds.append(gold32.std())
    steps = np.arange(25 - WINDOW, 25)
    tr = np.polyfit(steps, means[-WINDOW:], 1)[0] * WINDOW / np.mean(stds[-WINDOW:])
    ev = np.polyfit(steps, gmeans[-WINDOW:], 1)[0] * WINDOW / np.mean(gstds[-WINDOW:])
    assert metrics["trend/train_total"] == pytest.approx(tr, rel=1e-9)
    assert metrics["trend/eval/gold"] == pytest.approx(ev, rel=1e-9)
    assert metrics["divergence/gold"] == pytest.approx(min(tr, -ev), rel=1e-9)


def test_a_lower_is_better_eval_reward_is_negated_before_its_trend():
    mon = RewardMonitor(settings={"window": 5}, facts={"loss": {"higher_is_better": False}})
    rng = np.random.default_rng(0)
    for step in range(6):
        mon.update(result({"proxy": step + rng.normal(size=64)}), step)
        metrics = mon.update(result({"loss": step + rng.normal(size=64)}), step, split="eval")
    assert metrics["trend/eval/loss"] < 0  # the loss grows: the eval reward gets worse
    assert [a.name for a in mon.alarms] == ["divergence/loss"]


def test_summaries_saturation_groups_and_correlation_equal_numpy():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(N // GROUP), GROUP)
    a = rng.uniform(0.05, 0.95, N)
    a[:40] = 0.995  # within 1% of the upper bound of [0, 1]
    a[40:45] = 0.004  # and of the lower bound
    a[groups == 7] = 0.5  # one group with equal scores
    b = -a + rng.normal(scale=0.1, size=N)
    b[::17] = np.nan
    res = result({"a": a, "b": b}, groups=[f"g{g}" for g in groups])
    mon = RewardMonitor(
        settings={"saturation": 0.1, "inseparable": None, "conflict": -0.5}, facts={"a": {"score_range": (0.0, 1.0)}}
    )
    m = mon.update(res, step=0)
    x = res.rewards["a"].astype(np.float64)
    assert m["train/a/mean"] == np.mean(x) and m["train/a/std"] == np.std(x)
    assert [m[f"train/a/{k}"] for k in ("min", "p5", "p25", "median", "p75", "p95", "max")] == list(
        np.quantile(x, [0, 0.05, 0.25, 0.5, 0.75, 0.95, 1])
    )
    assert m["train/a/saturation"] == np.mean((x <= 0.01) | (x >= 0.99)) == 45 / N
    assert "train/b/saturation" not in m  # no declared range
    per_group = [x[groups == g] for g in range(N // GROUP)]
    assert m["train/a/group_std"] == pytest.approx(np.mean([v.std() for v in per_group]), rel=1e-12)
    flat_groups = [g for g, v in enumerate(per_group) if np.ptp(v) <= 1e-6 * np.std(x)]
    assert flat_groups == [0, 1, 2, 3, 4, 7]  # the 40 saturated scores fill groups 0-4
    assert m["train/a/inseparable"] == len(flat_groups) / (N // GROUP)
    yb = res.rewards["b"].astype(np.float64)
    both = ~np.isnan(yb)
    assert m["train/corr/a/b"] == pytest.approx(np.corrcoef(x[both], yb[both])[0, 1], rel=1e-9)
    assert m["train/b/n"] == both.sum()
    assert set(k for k in m if k.startswith("alarm/")) == {"alarm/saturation/train/a", "alarm/conflict/train/a/b"}
    assert m["alarm/saturation/train/a"] == 45 / N
    # an alarm is an event: the same condition at the next step raises nothing new
    again = mon.update(res, step=1)
    assert not any(k.startswith("alarm/") for k in again)
    assert [a.name for a in mon.alarms] == ["saturation/train/a", "conflict/train/a/b"]


def test_inseparable_alarm_and_the_log(tmp_path):
    log = tmp_path / "monitor.jsonl"
    groups = [f"p{i // 4}" for i in range(16)]
    varied = np.arange(16, dtype=float)
    flat = np.repeat([1.0, 2.0, 3.0, 4.0], 4)
    flat[:4] = [0.0, 1.0, 2.0, 3.0]  # only p0 separates its samples
    with RewardMonitor(settings={"log": str(log), "inseparable": 0.5}) as mon:
        first = mon.update(result({"r": varied}, groups=groups), 0)
        second = mon.update(result({"r": flat}, groups=groups), 1)
    assert first["train/r/inseparable"] == 0.0 and second["train/r/inseparable"] == 0.75
    assert second["alarm/inseparable/train/r"] == 0.75
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    assert lines[1]["metrics"] == second
    assert lines[1]["alarms"][0]["name"] == "inseparable/train/r"
    assert lines[1]["inseparable_groups"] == {"r": ["p1", "p2", "p3"], "total": ["p1", "p2", "p3"]}
    assert lines[0]["inseparable_groups"] == {}


def test_facts_come_from_the_cards_of_the_configured_rewards():
    mon = RewardMonitor({"rewards": ["jpeg_compressibility", "clip_score"], "monitor": {"window": 5}})
    assert mon.settings.window == 5
    from rewardzoo.registry import info

    assert mon.facts["clip_score"].score_range == tuple(info("clip_score").score_range)
    assert mon.facts["jpeg_compressibility"].higher_is_better is info("jpeg_compressibility").higher_is_better
    ranked = RewardMonitor(
        {"rewards": [{"name": "rank", "reward_model": "group_rank", "kwargs": {"base": "jpeg_compressibility"}}]}
    )
    assert ranked.facts["rank"].kind == "groupwise" and ranked.facts["rank"].score_range == (0.0, 1.0)
    m = ranked.update(result({"rank": [0.0, 1.0, 0.0, 1.0]}, groups=[1, 1, 2, 2]), 0)
    assert "train/rank/saturation" not in m and m["train/rank/mean"] == 0.5


def test_the_monitor_section_is_parsed_strictly():
    cfg = load_config({"rewards": ["jpeg_compressibility"], "monitor": {"log": "m.jsonl", "divergence": None}})
    assert cfg.monitor == MonitorSettings(log="m.jsonl", divergence=None)
    assert load_config({"rewards": ["jpeg_compressibility"]}).monitor is None
    with pytest.raises(ConfigError, match=r"monitor\.windw.*did you mean 'window'"):
        parse_monitor({"windw": 5})
    for key, value in [
        ("window", 2),
        ("window", 1.5),
        ("saturation", 1.5),
        ("saturation", True),
        ("conflict", -2),
        ("divergence", -1),
        ("margin", 0),
        ("margin", None),
        ("log", 3),
        ("divergence", math.inf),
    ]:
        with pytest.raises(ConfigError, match=rf"monitor\.{key}"):
            parse_monitor({key: value})
    with pytest.raises(ConfigError, match="field 'monitor': must be a mapping"):
        load_config({"rewards": ["jpeg_compressibility"], "monitor": [1]})


def test_bad_updates_are_typed_errors():
    mon = RewardMonitor()
    with pytest.raises(ConfigError, match="split"):
        mon.update(result({"r": [1.0]}), 0, split="test")
    with pytest.raises(InputError, match="step"):
        mon.update(result({"r": [1.0]}), "0")
    bad = result({"r": [1.0, 2.0]})
    bad.rewards["r"] = np.array([1.0, np.inf], np.float32)
    with pytest.raises(InputError, match=r"infinite.*sample 1|sample 1.*infinite") as exc:
        mon.update(bad, 0)
    assert exc.value.field == "rewards.r"
    with pytest.raises(InputError, match="RewardResult"):
        mon.update(object(), 0)


def test_a_real_processor_result_feeds_the_monitor():
    from rewardzoo import Sample

    processor, _ = rewardzoo.build_processors({"rewards": ["jpeg_compressibility"]})
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (16, 16, 3), dtype=np.uint8) for _ in range(4)]
    res = processor([Sample(image=im, group_id=i // 2) for i, im in enumerate(images)])
    m = RewardMonitor({"rewards": ["jpeg_compressibility"]}).update(res, 0)
    x = res.rewards["jpeg_compressibility"].astype(np.float64)
    assert m["train/jpeg_compressibility/mean"] == np.mean(x)
    assert m["train/jpeg_compressibility/group_std"] == pytest.approx(np.mean([x[:2].std(), x[2:].std()]), rel=1e-12)


def _collapse_run(contrast_of, steps=10, seed=0):
    """A train reward (ImageBind's prompt-blind pair) rising 0.3 std per step over 2 groups of 4 videos (4 frames of
    32 x 32) whose pixels spread around grey by ``contrast_of(step)``."""
    rng = np.random.default_rng(seed)
    mon = RewardMonitor(
        {"rewards": ["imagebind_score", "clap_score"]},
        settings={"window": 5, "saturation": None, "inseparable": None, "conflict": None},
    )
    raised, metrics, shots = [], [], []
    groups = [0] * 4 + [1] * 4
    for step in range(steps):
        noise = rng.uniform(-1, 1, size=(8, 4, 32, 32, 3))
        videos = np.clip(127.5 + 127.5 * contrast_of(step) * noise, 0, 255).astype(np.uint8)
        scores = {"imagebind_score": 0.3 * step + rng.normal(size=8), "clap_score": rng.normal(size=8)}
        samples = [{"video": v} for v in videos]
        metrics.append(mon.update(result(scores, groups=groups), step, samples=samples))
        raised += [(a.step, a.name) for a in mon.alarms if a.step == step]
        shots.append(videos)
    return raised, metrics, shots


def _diversity(videos, groups):
    """Independent: luma of each frame, 2 x 2 block means (16 x 16 of a 32 x 32 frame), mean pairwise distance over
    sqrt(length) within each group, mean over the groups."""
    luma = videos.astype(np.float64) / 255 @ np.array([0.299, 0.587, 0.114])
    desc = luma.reshape(len(videos), 4, 16, 2, 16, 2).mean(axis=(3, 5)).reshape(len(videos), -1)
    per_group = []
    for g in sorted(set(groups)):
        members = [desc[i] for i in range(len(videos)) if groups[i] == g]
        pairs = [np.linalg.norm(a - b) / math.sqrt(a.size) for i, a in enumerate(members) for b in members[i + 1 :]]
        per_group.append(np.mean(pairs))
    return float(np.mean(per_group))


def test_collapse_alarm_when_a_prompt_blind_pair_rises_while_video_diversity_falls():
    raised, metrics, shots = _collapse_run(lambda step: 1.0 - step / 10)
    assert math.isclose(metrics[0]["train/video_diversity"], _diversity(shots[0], [0] * 4 + [1] * 4), rel_tol=1e-9)
    names = {name for _, name in raised}
    assert "collapse/imagebind_score/video" in names
    assert not any("clap_score" in n for n in names)  # only rewards whose card says prompt_blind_when are watched
    assert all("collapse/imagebind_score/audio" not in m for m in metrics)  # no audio, no audio diversity


def test_no_collapse_alarm_while_diversity_holds():
    raised, metrics, _ = _collapse_run(lambda step: 1.0)
    assert not any(name.startswith("collapse/") for _, name in raised)
    assert metrics[-1]["collapse/imagebind_score/video"] < 0.25  # measured, below the threshold


def test_samples_must_match_the_scores():
    mon = RewardMonitor(settings={"window": 5})
    with pytest.raises(InputError, match="samples"):
        mon.update(result({"a": [1.0, 2.0]}, groups=[0, 0]), 0, samples=[{}])
