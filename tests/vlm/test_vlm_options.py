"""The VLM judges' backend and failure options: one JudgeOptions declaration every judge's Options extends, so an
unknown or invalid option is the same clear error whichever judge it is given to; constructor errors name the
reward as configured."""

from __future__ import annotations

import pydantic
import pytest

pytest.importorskip("transformers")

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.vlm.common import ALL_OPTIONS
from rewardzoo.rewards.models.vlm.options import JudgeOptions, VideoJudgeOptions

JUDGES = {
    "vqascore": "VQAScore",
    "video_vqascore": "VideoVQAScore",
    "unified_reward": "UnifiedReward",
    "vlm_judge": "VLMJudge",
    "video_vlm_judge": "VideoVLMJudge",
    "unified_reward_think": "UnifiedRewardThink",
}
OWN = {
    "vlm_judge": {"template": "x {prompt}", "parse": "yes_no"},
    "video_vlm_judge": {"template": "x {prompt}", "parse": "yes_no"},
}


def _load(name, **kwargs):
    return rewardzoo.load_reward({"name": name, "kwargs": {**OWN.get(name, {}), **kwargs}})


def test_backend_options_are_the_documented_keywords():
    assert ALL_OPTIONS == (
        "backend",
        "endpoint",
        "processor_path",
        "attn_implementation",
        "trust_remote_code",
        "min_pixels",
        "max_pixels",
        "on_failure",
        "num_frames",
        "fps",
    )
    assert set(JudgeOptions.BACKEND_FIELDS) < set(JudgeOptions.model_fields) < set(VideoJudgeOptions.model_fields)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        JudgeOptions().backend = "openai"


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_an_unknown_backend_option_is_the_same_error_for_every_judge(name):
    with pytest.raises(ConfigError) as exc:
        _load(name, bakend="openai")
    message = str(exc.value)
    assert f"entry '{name}'" in message and exc.value.field == "kwargs.bakend"
    assert f"{JUDGES[name]} has no option 'bakend' (did you mean 'backend'?); options: " in message
    listed = message.split("options: ")[1].split(", ")
    assert {"backend", "endpoint", "on_failure", "min_pixels"} <= set(listed)


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_an_invalid_backend_value_is_the_same_error_for_every_judge(name):
    with pytest.raises(ConfigError, match=r"must be 'transformers' or 'openai', got 'vllm'") as exc:
        _load(name, backend="vllm")
    assert exc.value.field == "kwargs.backend" and f"entry '{name}'" in str(exc.value)
    with pytest.raises(ConfigError, match=f"{name}: 'endpoint' needs backend: openai"):
        _load(name, endpoint={"url": "http://x"})


@pytest.mark.parametrize("name", ["vqascore", "video_vqascore"])
def test_a_constructor_error_names_the_reward_by_its_card_name(name):
    with pytest.raises(ConfigError) as exc:
        _load(name, question_template="no placeholder")
    assert f"{name}: the template must be a string with exactly one '{{prompt}}'" in str(exc.value)
    assert "VQAScore:" not in str(exc.value)
