"""SongEval (ASLP-lab/SongEval): five aesthetic dimensions of a whole song, each in [1, 5], as its ``eval.py`` scores.

The reference's steps (``ASLP-lab/SongEval`` commit f811311: ``eval.py``, ``model.py``, ``config.yaml``):

- **audio**: ``librosa.load(path, sr=24000)``: mono (channel mean) and librosa's default resampler (``soxr_hq``);
  the whole song in one pass, batch of one;
- **features**: MuQ (``OpenMuQ/MuQ-large-msd-iter``, the ``muq`` package): ``muq(wav, output_hidden_states=True)``,
  the hidden state at index 6 (the output of the 6th of its 12 conformer layers), (1, T, 1024);
- **head** (``model.Generator``, ``config.yaml``: 1024 in, 4096 hidden, 5 classes, 4 attention layers): ``h =
  ffd(x)`` (Linear, ReLU, Linear); ``a`` = ``h`` through 4 self-attentions (8 heads) in turn; ``z = [mean_t(a),
  max_t(h)]``; ``scores = 2 * tanh(fc(z)) + 3``, in order Coherence, Musicality, Memorability, Clarity,
  Naturalness.

muq 0.1.0 reads ``hidden_states`` from transformers' conformer encoder, which transformers 5 no longer returns;
the reward runs MuQ's own modules (its mel front end, normalisation, subsampling and conformer) and takes the
6th layer's output with a forward hook: the tensor transformers 4 returns as ``hidden_states[6]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.weights import load_state_dict, loading, model_folder
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import RewardOptions

SAMPLE_RATE = 24_000
DIMENSIONS = ("coherence", "musicality", "memorability", "clarity", "naturalness")
Dimension = Literal["coherence", "musicality", "memorability", "clarity", "naturalness", "mean"]
MUQ_ID = "OpenMuQ/MuQ-large-msd-iter"
LAYER = 6
HEAD_FILE = "ckpt/model.safetensors"


class SongEvalHead(nn.Module):
    """SongEval's ``Generator`` (its parameter names): ``2 * tanh(fc([mean_t attn(ffd x), max_t ffd x])) + 3``."""

    def __init__(self, in_features: int, ffd_hidden_size: int, num_classes: int, attn_layer_num: int) -> None:
        super().__init__()
        self.attn = nn.ModuleList(
            nn.MultiheadAttention(in_features, 8, dropout=0.2, batch_first=True) for _ in range(attn_layer_num)
        )
        self.ffd = nn.Sequential(
            nn.Linear(in_features, ffd_hidden_size), nn.ReLU(), nn.Linear(ffd_hidden_size, in_features)
        )
        self.fc = nn.Linear(in_features * 2, num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        h = self.ffd(features)
        a = h
        for attn in self.attn:
            a = attn(a, a, a, need_weights=False)[0]
        return torch.tanh(self.fc(torch.cat([a.mean(dim=1), h.max(dim=1).values], dim=1))) * 2.0 + 3


def head_config(folder: Path) -> dict[str, int]:
    """The ``generator`` block of SongEval's ``config.yaml`` (without ``_target_``)."""
    import yaml

    path = folder / "config.yaml"
    if not path.is_file():
        raise ConfigError(
            f"'{folder}' has no config.yaml (SongEval's layout: config.yaml, {HEAD_FILE})", field="model_path"
        )
    block = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("generator") or {}
    keys = ("in_features", "ffd_hidden_size", "num_classes", "attn_layer_num")
    missing = [k for k in keys if k not in block]
    if missing:
        raise ConfigError(f"'{path}': generator lacks {missing}", field="model_path")
    if int(block["num_classes"]) != len(DIMENSIONS):
        raise ConfigError(
            f"'{path}': SongEval has {len(DIMENSIONS)} classes, got {block['num_classes']}", field="model_path"
        )
    return {k: int(block[k]) for k in keys}


def build_head(source: str) -> SongEvalHead:
    """SongEval's head from a folder (or hub repository) holding ``config.yaml`` and ``ckpt/model.safetensors``,
    loaded strictly (the reference's ``strict=False`` would leave a missing tensor random)."""
    folder = model_folder(source, ["config.yaml", HEAD_FILE])
    config = head_config(folder)
    with loading(f"SongEval's head '{source}'"):
        head = SongEvalHead(**config)
        head.load_state_dict(load_state_dict(folder / HEAD_FILE), strict=True)
    return head.eval()


def build_muq(source: str) -> nn.Module:
    """MuQ from a folder (or hub repository) with ``config.json`` and ``model.safetensors``, by the ``muq``
    package's own class; its conformer config is given ``_attn_implementation: eager`` when it has none (read by
    transformers 5's masking code; muq's checkpoints predate it)."""
    try:
        from muq import MuQ
    except ImportError as exc:
        raise MissingExtraError("song_eval", exc.name or "muq", "songeval") from exc
    folder = model_folder(source, ["config.json", "model.safetensors"])
    with loading(f"the MuQ model '{source}'", field="kwargs.muq_path"):
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config.setdefault("w2v2_config", {}).setdefault("_attn_implementation", "eager")
        model = MuQ(config)
        model.load_state_dict(load_state_dict(folder / "model.safetensors"), strict=True)
    return model.eval()


def muq_layer_features(muq: nn.Module, wave: torch.Tensor, layer: int = LAYER) -> torch.Tensor:
    """MuQ's hidden state ``layer`` (transformers 4 numbering: 0 is the conformer's input, ``i`` the output of its
    ``i``-th layer) for a (1, T) 24 kHz waveform: MuQ's ``get_predictions`` steps with a hook on that layer."""
    inner = muq.model
    captured: list[torch.Tensor] = []
    target = inner.conformer.layers[layer - 1]
    handle = target.register_forward_hook(
        lambda _m, _i, out: captured.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        x = inner.normalize(inner.preprocessing(wave, features=["melspec_2048"]))
        inner.conformer(inner.conv(x["melspec_2048"]))
    finally:
        handle.remove()
    return captured[0]


class SongEval(PointwiseReward):
    """SongEval's aesthetic scores of a song (1-5): one dimension (or their mean) as the score, all five as extras.

    Options: :class:`Options`. Inputs: ``audio`` (the whole song). Extras: ``coherence``, ``musicality``,
    ``memorability``, ``clarity``, ``naturalness``.
    """

    inputs = Inputs(("audio",), audio="numpy", sample_rate=None, mono=True)

    class Options(RewardOptions):
        dimension: Dimension = "mean"
        """The score: one of the five dimensions, or ``mean`` (their mean; every dimension is an extra)."""
        muq_path: str = MUQ_ID
        """MuQ's weights: a hub id or a folder with config.json and model.safetensors (SongEval's:
        ``OpenMuQ/MuQ-large-msd-iter``)."""
        min_seconds: float = 1.0
        """Shortest audio scored, in seconds."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        if model_path is None:
            raise ConfigError(
                "needs model_path: a SongEval checkout or snapshot (config.yaml, ckpt/model.safetensors)",
                field="model_path",
            )
        self.head = self.hold(build_head(model_path).to(self.device, self.dtype))
        self.muq = self.hold(build_muq(self.options.muq_path).to(self.device, self.dtype))

    def _wave(self, audio: Any, rate: int, sample: int) -> torch.Tensor:
        import librosa

        wave = np.asarray(audio, dtype=np.float32)
        if wave.ndim == 2:  # (channels, time): librosa.load's to_mono, the channel mean
            wave = wave.mean(axis=0)
        wave = wave.reshape(-1)
        if rate != SAMPLE_RATE:  # librosa.load's resampling: librosa.resample, its default res_type (soxr_hq)
            wave = librosa.resample(wave, orig_sr=rate, target_sr=SAMPLE_RATE)
        if wave.shape[0] < self.options.min_seconds * SAMPLE_RATE:
            raise InputError(
                f"audio of {wave.shape[0] / SAMPLE_RATE:.2f} s is shorter than kwargs.min_seconds "
                f"({self.options.min_seconds:g} s)",
                field="audio",
                sample=sample,
            )
        return torch.from_numpy(np.ascontiguousarray(wave))[None].to(self.device, self.dtype)

    def __call__(
        self, audio: Sequence[Any] | None = None, audio_sample_rate: Sequence[int] | None = None, **_: Any
    ) -> RewardOutput:
        if audio is None:
            raise InputError("needs the audio", field="audio")
        from ...shared.audio import prepare_clips

        clips, rates = prepare_clips(audio, audio_sample_rate, mono=True)  # a direct call: mixed down as the engine
        rows = []
        with torch.inference_mode():
            for i, (clip, rate) in enumerate(zip(clips, rates)):
                features = muq_layer_features(self.muq, self._wave(clip, int(rate), i))
                rows.append(self.head(features)[0].float().cpu())
        scores = torch.stack(rows).numpy()
        extras = {name: scores[:, k] for k, name in enumerate(DIMENSIONS)}
        chosen = self.options.dimension
        score = scores.mean(axis=1) if chosen == "mean" else extras[chosen]
        return RewardOutput(score.astype(np.float32), extras=extras)
