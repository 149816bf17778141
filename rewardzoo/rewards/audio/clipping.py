"""Audio clipping: the share of samples that sit at or beyond full scale."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveNumber, RewardOptions

#: Default threshold: the largest positive 16-bit sample, 32767 / 32768, so 16-bit audio pinned at
#: either rail counts as clipped (float audio at +-1.0 or beyond counts too).
FULL_SCALE_16BIT = 32767 / 32768


class AudioClipping(PointwiseReward):
    """Score = ``1 - mean(|x| >= threshold)`` over all samples of all channels.

    Float samples are on the [-1, 1] scale, int16/int32 inputs are scaled to it. Inputs: ``audio`` at any rate,
    channels kept (a clipped channel is not hidden by a mixdown); options: :class:`Options`. Range [0, 1];
    1 = no sample at full scale. Extra: ``clipped_fraction``.
    """

    inputs = Inputs(("audio",), mono=False)

    class Options(RewardOptions):
        threshold: PositiveNumber = FULL_SCALE_16BIT
        """A sample with ``|x| >= threshold`` counts as clipped (full scale = 1.0); default 32767/32768, 16-bit
        full scale."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.threshold = self.options.threshold

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=None, mono=False)
        threshold = np.float32(self.threshold)
        fraction = np.array([_count_at_least(c, threshold) / c.size for c in clips])
        return RewardOutput(1.0 - fraction, extras={"clipped_fraction": fraction})


def _count_at_least(clip: np.ndarray, threshold: np.float32, block: int = 1 << 16) -> int:
    """``count_nonzero(|clip| >= threshold)``, a block of samples at a time (no full-size temporaries)."""
    return sum(
        int(np.count_nonzero(np.abs(clip[..., s : s + block]) >= threshold)) for s in range(0, clip.shape[-1], block)
    )
