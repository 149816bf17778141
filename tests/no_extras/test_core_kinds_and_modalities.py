"""A reward's kind (alone or in groups): fixed by its class (PointwiseReward, GroupwiseReward) or, for a class
declaring ``PER_INSTANCE`` (``remote``), decided once by each instance; the engine, the card and the listing
agree. Its modality (the medium it scores) is one of one list, used by the cards and ``list --modality``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample
from rewardzoo.cli import main
from rewardzoo.errors import RegistryError
from rewardzoo.registry import CARD_KINDS, builtin, info_from_card, list_rewards, resolve
from rewardzoo.rewards.base import GroupwiseReward, PointwiseReward
from rewardzoo.rewards.info import KINDS, MODALITIES, PER_INSTANCE

from .rewards import EitherKind, PromptLength, path

PROMPTS = ["aaaa", "b", "cc", "dddddd"]
GROUPS = [1, 2, 1, 2]


def _score(kind: str):
    EitherKind.calls.clear()
    proc = RewardProcessor([{"name": "e", "reward_model": path(EitherKind), "batch_size": 1, "kwargs": {"kind": kind}}])
    return proc.rewards["e"], proc([Sample(prompt=p, group_id=g) for p, g in zip(PROMPTS, GROUPS)]).rewards["e"]


def test_an_instance_decided_groupwise_gets_whole_groups_from_the_engine():
    reward, scores = _score("groupwise")
    assert reward.kind == "groupwise" and type(reward).kind == PER_INSTANCE
    assert EitherKind.calls == [2, 2]  # one call per group, whatever batch_size says
    np.testing.assert_allclose(scores, [1.0, -2.5, -1.0, 2.5])


def test_an_instance_decided_pointwise_is_chunked_by_batch_size():
    reward, scores = _score("pointwise")
    assert reward.kind == "pointwise" and EitherKind.calls == [1, 1, 1, 1]
    np.testing.assert_allclose(scores, [0.0, 0.0, 0.0, 0.0])


def test_a_kind_is_decided_once_by_a_per_instance_class_only():
    with pytest.raises(RegistryError, match="did not decide"):
        RewardProcessor([{"name": "e", "reward_model": path(EitherKind), "kwargs": {"decide": False}}])
    reward = EitherKind(kind="groupwise")
    with pytest.raises(TypeError, match="decided already"):
        reward.decide_kind("pointwise")
    with pytest.raises(ValueError, match="kind must be one of"):
        EitherKind(kind="pairwise")
    with pytest.raises(TypeError, match="PromptLength is pointwise by its class"):
        PromptLength().decide_kind("groupwise")


def test_cards_listing_and_classes_agree_on_kinds(capsys):
    assert (*KINDS, PER_INSTANCE) == CARD_KINDS
    remote = builtin()["remote"]
    assert remote.kind == PER_INSTANCE and resolve("remote").kind == PER_INSTANCE
    assert not issubclass(resolve("remote"), (PointwiseReward, GroupwiseReward))  # no subclass lie
    others = {name: info.kind for name, info in builtin().items() if name != "remote"}
    assert set(others.values()) <= set(KINDS)
    assert main(["list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["remote"]["kind"] == PER_INSTANCE and rows["group_rank"]["kind"] == "groupwise"
    assert [r["kind"] for r in list_rewards() if r["name"] == "remote"] == [PER_INSTANCE]


def test_every_card_names_a_medium_and_group_rewards_score_any():
    assert {info.modality for info in builtin().values()} <= set(MODALITIES)
    for name in ("group_rank", "group_normalized", "pairwise_winrate"):
        assert builtin()[name].modality == "any" and builtin()[name].kind == "groupwise"
    meta = {
        "name": "x",
        "implementation": "m:C",
        "summary": "s",
        "modality": "group",
        "kind": "groupwise",
        "extra": None,
        "higher_is_better": True,
        "score_range": [0, 1],
        "download": False,
    }
    with pytest.raises(RegistryError, match="'modality' must be one of"):
        info_from_card(meta, "x.md")


def test_list_filters_by_every_modality_including_any(capsys):
    assert main(["list", "--modality", "any", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"remote", "group_rank", "pairwise_winrate"} <= {r["name"] for r in rows}
    assert all(r["modality"] == "any" for r in rows)
    with pytest.raises(SystemExit):
        main(["list", "--modality", "group"])
    capsys.readouterr()
