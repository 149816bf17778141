"""The reward contract: what a reward declares, what it receives, what it must return.

A **pointwise** reward scores each input on its own. One call receives a non-empty chunk of at most
``batch_size`` inputs (tails and dataset gating make calls smaller: never assume a full batch).
A **groupwise** reward receives one complete group per call (all samples sharing a ``group_id``);
``batch_size`` does not shape that call.

Calls are keyword-only: the processor passes exactly the fields listed in ``required_fields``, each
as a list with one entry per input (``audio`` also brings ``audio_sample_rate``). A call returns one
finite score per input, in input order: a :class:`RewardOutput`, a sequence of numbers, a NumPy
array or a 1-D tensor. Applicability is the processor's business; a reward never returns NaN for
"not applicable".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..errors import RewardOutputError

#: Fields a reward may declare in ``required_fields``.
KNOWN_FIELDS = ("prompt", "completion", "image", "video", "audio", "condition_images",
                "condition_videos", "metadata", "dataset", "group_id")


@dataclass
class RewardOutput:
    """What a reward call returns: ``rewards`` (one finite score per input) and optional ``extras``
    (named per-input diagnostics, e.g. DNSMOS sub-scores; each the same length as ``rewards``)."""

    rewards: Any
    extras: Mapping[str, Any] = field(default_factory=dict)


class Reward:
    """Common base of :class:`PointwiseReward` and :class:`GroupwiseReward`.

    Class metadata (also in the registry and the model card; a test ties the three together):

    - ``required_fields``: fields the call receives (see :data:`KNOWN_FIELDS`).
    - ``use_tensor_inputs``: False -> images/frames as RGB PIL, audio as float32 NumPy (channels, time);
      True -> image tensors (3, H, W) float in [0, 1], video (T, 3, H, W), audio (channels, time).
    - ``uint8_images``: with tensor inputs, images arrive as uint8 (3, H, W) tensors instead (float
      inputs quantised with ``round(x * 255)``, as the PIL path does); for rewards that resize 8-bit
      pixels, which is ~4x faster on the CPU than resizing floats.
    - ``modality``, ``kind``, ``higher_is_better``, ``score_range`` (inclusive bounds; +-inf allowed),
      ``thread_safe`` (may run on several threads at once), ``extra`` (pip extra it needs, None = core).

    Construction: ``Reward(model_path=None, device="cpu", dtype="float32", **kwargs)``; ``device`` is a
    resolved device string, ``dtype`` a dtype name. Subclasses add keyword arguments of their own (the
    YAML ``kwargs:`` mapping) and load weights in ``__init__``; they never prepare or shard themselves
    for a trainer.
    """

    required_fields: ClassVar[tuple[str, ...]] = ()
    use_tensor_inputs: ClassVar[bool] = False
    uint8_images: ClassVar[bool] = False
    modality: ClassVar[str] = "any"
    kind: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    thread_safe: ClassVar[bool] = True
    extra: ClassVar[str | None] = None

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32") -> None:
        self.model_path = model_path
        self.device = device
        self.dtype_name = dtype
        self.name = type(self).__name__

    @property
    def dtype(self):
        """The torch dtype named by the spec (imports torch on first use)."""
        from ..shared.device import torch_dtype

        return torch_dtype(self.dtype_name)

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput | Sequence[float]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_path={self.model_path!r}, device={self.device!r}, dtype={self.dtype_name!r})"


class PointwiseReward(Reward):
    """A reward that scores each input independently (see the module docstring for the contract)."""

    kind: ClassVar[str] = "pointwise"


class GroupwiseReward(Reward):
    """A reward whose score for a sample depends on the other samples of its group.

    Each call receives one complete group (local or gathered across ranks).
    """

    kind: ClassVar[str] = "groupwise"


def validate_scores(output: Any, n: int, reward: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Check a reward's return value; give (float64 scores of shape (n,), extras).

    Raises :class:`RewardOutputError` naming the reward for a bare scalar, a wrong length or shape,
    non-numeric values, NaN or Inf.
    """
    extras: Mapping[str, Any] = {}
    if isinstance(output, RewardOutput):
        output, extras = output.rewards, output.extras
    scores = _as_vector(output, n, reward, "scores")
    bad = ~np.isfinite(scores)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise RewardOutputError(
            f"returned non-finite scores ({scores[idx[0]]}) for input(s) {idx.tolist()[:8]} of {n}", reward=reward)
    return scores, {key: _as_vector(val, n, reward, f"extras['{key}']") for key, val in extras.items()}


def _as_vector(value: Any, n: int, reward: str, what: str) -> np.ndarray:
    if value is None:
        raise RewardOutputError(f"returned None instead of {n} {what}", reward=reward)
    if hasattr(value, "detach"):  # torch tensor, without importing torch
        value = value.detach().float().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RewardOutputError(f"returned {what} that are not numbers ({type(value).__name__}): {exc}",
                                reward=reward) from None
    if arr.ndim == 0:
        raise RewardOutputError(f"returned a bare scalar instead of {n} {what}", reward=reward)
    if arr.shape != (n,):
        raise RewardOutputError(f"returned {what} of shape {tuple(arr.shape)} for {n} inputs (expected ({n},))",
                                reward=reward)
    return arr
