"""UTMOS22 strong learner (Saeki et al., 2022): a predicted naturalness MOS of speech, 1-5 nominal.

The network is ``utmos_pytorch``'s fairseq-free ``UTMOSModel`` (wav2vec 2.0 base, a domain embedding, a
listener-conditioned BLSTM, a two-layer projection). The score follows ``UTMOSScoreTorch.forward``:

``score = 2 * mean_t proj(blstm([w2v(x)_t, domain_0, judge_288]))_t + 3``

on the 16 kHz mono waveform ``x`` (no normalisation), domain 0 (the main track) and listener 288 (the
mean listener). Batches hold clips of one length only (no padding, which shifts the score: the authors
advise batch size 1), so a batched score equals the one-clip score. The weights are loaded with
``torch.load(weights_only=True)`` or safetensors, never through a pickle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.audio import prepare_clips
from ...shared.weights import load_state_dict, strip_prefix
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.weights import resolve_weights_file
from ..options import PositiveInt, RewardOptions

SAMPLE_RATE = 16000
DEFAULT_WEIGHTS = "Blinorot/UTMOS-PyTorch/utmos_state_dict.pt"  # utmos_pytorch.utils.download_utmos_ckpt
DOMAIN, JUDGE = 0, 288  # UTMOSScoreTorch.forward: the main-track domain, the mean listener
MIN_SAMPLES = 400  # one wav2vec 2.0 frame (25 ms at 16 kHz)


def utmos_model(reward: str) -> torch.nn.Module:
    """``utmos_pytorch.utmos_torch.UTMOSModel()`` (random init)."""
    try:
        from utmos_pytorch.utmos_torch import UTMOSModel
    except ImportError as exc:
        raise MissingExtraError(reward, "utmos-pytorch", "audio") from exc
    return UTMOSModel()


def load_utmos(path: str, reward: str) -> torch.nn.Module:
    """UTMOSModel with the state of ``path``: every model key required (extra keys ignored, as the reference's
    ``strict=False`` load does); weight norm folded and LSTM weights flattened as ``load_utmos_weights`` does."""
    from utmos_pytorch.utmos_torch import remove_weight_norm_for_jit

    net = utmos_model(reward)
    try:
        state = strip_prefix(load_state_dict(path), ("module.",))
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    missing = sorted(set(net.state_dict()) - set(state))
    if missing:
        raise ConfigError(f"'{path}' is not a UTMOS state dict: missing {missing[:6]}", field="model_path")
    try:
        net.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise ConfigError(f"'{path}' does not fit UTMOSModel: {str(exc)[:400]}", field="model_path") from None
    net.eval()
    remove_weight_norm_for_jit(net)
    for module in net.modules():
        if isinstance(module, torch.nn.LSTM):
            module.flatten_parameters()
    return net.requires_grad_(False)


class UTMOS(PointwiseReward):
    """UTMOS22 strong: ``2 * mean_t head(w2v(x))_t + 3``, a speech naturalness MOS, about 1-5.

    Inputs: ``audio`` (mixed to mono, resampled to 16 kHz). ``model_path``: the converted state dict of
    ``utmos-pytorch`` (default ``Blinorot/UTMOS-PyTorch/utmos_state_dict.pt`` on the hub) or a local file.
    Options: :class:`Options`.
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=120.0)

    class Options(RewardOptions):
        max_batch: PositiveInt = 16
        """Most clips per forward pass; only clips of equal length share one."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.max_batch = self.options.max_batch
        utmos_model(self.name)  # the extra is checked before any download
        path = resolve_weights_file(model_path or DEFAULT_WEIGHTS)
        self.net = load_utmos(path, self.name).to(device=device, dtype=self.dtype)

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        for i, clip in enumerate(clips):
            if clip.shape[1] < MIN_SAMPLES:
                raise InputError(
                    f"UTMOS needs at least {MIN_SAMPLES} samples (25 ms) at 16 kHz; got {clip.shape[1]}",
                    field="audio",
                    sample=i,
                )
        return RewardOutput(self.score_clips([c[0] for c in clips]))

    def score_clips(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        """The MOS of each 16 kHz mono clip; clips of one length run together (at most ``max_batch``)."""
        out = np.empty(len(clips), dtype=np.float64)
        by_length: dict[int, list[int]] = {}
        for i, clip in enumerate(clips):
            by_length.setdefault(len(clip), []).append(i)
        with torch.inference_mode():
            for idx in by_length.values():
                for start in range(0, len(idx), self.max_batch):
                    part = idx[start : start + self.max_batch]
                    wav = torch.from_numpy(np.stack([clips[i] for i in part])).to(self.device, self.dtype)
                    n = len(part)
                    frames = self.net(
                        wav=wav[:, None],
                        domains=torch.full((n,), DOMAIN, dtype=torch.int, device=self.device),
                        judge_id=torch.full((n,), JUDGE, dtype=torch.int, device=self.device),
                    )
                    out[part] = (frames.mean(dim=1).squeeze(1).double() * 2 + 3).cpu().numpy()
        return out
