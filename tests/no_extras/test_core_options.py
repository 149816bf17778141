"""Typed reward options (rewardzoo.rewards.options): one declaration gives the errors, the defaults, the table rows
and the weight sources; checked here on small reward classes of the test's own, through the loader as users call it."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import model_validator

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.base import InnerReward, Inputs, PointwiseReward
from rewardzoo.rewards.options import (
    Field,
    Number,
    PositiveInt,
    PositiveNumber,
    RewardOptions,
    WeightPath,
)

PATH = f"{__name__}:Scaled"


class Scaled(PointwiseReward):
    """``scale * len(prompt)`` (a test reward)."""

    inputs = Inputs(("prompt",))

    class Options(RewardOptions):
        scale: PositiveNumber = 2.0
        """Multiplies the length."""
        mode: Literal["chars", "words"] = "chars"
        """What is counted."""
        window: PositiveInt | None = None
        """At most this many units."""
        head: WeightPath | None = None
        """A second weights file."""
        names: list[str] = Field(default_factory=list)
        """Words to drop."""
        low: Number = 0.0
        high: Number = 1.0

        @model_validator(mode="after")
        def _ordered(self) -> Scaled.Options:
            if self.low > self.high:
                raise ConfigError(f"low ({self.low}) is above high ({self.high})", field="kwargs.low")
            return self

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)

    def __call__(self, prompt: list[str], **_: Any) -> list[float]:
        units = [p.split() if self.options.mode == "words" else list(p) for p in prompt]
        return [self.options.scale * len(u[: self.options.window]) for u in units]


def _load(**kwargs: Any) -> Any:
    return rewardzoo.load_reward({"name": "scaled", "reward_model": PATH, "kwargs": kwargs})


def test_options_reach_the_reward_typed_and_defaulted():
    reward = _load(scale="1e-1", mode="words", window=2)
    assert reward.options.scale == pytest.approx(0.1)  # a number PyYAML read as text
    assert reward(prompt=["a b c", "d"]) == pytest.approx([0.2, 0.1])
    assert _load().options.mode == "chars" and _load().options.names == []
    assert Scaled(scale=3)(prompt=["ab"]) == [6.0]  # direct construction takes the same options


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"scael": 1.0}, "kwargs.scael", ["Scaled has no option 'scael'", "did you mean 'scale'?", "options: scale"]),
        ({"scale": 0}, "kwargs.scale", ["must be a number > 0, got 0"]),
        ({"scale": "x"}, "kwargs.scale", ["number", "got 'x'"]),
        ({"scale": float("inf")}, "kwargs.scale", ["finite", "inf"]),
        ({"mode": "lines"}, "kwargs.mode", ["'chars' or 'words'", "got 'lines'"]),
        ({"window": True}, "kwargs.window", ["integer", "got True"]),
        ({"window": 0}, "kwargs.window", ["must be null or an integer > 0, got 0"]),
        ({"low": -1e400}, "kwargs.low", ["finite"]),
        ({"names": "a"}, "kwargs.names", ["list", "got 'a'"]),
        ({"names": ["a", 3]}, "kwargs.names", ["1:", "string", "got 3"]),
        ({"low": 2.0}, "kwargs.low", ["low (2.0) is above high (1.0)"]),
    ],
)
def test_bad_options_name_the_entry_field_type_and_value(kwargs, field, words):
    with pytest.raises(ConfigError) as info:
        _load(**kwargs)
    assert info.value.entry == "scaled" and info.value.field == field
    for word in words:
        assert word in info.value.message


def test_an_unknown_option_is_refused_before_anything_is_built(monkeypatch):
    built = []
    monkeypatch.setattr(Scaled, "__call__", lambda self, **_: built.append(1))
    with pytest.raises(ConfigError, match="has no option 'extra'"):
        _load(extra=1)
    assert built == []


def test_rows_and_schema_come_from_the_declaration():
    rows = {r["name"]: r for r in Scaled.Options.rows()}
    assert list(rows) == ["scale", "mode", "window", "head", "names", "low", "high"]
    assert rows["scale"] == {
        "name": "scale",
        "type": "number",
        "default": 2.0,
        "required": False,
        "description": "Multiplies the length.",
    }
    assert rows["mode"]["type"] == "'chars' | 'words'" and rows["window"]["type"] == "integer | null"
    assert rows["names"]["type"] == "list of string" and rows["names"]["default"] == []
    schema = Scaled.Options.model_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["scale"]["exclusiveMinimum"] == 0


def test_weight_paths_are_declared_not_guessed():
    assert Scaled.Options.weight_fields() == ("head",)
    assert _load(head="/w/head.safetensors").options.weight_sources() == ["/w/head.safetensors"]
    assert Scaled.configured({}, "scale") == 2.0 and Scaled.configured({"scale": 5}, "scale") == 5


def test_an_inner_reward_option_takes_an_entry_or_a_built_reward():
    class Options(RewardOptions):
        base: InnerReward = None

    assert Options.from_kwargs({"base": {"reward_model": "clip_score"}}).base == {"reward_model": "clip_score"}
    built = Scaled()
    assert Options.from_kwargs({"base": built}).base is built
    with pytest.raises(ConfigError) as info:
        Options.from_kwargs({"base": 3}, "Wrapper")
    assert info.value.field == "kwargs.base" and "reward entry" in info.value.message


def test_a_bounded_option_names_its_interval():
    class Options(RewardOptions):
        quality: int = Field(95, ge=1, le=100)
        share: Number = Field(0.5, gt=0, lt=1)

    with pytest.raises(ConfigError, match=r"must be an integer in \[1, 100\], got 101"):
        Options.from_kwargs({"quality": 101})
    with pytest.raises(ConfigError, match=r"must be a number in \(0, 1\), got 1"):
        Options.from_kwargs({"share": 1})


def test_a_union_option_says_what_it_may_be_or_what_its_member_lacks():
    class Rule(RewardOptions):
        regex: str
        low: Number

    class Options(RewardOptions):
        parse: Literal["yes_no"] | Rule | None = None

    with pytest.raises(ConfigError, match=r"must be 'yes_no' \| mapping \| null, got 'number'") as info:
        Options.from_kwargs({"parse": "number"})
    assert info.value.field == "kwargs.parse"
    with pytest.raises(ConfigError, match=r"low: Field required") as info:
        Options.from_kwargs({"parse": {"regex": "(x)"}})
    assert info.value.field == "kwargs.parse"
    assert Options.from_kwargs({"parse": {"regex": "(x)", "low": 1}}).parse == Rule(regex="(x)", low=1.0)


def test_a_bound_inside_an_option_names_the_key_and_the_bound():
    class Options(RewardOptions):
        weights: dict[str, PositiveNumber] = Field(default_factory=dict)

    with pytest.raises(ConfigError, match=r"a: must be greater than 0, got -1") as info:
        Options.from_kwargs({"weights": {"a": -1}})
    assert info.value.field == "kwargs.weights"
