"""verl-omni's reward loop: ``compute_score`` for its ``VisualRewardManager`` and ``MultiVisualRewardManager``.

verl-omni calls ``[async] compute_score(data_source, solution_image, ground_truth, extra_info, **kwargs)`` once per
sample, concurrently: ``solution_image`` a ``uint8`` tensor in [0, 255], an image ``(C, H, W)`` or a video
``(T, C, H, W)``; audio, when the rollout makes it, in ``extra_info["audio"]`` (with ``extra_info["sample_rate"]``
or ``"audio_sample_rate"``). One rewardzoo config for the run (``custom_reward_function.reward_kwargs``) or one
per ``reward.reward_functions`` key (the entry's other keys are forwarded as keywords)::

    reward:
      reward_manager: {name: MultiVisualRewardManager, ...}
      reward_functions:
        aesthetic:
          path: pkg://rewardzoo.integrations.verl_omni
          name: compute_score
          weight: 1.0
          required: true            # a scorer error fails the step instead of scoring 0 (see below)
          rewards: [{name: aesthetic, reward_model: laion_aesthetic, model_path: ...}]
          prompt_key: prompt        # extra_info key of the prompt (default: prompt)
          group_key: null           # extra_info key of the group (for groupwise rewards) with group_size

With ``output_type: latent`` (verl-omni's rollout returning latents) the floating-point response, or
``extra_info["latents_clean"]`` beside pixels, is the sample's ``latent``: latent rewards read it, and the config's
``decode:`` stage decodes it once for every pixel reward (the samples that arrive together decoded as one batch).

The answer is ``{"score": total, <reward>: score, ...}`` (as :mod:`rewardzoo.integrations.verl`); calls that
arrive together are scored in batches (:mod:`rewardzoo.integrations.gather`). A rewardzoo error is raised,
never turned into a score: ``VisualRewardManager`` raises it; ``MultiVisualRewardManager`` (at a1139baf) maps an
error of an entry without ``required: true`` to 0, so set ``required: true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InputError
from ..spec.sample import Sample
from .gather import GROUP_TIMEOUT_S, MAX_WAIT_S, plain_value, score_dict, scorer_for


def _media(solution_image: Any) -> dict[str, Any]:
    """``image`` (H, W, C) or ``video`` (T, H, W, C) uint8 arrays from verl-omni's CHW / TCHW uint8 tensor; its
    floating-point response (``output_type: latent``) as the sample's ``latent``."""
    import numpy as np

    if hasattr(solution_image, "is_floating_point") and solution_image.is_floating_point():
        return {"latent": solution_image.detach()}

    array = solution_image.detach().cpu().numpy() if hasattr(solution_image, "detach") else np.asarray(solution_image)
    if array.dtype != np.uint8 or array.ndim not in (3, 4) or array.shape[-3] not in (1, 3):
        raise InputError(
            f"verl-omni passes a uint8 image (C, H, W) or video (T, C, H, W) in [0, 255]; got "
            f"{array.dtype} of shape {array.shape}",
            field="image",
        )
    if array.ndim == 3:
        return {"image": np.ascontiguousarray(array.transpose(1, 2, 0))}
    return {"video": np.ascontiguousarray(array.transpose(0, 2, 3, 1))}


def omni_sample(
    data_source: Any,
    solution_image: Any,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None,
    prompt_key: str = "prompt",
    group_key: str | None = None,
) -> tuple[Sample, int | None]:
    """The rewardzoo sample (and trainer step, ``extra_info["global_steps"]``) of one verl-omni call."""
    info = dict(extra_info or {})
    fields: dict[str, Any] = _media(solution_image) if solution_image is not None else {}
    if info.get(prompt_key) is not None:
        fields["prompt"] = str(info[prompt_key])
    latent = info.get("latents_clean")  # verl-omni's clean latent beside the pixels (its latent scorer reads it)
    if latent is not None and "latent" not in fields:
        fields["latent"] = latent[0] if getattr(latent, "ndim", 0) == 4 and latent.shape[0] == 1 else latent
    if info.get("audio") is not None:
        fields["audio"] = info["audio"]
        fields["audio_sample_rate"] = info.get("audio_sample_rate", info.get("sample_rate"))
    if group_key is not None:
        if info.get(group_key) is None:
            raise InputError(f"extra_info has no '{group_key}' (group_key)", field="group_id")
        gid = info[group_key]
        fields["group_id"] = int(gid) if isinstance(gid, float) and gid.is_integer() else gid
    if isinstance(data_source, str):
        fields["dataset"] = data_source
    meta = {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) and k != "audio"}
    if isinstance(ground_truth, (str, int, float, bool)):
        meta["ground_truth"] = ground_truth
    fields["metadata"] = meta or None
    return Sample(**fields), info.get("global_steps")


async def compute_score(
    data_source: Any = None,
    solution_image: Any = None,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    rewards: Any = None,
    split: str = "train",
    prompt_key: str = "prompt",
    group_key: str | None = None,
    max_wait_ms: float = MAX_WAIT_S * 1000,
    group_size: int | None = None,
    group_timeout_s: float = GROUP_TIMEOUT_S,
    **_: Any,
) -> dict[str, float]:
    """One sample's ``{"score": total, <reward>: score, ...}`` for verl-omni (see the module docstring). Keywords
    verl-omni adds for its own reward models (``reward_router_address``, ...) are accepted and unused."""
    scorer = scorer_for(
        plain_value(rewards), split, max_wait_ms=max_wait_ms, group_size=group_size, group_timeout_s=group_timeout_s
    )
    sample, step = omni_sample(data_source, solution_image, ground_truth, extra_info, prompt_key, group_key)
    return score_dict(await scorer.score(sample, step))
