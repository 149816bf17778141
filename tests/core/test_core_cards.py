"""Registry, class metadata, model cards and example configs agree, so none can drift."""

from __future__ import annotations

import math

import pytest
import yaml

from rewardzoo import load_config
from rewardzoo.registry import REGISTRY, extra_installed, resolve
from rewardzoo.resources import data_dir, read_card

NAMES = sorted(REGISTRY)
SECTIONS = ("What it measures", "Intended use", "Inputs", "Limitations", "How to configure", "Speed")


@pytest.mark.parametrize("name", NAMES)
def test_card_front_matter_matches_registry(name):
    meta, body = read_card(name)
    entry = REGISTRY[name]
    assert meta["name"] == name
    assert meta["modality"] == entry.modality and meta["kind"] == entry.kind
    assert meta["extra"] == entry.extra
    assert meta["higher_is_better"] is entry.higher_is_better
    assert [float(x) for x in meta["score_range"]] == list(entry.score_range)
    assert meta.get("license") and meta.get("reference", {}).get("repository")
    for section in SECTIONS:
        assert f"## {section}" in body, f"card {name} lacks the section '{section}'"
    snippet = body.split("## How to configure", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    load_config(yaml.safe_load(snippet))  # the card's YAML snippet is a valid config


@pytest.mark.parametrize("name", NAMES)
def test_class_metadata_matches_registry(name):
    entry = REGISTRY[name]
    if not extra_installed(entry.extra):
        pytest.skip(f"extra '{entry.extra}' not installed")
    cls = resolve(name)
    assert cls.kind == entry.kind and cls.modality == entry.modality and cls.extra == entry.extra
    assert cls.higher_is_better is entry.higher_is_better
    assert tuple(cls.score_range) == entry.score_range
    lo, hi = cls.score_range
    assert lo < hi and not (math.isnan(lo) or math.isnan(hi))
    assert isinstance(cls.thread_safe, bool) and isinstance(cls.use_tensor_inputs, bool)
    assert cls.__doc__ and len(cls.__doc__.strip()) > 40, "public reward classes document formula, inputs, range"


@pytest.mark.parametrize("name", NAMES)
def test_every_reward_has_an_example_config_that_uses_it(name):
    path = data_dir("configs") / f"{name}.yaml"
    assert path.is_file(), f"configs/{name}.yaml is missing"
    cfg = load_config(path)
    assert any(s.reward_model.lower() == name for s in cfg.rewards + cfg.eval_rewards)


def test_no_card_without_a_registry_entry():
    cards = {p.stem for p in data_dir("model_cards").glob("*.md")}
    assert cards == set(NAMES)


def test_demo_config_covers_every_reward_that_needs_no_download():
    demo = {s.reward_model for s in load_config(data_dir("configs") / "demo.yaml").rewards}
    assert demo == {name for name, e in REGISTRY.items() if not e.download}
