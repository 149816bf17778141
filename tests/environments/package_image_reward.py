"""The ``image-reward`` package's own ImageReward, run in a worker whose environment satisfies its real imports
(transformers 4, timm 0.6.13, OpenAI ``clip`` from clip-anytorch, fairscale, diffusers): the tiny model of
tests/verifiers/image_reward_tiny.py behind rewardzoo's reference wrapper (the package's ``score``), with the
package imported through its published ``__init__`` (no shims) and the transformers version it ran with as an
extra."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardzoo.rewards.base import RewardOutput
from tests.verifiers.image_reward_tiny import TinyReferenceImageReward


class PackageImageReward(TinyReferenceImageReward):
    def load_model(self, model_path: str | None, device: str) -> Any:
        import ImageReward  # noqa: F401  as published: its __init__ imports clip and ReFL (diffusers)

        return super().load_model(model_path, device)

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **kwargs: Any) -> RewardOutput:
        import transformers

        out = super().__call__(image, prompt, **kwargs)
        return RewardOutput(out.rewards, {**out.extras, "transformers": [transformers.__version__] * len(prompt)})
