"""Integrated loudness (ITU-R BS.1770-4, EBU R128) as a reward: ``-|LUFS - target|``.

Measurement, as in BS.1770-4 and pyloudnorm's ``Meter.integrated_loudness``:

1. K-weighting per channel: a high shelf (+4 dB, 1500 Hz, Q 1/sqrt(2)) then a high-pass (38 Hz,
   Q 0.5), both RBJ-cookbook biquads designed at the clip's own sample rate;
2. mean squares ``z[c, j]`` over 400 ms blocks with 75 % overlap (block ``j`` covers samples
   ``int(0.4 * 0.25 j * rate)`` to ``int(0.4 * (0.25 j + 1) * rate)``, normalised by the full block
   length; ``round((T - 0.4) / 0.1) + 1`` blocks for a clip of T seconds);
3. block loudness ``l_j = -0.691 + 10 log10(sum_c G_c z[c, j])`` with channel gains
   G = (1, 1, 1, 1.41, 1.41) for L, R, C, Ls, Rs;
4. absolute gate ``l_j >= -70``; relative gate ``l_j > L_abs - 10`` (and > -70), where ``L_abs`` is the
   loudness of the mean ``z`` over the absolutely gated blocks;
5. ``LUFS = -0.691 + 10 log10(sum_c G_c mean_j z[c, j])`` over the blocks that pass both gates.

When no block passes the gates (silence or near-silence below -70 LUFS) BS.1770 gives -inf; here the
loudness is taken as :data:`GATED_LUFS` (-70, the absolute gate), so the score stays finite:
``-|-70 - target|``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.signal import lfilter

from ...errors import InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import Number, RewardOptions

BLOCK_SECONDS = 0.4
OVERLAP = 0.75
ABSOLUTE_GATE = -70.0
RELATIVE_GATE = -10.0
CHANNEL_GAINS = (1.0, 1.0, 1.0, 1.41, 1.41)
#: Loudness assigned to a clip whose blocks are all gated (BS.1770 itself gives -inf).
GATED_LUFS = ABSOLUTE_GATE


def _biquad(kind: str, gain_db: float, q: float, fc: float, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(b, a) of an RBJ-cookbook high shelf or high-pass biquad, normalised so that a0 = 1."""
    big_a = 10.0 ** (gain_db / 40.0)
    w0 = 2.0 * math.pi * fc / rate
    cos, alpha = math.cos(w0), math.sin(w0) / (2.0 * q)
    if kind == "high_shelf":
        root = 2.0 * math.sqrt(big_a) * alpha
        b = [
            big_a * ((big_a + 1) + (big_a - 1) * cos + root),
            -2 * big_a * ((big_a - 1) + (big_a + 1) * cos),
            big_a * ((big_a + 1) + (big_a - 1) * cos - root),
        ]
        a = [
            (big_a + 1) - (big_a - 1) * cos + root,
            2 * ((big_a - 1) - (big_a + 1) * cos),
            (big_a + 1) - (big_a - 1) * cos - root,
        ]
    elif kind == "high_pass":
        b = [(1 + cos) / 2, -(1 + cos), (1 + cos) / 2]
        a = [1 + alpha, -2 * cos, 1 - alpha]
    else:  # pragma: no cover - internal
        raise ValueError(kind)
    b_arr, a_arr = np.asarray(b), np.asarray(a)
    return b_arr / a_arr[0], a_arr / a_arr[0]


