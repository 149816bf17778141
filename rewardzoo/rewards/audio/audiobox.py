"""Meta Audiobox Aesthetics: four learned aesthetic axes of a clip, from the ``audiobox_aesthetics`` package.

The model code is the package's ``AesMultiOutput`` (a WavLM encoder, per-axis softmax layer weights
and MLP heads); this module only prepares the input and aggregates, as the package's ``AesPredictor``:

1. mono 16 kHz (resampled with torchaudio);
2. 10 s windows every 10 s, the last one zero-padded, with a mask of its real samples and a weight
   ``real samples / 160000``;
3. per window and axis the model output, mapped back with the checkpoint's ``target_transform``
   (``x * std + mean``);
4. per clip and axis the weight-averaged window scores.

All windows of a call run in batches of ``max_batch_windows`` (every window has the same 10 s shape,
so batching does not change a window's output).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.audio import prepare_clips
from ...shared.weights import refused_reason
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt, RewardOptions

DEFAULT_MODEL = "facebook/audiobox-aesthetics"
SAMPLE_RATE = 16000
WINDOW = 10 * SAMPLE_RATE
Axis = Literal["CE", "CU", "PC", "PQ"]
AXES: tuple[str, ...] = get_args(Axis)
#: Shortest clip scored (seconds).
MIN_SECONDS = 0.1


def load_aes_model(path: str) -> Any:
    """An ``AesMultiOutput`` from a ``save_pretrained`` directory / hub id (``config.json`` +
    ``model.safetensors``, the published layout) or a ``.pth``/``.pt`` training checkpoint
    (``{"state_dict", "model_cfg", "target_transform"}``, as the package's ``AesPredictor`` reads)."""
    try:
        from audiobox_aesthetics.model.aes import AesMultiOutput
    except ImportError:
        raise MissingExtraError("audiobox_aesthetics", "audiobox_aesthetics", "audio") from None
    if os.path.isfile(path) and Path(path).suffix in (".pth", ".pt", ".ckpt"):
        ckpt = _plain_checkpoint(path)
        keys = (
            "proj_num_layer",
            "proj_ln",
            "proj_act_fn",
            "proj_dropout",
            "nth_layer",
            "use_weighted_layer_sum",
            "precision",
            "normalize_embed",
            "output_dim",
        )
        model = AesMultiOutput(**{k: ckpt["model_cfg"][k] for k in keys}, target_transform=ckpt["target_transform"])
        state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items()}
        model.load_state_dict(state)
        return model
    return AesMultiOutput.from_pretrained(path)


def _plain_checkpoint(path: str) -> Any:
    """A ``.pth`` checkpoint read with ``torch.load(weights_only=True)`` (tensors and plain values, as the
    package's own ``AesPredictor`` reads it); one that holds more is refused, never unpickled."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ConfigError(
            f"refusing to unpickle '{path}': it holds more than tensors and plain values ({refused_reason(exc)}). "
            "Convert it once, in a Python session where you trust the file: `torch.load(SRC, weights_only=False)`, "
            "build the model as the package's AesPredictor does, `model.save_pretrained(DIR)` (config.json + "
            "model.safetensors); then give DIR as model_path",
            field="model_path",
        ) from None


class AudioboxAesthetics(PointwiseReward):
    """Score = the configured ``axis`` of Audiobox Aesthetics: CE (content enjoyment), CU (content
    usefulness), PC (production complexity) or PQ (production quality, default), nominally 1-10.

    Per clip: the weight-averaged (by real samples) score over 10 s windows of the model's output
    ``x * std + mean`` (checkpoint ``target_transform``). ``model_path``: the published checkpoint
    (hub id ``facebook/audiobox-aesthetics`` or a local directory with ``config.json`` and
    ``model.safetensors``) or a ``.pth`` training checkpoint. Inputs: ``audio`` (mono, 16 kHz, at least
    0.1 s); options: :class:`Options`. Range: unbounded regression outputs (nominally 1-10). Extras: all four
    axes ``CE``, ``CU``, ``PC``, ``PQ``.
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=600.0)
    streams = AXES  # the four axes come from one forward: weighable on their own (rewardzoo.core.streams)

    class Options(RewardOptions):
        axis: Axis = "PQ"
        """The axis scored: CE (content enjoyment), CU (content usefulness), PC (production complexity) or PQ
        (production quality); all four are extras."""
        max_batch_windows: PositiveInt = 8
        """Most 10 s windows per forward pass (batching does not change a window's output)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.axis = self.options.axis
        self.max_batch_windows = self.options.max_batch_windows
        self.model = load_aes_model(model_path or DEFAULT_MODEL).to(self.device, self.dtype).eval()
        transform = self.model.target_transform or {}
        missing = [a for a in AXES if a not in transform]
        if missing:
            raise ConfigError(f"audiobox checkpoint has no target_transform for {missing}", field="model_path")
        self.transform = {a: (float(transform[a]["mean"]), float(transform[a]["std"])) for a in AXES}

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        plan = []  # (clip, start, real samples)
        for i, clip in enumerate(clips):
            n = clip.shape[1]
            if n < MIN_SECONDS * SAMPLE_RATE:
                raise InputError(
                    f"audiobox_aesthetics needs at least {MIN_SECONDS:g} s of audio, got {n / SAMPLE_RATE:.3f} s",
                    field="audio",
                    sample=i,
                )
            plan += [(i, s, min(WINDOW, n - s)) for s in range(0, n, WINDOW)]
        raw: dict[str, list[Any]] = {a: [] for a in AXES}
        with torch.inference_mode():
            for first in range(0, len(plan), self.max_batch_windows):
                chunk = plan[first : first + self.max_batch_windows]
                wav = torch.zeros(len(chunk), 1, WINDOW)
                mask = torch.zeros(len(chunk), 1, WINDOW, dtype=torch.bool)
                for j, (i, s, n) in enumerate(chunk):
                    wav[j, 0, :n] = torch.from_numpy(np.array(clips[i][0, s : s + n]))
                    mask[j, 0, :n] = True
                preds = self.model({"wav": wav.to(self.device, self.dtype), "mask": mask.to(self.device)})
                for a in AXES:
                    raw[a].append(preds[a].float().cpu().double())
        owner = np.array([i for i, _, _ in plan])
        weights = np.array([n / WINDOW for _, _, n in plan])
        totals = np.bincount(owner, weights=weights, minlength=len(clips))
        scores = {}
        for a in AXES:
            mean, std = self.transform[a]
            per_window = torch.cat(raw[a]).numpy() * std + mean
            scores[a] = np.bincount(owner, weights=per_window * weights, minlength=len(clips)) / totals
        return RewardOutput(scores[self.axis], extras=scores)
