"""Trainer adapters: TRL GRPOTrainer reward_funcs and DDPO reward_fn protocols (../shared/reference/protocols.md)."""

from __future__ import annotations

import inspect
import io

import numpy as np
import pytest
from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.integrations import ddpo_reward_fn, trl_reward_funcs

from ..optional import needs_torch, torch
from .rewards import MetadataValue, PromptLength, path


def _kb(chw: np.ndarray) -> float:
    buf = io.BytesIO()
    Image.fromarray((chw * 255).round().astype(np.uint8).transpose(1, 2, 0)).save(buf, format="JPEG", quality=95)
    return len(buf.getvalue()) / 1000


CONFIG = {
    "rewards": [
        {"name": "len_math", "reward_model": path(PromptLength), "applicable_datasets": ["math"], "weight": 2.0},
        {"name": "meta", "reward_model": path(MetadataValue), "weight": 0.5},
    ]
}


def test_trl_functions_follow_the_protocol():
    funcs, weights = trl_reward_funcs(CONFIG)
    assert [f.__name__ for f in funcs] == ["len_math", "meta"] and weights == [2.0, 0.5]
    assert torch is None or all(not isinstance(f, torch.nn.Module) for f in funcs)
    prompts = ["what is 2+2?", [{"role": "user", "content": "hi"}], "q3"]
    completions = ["4", [{"role": "assistant", "content": "hello"}], "x"]
    kwargs = dict(
        completion_ids=[[1], [2], [3]], dataset=["math", "chat", "math"], value=[1, 2, 3], trainer_state=object()
    )
    # TRL passes the dataset columns; a `metadata`-less dataset's extra columns become the metadata JSON
    meta_func = funcs[1]
    assert meta_func(prompts=prompts, completions=completions, **kwargs) == [1.0, 2.0, 3.0]
    lengths = funcs[0](prompts=prompts, completions=completions, **kwargs)
    assert lengths == [float(len("what is 2+2?")), None, 2.0]
    assert "prompts" in str(inspect.signature(funcs[0]))


@pytest.mark.parametrize("column, values", [("group_id", [1, 2.5]), ("dataset", ["math", 3])])
def test_trl_bad_column_value_names_the_sample(column, values):
    funcs, _ = trl_reward_funcs(CONFIG)
    with pytest.raises(InputError, match=f"sample 1, field '{column}'"):
        funcs[1](prompts=["a", "b"], completions=["x", "y"], **{column: values})


def test_trl_concurrent_functions_answer_and_fail_like_the_plain_ones():
    import asyncio

    plain, _ = trl_reward_funcs(CONFIG)
    concurrent, _ = trl_reward_funcs(CONFIG, concurrent=True)
    assert [f.__name__ for f in concurrent] == ["len_math", "meta"]
    assert all(inspect.iscoroutinefunction(f) for f in concurrent)
    kwargs = dict(
        prompts=["what is 2+2?", "hi"],
        completions=["4", "x"],
        completion_ids=[[1], [2]],
        dataset=["math", "chat"],
        value=[1, 2],
    )

    async def gather(**kw):
        return await asyncio.gather(*(f(**kw) for f in concurrent))

    assert asyncio.run(gather(**kwargs)) == [f(**kwargs) for f in plain] == [[12.0, None], [1.0, 2.0]]
    with pytest.raises(InputError, match="sample 1, field 'dataset'"):
        asyncio.run(gather(**{**kwargs, "dataset": ["math", 3]}))


def test_trl_rejects_per_dataset_weights():
    with pytest.raises(ConfigError, match="entry 'w', field 'weight'"):
        trl_reward_funcs({"rewards": [{"name": "w", "reward_model": path(PromptLength), "weight": {"a": 1.0}}]})


@needs_torch
def test_ddpo_reward_fn_returns_weighted_total_for_float_batches():
    fn = ddpo_reward_fn(
        {
            "rewards": [
                {"name": "jpeg_incompressibility", "weight": 0.5},
                {"name": "jpeg_compressibility", "weight": 10.0},
            ]
        }
    )
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.random((3, 3, 32, 40)).astype(np.float32))
    rewards, meta = fn(images, ["a", "b", "c"], [{}, {}, {}])
    kb = np.array([_kb(img) for img in images.numpy()])
    np.testing.assert_allclose(rewards, 0.5 * kb - 10.0 * kb / 500, rtol=1e-5)
    assert torch.as_tensor(rewards).shape == (3,)
    np.testing.assert_allclose(meta["rewards"]["jpeg_incompressibility"], kb, rtol=1e-6)


@needs_torch
def test_ddpo_reward_fn_refuses_unscored_samples_and_length_mismatch():
    fn = ddpo_reward_fn({"rewards": [{"name": "jpeg_incompressibility", "applicable_datasets": ["x"]}]})
    with pytest.raises(InputError, match="no configured reward applies"):
        fn(torch.rand(2, 3, 8, 8), ["a", "b"], [{}, {}])
    with pytest.raises(InputError, match="2 images, 1 prompts"):
        fn(torch.rand(2, 3, 8, 8), ["a"], [{}])