def k_weighting(rate: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """The two K-weighting stages (b, a) at ``rate``: high shelf then high-pass."""
    return [_biquad("high_shelf", 4.0, 1 / math.sqrt(2), 1500.0, rate), _biquad("high_pass", 0.0, 0.5, 38.0, rate)]


def block_bounds(num_samples: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and end sample of every gating block (BS.1770-4 / pyloudnorm arithmetic)."""
    step = 1.0 - OVERLAP
    seconds = num_samples / rate
    count = int(np.round((seconds - BLOCK_SECONDS) / (BLOCK_SECONDS * step))) + 1
    j = np.arange(count, dtype=np.float64)
    lower = (BLOCK_SECONDS * (j * step) * rate).astype(np.int64)
    upper = (BLOCK_SECONDS * (j * step + 1) * rate).astype(np.int64)
    return lower, np.minimum(upper, num_samples)


#: Hops (100 ms each) filtered at once: float64 buffers of a few hundred kB instead of the whole clip's.
HOPS_PER_CHUNK = 16


def hop_energies(audio: np.ndarray, rate: int, edges: np.ndarray) -> np.ndarray:
    """Sums of squares of the K-weighted ``audio`` (channels, time) between consecutive ``edges`` (the first 0):
    filtered :data:`HOPS_PER_CHUNK` hops at a time, each filter's state carried from chunk to chunk, which is the
    same recurrence, in the same order, as filtering the whole clip at once, so the same values."""
    stages = k_weighting(rate)
    states = [np.zeros((audio.shape[0], max(len(a), len(b)) - 1)) for b, a in stages]
    out = []
    for k in range(0, len(edges) - 1, HOPS_PER_CHUNK):
        cuts = edges[k : k + HOPS_PER_CHUNK + 1]
        y = np.asarray(audio[:, cuts[0] : cuts[-1]], dtype=np.float64)
        for j, (b, a) in enumerate(stages):
            y, states[j] = lfilter(b, a, y, axis=1, zi=states[j])
        out.append(np.add.reduceat(np.square(y), cuts[:-1] - cuts[0], axis=1))
    return np.concatenate(out, axis=1)


#: Below this rate the K-weighting filters (a 1.5 kHz shelf, a 38 Hz high-pass) are no longer what
#: BS.1770 specifies: the shelf would sit at or above Nyquist.
MIN_RATE = 8000


def integrated_loudness(audio: np.ndarray, rate: int) -> float:
    """BS.1770-4 integrated loudness in LUFS of ``audio`` (channels, time); -inf when every block is gated.

    Raises :class:`InputError` for more than 5 channels, a sample rate below :data:`MIN_RATE` or a clip
    shorter than one 400 ms block.
    """
    channels, num_samples = audio.shape
    if rate < MIN_RATE:
        raise InputError(
            f"loudness needs a sample rate of at least {MIN_RATE} Hz (the K-weighting shelf at 1.5 kHz "
            f"must lie well below Nyquist); got {rate} Hz"
        )
    if channels > len(CHANNEL_GAINS):
        raise InputError(
            f"BS.1770 loudness weights at most {len(CHANNEL_GAINS)} channels (L, R, C, Ls, Rs); got {channels}"
        )
    if num_samples < BLOCK_SECONDS * rate:
        raise InputError(
            f"audio of {num_samples / rate:.3f} s is shorter than one {BLOCK_SECONDS * 1000:.0f} ms loudness block"
        )
    lower, upper = block_bounds(num_samples, rate)
    # sums of squares between consecutive block edges (100 ms hops), then blocks as sums of hops:
    # cheaper than a cumulative sum over every sample, and exact up to float rounding
    edges = np.unique(np.concatenate([lower, upper]))
    hops = hop_energies(audio, rate, edges)
    energy = np.concatenate([np.zeros((channels, 1)), np.cumsum(hops, axis=1)], axis=1)
    z = (energy[:, np.searchsorted(edges, upper)] - energy[:, np.searchsorted(edges, lower)]) / (BLOCK_SECONDS * rate)
    gains = np.asarray(CHANNEL_GAINS[:channels])[:, None]
    with np.errstate(divide="ignore"):
        block_lufs = -0.691 + 10.0 * np.log10((gains * z).sum(axis=0))
        above_abs = block_lufs >= ABSOLUTE_GATE
        if not above_abs.any():
            return -math.inf
        relative = -0.691 + 10.0 * np.log10((gains[:, 0] * z[:, above_abs].mean(axis=1)).sum()) + RELATIVE_GATE
        gated = (block_lufs > relative) & (block_lufs > ABSOLUTE_GATE)
        if not gated.any():
            return -math.inf
        return float(-0.691 + 10.0 * np.log10((gains[:, 0] * z[:, gated].mean(axis=1)).sum()))


class Loudness(PointwiseReward):
    """Score = ``-|LUFS - target|``: how close the integrated loudness (ITU-R BS.1770-4) is to ``target``.

    Options: :class:`Options`. A fully gated
    (near-silent) clip counts as -70 LUFS (score ``-|-70 - target|``, finite). Inputs: ``audio`` at
    its own sample rate, up to 5 channels in the order L, R, C, Ls, Rs (surrounds weighted 1.41), at
    least 400 ms long. Range (-inf, 0]; 0 is exactly on target. Extra: ``lufs`` (the measured loudness,
    -70 when gated).
    """

    inputs = Inputs(("audio",), mono=False)

    class Options(RewardOptions):
        target: Number = -23.0
        """The target integrated loudness in LUFS: -23 (EBU R128 broadcast) by default; -14 is common for
        streaming."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.target = self.options.target

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        clips, rates = prepare_clips(audio, audio_sample_rate, target_rate=None, mono=False)
        lufs = []
        for i, (clip, rate) in enumerate(zip(clips, rates)):
            try:
                value = integrated_loudness(clip, rate)
            except InputError as exc:
                raise exc.located(field="audio", sample=i) from None
            lufs.append(max(value, GATED_LUFS))
        lufs_arr = np.asarray(lufs)
        return RewardOutput(-np.abs(lufs_arr - self.target), extras={"lufs": lufs_arr})
