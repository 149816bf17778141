"""Judges' reference pairings are rows of their cards' front matter (``pairing:``), read by
:mod:`rewardzoo.catalog.pairings` (tests/vlm/test_vlm_pairings.py checks what they say against the classes)."""

from __future__ import annotations

import pytest

from rewardzoo.catalog.pairings import Pairing, card_pairings, pairings
from rewardzoo.errors import RegistryError
from rewardzoo.registry import builtin, read_card

ROW = {
    "setting": "reference",
    "source": "repo abc",
    "model": "m",
    "template": "t",
    "decoding": "greedy",
    "image_bounds": "as given",
}


def test_every_judge_card_states_its_rows_with_one_default():
    found = pairings()
    judges = {n for n, i in builtin().items() if i.implementation.startswith("rewardzoo.rewards.vlm.")}
    assert set(found) <= set(builtin()) and len(found) >= 18
    assert set(found) == judges, "a VLM judge's card states no pairing rows"
    for name, rows in found.items():
        assert [r.setting for r in rows].count("default") == 1, name


def test_rows_come_from_the_card_as_written():
    meta, _ = read_card("unified_reward")
    rows = card_pairings(meta, "unified_reward.md")
    assert rows[0] == Pairing(**meta["pairing"][0])
    assert [r.preset for r in rows] == [None, None, None, "flow_grpo"]


@pytest.mark.parametrize(
    "rows, match",
    [
        ([], "non-empty list"),
        ("x", "non-empty list"),
        (["x"], r"pairing\[0\] must be a mapping"),
        ([{k: v for k, v in ROW.items() if k != "model"}], r"lacks \['model'\]"),
        ([{**ROW, "modle": "m"}], r"unknown keys \['modle'\]"),
        ([{**ROW, "model": 3}], r"must be text: \['model'\]"),
    ],
)
def test_a_bad_row_is_refused_naming_the_card(rows, match):
    with pytest.raises(RegistryError, match=match) as info:
        card_pairings({"pairing": rows}, "judge.md")
    assert "judge.md" in str(info.value)


def test_a_card_without_rows_has_none():
    assert card_pairings({"name": "x"}, "x.md") == ()
