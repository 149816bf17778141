"""The model card is each reward's one record: its front matter is valid, the class agrees with it
without restating it, and its example config is a working config for that reward."""

from __future__ import annotations

import pytest
import yaml

from rewardzoo import load_config
from rewardzoo.catalog.resources import card_files, data_dir
from rewardzoo.registry import (
    CARD_FACTS,
    CARD_KINDS,
    builtin,
    example_config,
    extra_installed,
    read_card,
    resolve,
)
from rewardzoo.rewards.base import Inputs, Reward

NAMES = sorted(builtin())
SECTIONS = ("What it measures", "Intended use", "Inputs", "Limitations", "How to configure", "Speed")


def test_every_card_is_indexed_under_its_file_name():
    assert NAMES and {p.stem for p in card_files()} == set(NAMES)
    for name, info in builtin().items():
        assert info.card.stem == name and info.source == "rewardzoo"


@pytest.mark.parametrize("name", NAMES)
def test_card_front_matter_and_sections(name):
    meta, body = read_card(name)
    info = builtin()[name]
    assert meta["name"] == name and info.summary and ":" in info.implementation
    assert info.kind in CARD_KINDS and info.score_range[0] < info.score_range[1]
    assert meta.get("license") and meta.get("reference", {}).get("repository")
    for section in SECTIONS:
        assert f"## {section}" in body, f"card {name} lacks the section '{section}'"


@pytest.mark.parametrize("name", NAMES)
def test_card_example_config_is_a_config_that_uses_the_reward(name):
    cfg = load_config(example_config(name))
    assert any(s.reward_model.lower() == name for s in cfg.rewards + cfg.eval_rewards)


@pytest.mark.parametrize("name", NAMES)
def test_class_agrees_with_the_card_and_does_not_restate_it(name):
    info = builtin()[name]
    if not extra_installed(info.extra, info.add_ons):
        pytest.skip(f"extra '{info.extra}' not installed")
    cls = resolve(name)
    assert isinstance(cls, type) and issubclass(cls, Reward)
    assert cls.kind == info.kind
    for klass in cls.__mro__[: cls.__mro__.index(Reward)]:
        restated = [fact for fact in CARD_FACTS if fact in vars(klass)]
        assert not restated, f"{klass.__qualname__} restates {restated}, which its model card states"
    assert isinstance(cls.inputs, Inputs) and isinstance(cls.thread_safe, bool)
    assert cls.__doc__ and len(cls.__doc__.strip()) > 40, "public reward classes document formula, inputs, range"


@pytest.mark.parametrize("name", NAMES)
def test_prompt_conditioned_agrees_with_the_fields_the_class_reads(name):
    """The lint's ``prompt_conditioned`` is what the class declares: the prompt (or, for geneval and tifa_vqa,
    the metadata that holds what the prompt asks for: its parsed spec, its questions); unstated only for
    composites whose base decides it and for ``remote``."""
    info = builtin()[name]
    if not extra_installed(info.extra, info.add_ons):
        pytest.skip(f"extra '{info.extra}' not installed")
    fields = set(resolve(name).inputs.fields)
    if info.prompt_conditioned is None:
        assert fields <= {"group_id"} or info.kind == "per-instance"
    else:
        assert info.prompt_conditioned == bool(
            fields & ({"prompt", "metadata"} if name in ("geneval", "tifa_vqa") else {"prompt"})
        )


def test_demo_config_covers_every_reward_that_needs_no_download():
    """The demo config is generated from the cards (scripts/build_docs.py): every card that needs no download,
    unless its card says ``demo: false``."""
    demo = {s.reward_model for s in load_config(data_dir("configs") / "demo.yaml").rewards}
    left_out = {name for name in builtin() if read_card(name)[0].get("demo") is False}
    assert left_out == {"remote"}  # it needs a server
    assert demo == {name for name, e in builtin().items() if not e.download} - left_out


def test_a_card_with_a_bad_front_matter_is_refused_with_its_file_and_key(tmp_path):
    from rewardzoo.errors import RegistryError
    from rewardzoo.registry import info_from_card

    meta, _ = read_card("loudness")
    for key, value, match in (
        ("score_range", [1, 0], "low < high"),
        ("kind", "pairwise", "kind"),
        ("higher_is_better", "yes", "higher_is_better"),
        ("implementation", "x.y", "module:Class"),
    ):
        with pytest.raises(RegistryError, match=match) as exc:
            info_from_card({**meta, key: value}, tmp_path / "card.md")
        assert "card.md" in str(exc.value)
    with pytest.raises(RegistryError, match="summary' is missing"):
        info_from_card({k: v for k, v in meta.items() if k != "summary"}, tmp_path / "card.md")
    yaml.safe_dump(meta)  # the record is plain YAML data
