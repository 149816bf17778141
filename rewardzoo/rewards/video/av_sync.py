"""Audio-visual synchrony: Synchformer's offset prediction and the DeSync of MMAudio's evaluation, negated.

DeSync as ``hkchengrex/av-benchmark`` (MMAudio's evaluation code) computes it for one (video, audio) pair of 8 s:

- **video** (``av_bench/data/video_dataset.py``): decoded at 25 fps, the first ``25 * 8`` frames, each resized so
  its short side is 224 (bicubic, antialiased, on uint8), centre-cropped to 224x224, scaled to [0, 1] and
  normalised with mean = std = 0.5; cut into segments of 16 frames every 8 (``extract_video.py``): 24 segments;
- **audio** (``av_bench/data/audio_dataset.py``, ``extract.py``): mono (channel mean), resampled to 16 kHz, the
  first ``16000 * 8`` samples, cut into segments of 10240 samples every 5120 (0.64 s every 0.32 s: 24 segments,
  aligned with the video's); each segment a 128-bin mel power spectrogram (``n_fft`` 1024, window 400, hop 160),
  ``log(x + 1e-6)``, zero-padded to 66 frames, ``(x + 4.2677393) / (2 * 4.5689974)``;
- **offsets** (``av_bench/evaluate.py``): Synchformer's 21 logits for the first 14 segments and for the last 14
  (the head is trained on 14: 4.8 s), each argmax mapped onto the grid ``linspace(-2, 2, 21)`` (0.2 s steps);
  DeSync is the mean of ``|offset|`` over both windows of every sample (seconds, lower is better).

The reward is ``-DeSync`` of the sample (``-(|o_first| + |o_last|) / 2``, in [-2, 0], higher is better), so the
mean reward over a set is minus the published DeSync. Extras: ``desync`` and the two signed offsets.

Clips shorter than 8 s (at least 4.8 s: 14 segments) use their own length, the same for both streams (the
shorter of the two); the windows are then the first and last 14 of the segments that fit. Videos not at 25 fps
(``fps``) are brought to 25 fps by picking the frame nearest each 1/25 s instant, as ffmpeg's ``fps`` filter that
the reference decodes through does (``round=near``); a float video is quantised to uint8 first, the reference
reading 8-bit frames from files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.synchformer import build_synchformer
from ..options import PositiveNumber, RewardOptions, field_validator

SAMPLE_RATE = 16_000
FPS = 25.0
SIZE = 224
SEGMENT_FRAMES, FRAME_STEP = 16, 8
SEGMENT_SAMPLES, SAMPLE_STEP = 10_240, 5_120
MEL = {"sample_rate": SAMPLE_RATE, "win_length": 400, "hop_length": 160, "n_fft": 1024, "n_mels": 128}
MEL_MEAN, MEL_STD = -4.2677393, 4.5689974
WINDOW = 14
#: The offset classes in seconds: ``linspace(-2, 2, 21)`` in float64 then float32, as the reference builds it.
GRID = torch.from_numpy(np.linspace(-2.0, 2.0, 21)).float()


def frames_at_25(count: int, fps: float) -> list[int]:
    """Indices of the source frames (``count`` at ``fps``) that a 25 fps decode keeps: the nearest to each
    ``k / 25`` s, for the 25 fps frames whose instant falls within the video."""
    if fps == FPS:
        return list(range(count))
    total = int(count * FPS / fps)
    return [min(count - 1, int(k * fps / FPS + 0.5)) for k in range(total)]


def video_segments(frames: torch.Tensor, fps: float, seconds: float, device: str, size: int = SIZE) -> torch.Tensor:
    """(S, 16, 3, size, size) normalised segments of frames (T, 3, H, W) (uint8, or float in [0, 1]), as the module
    docstring says; ``seconds`` of video from the start; ``size``: the model's image size (224)."""
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2 import functional as TF

    keep = frames_at_25(frames.shape[0], fps)[: int(FPS * seconds)]
    picked = frames[keep].to(device)
    if picked.dtype != torch.uint8:
        picked = picked.float().mul(255).round_().clamp_(0, 255).to(torch.uint8)
    picked = TF.resize(picked, [size], interpolation=InterpolationMode.BICUBIC, antialias=True)
    picked = TF.center_crop(picked, [size, size])
    x = TF.normalize(TF.to_dtype(picked, torch.float32, scale=True), [0.5] * 3, [0.5] * 3)
    count = (x.shape[0] - SEGMENT_FRAMES) // FRAME_STEP + 1
    return torch.stack([x[i * FRAME_STEP : i * FRAME_STEP + SEGMENT_FRAMES] for i in range(count)])


def audio_segments(wave: torch.Tensor, mel: torch.nn.Module) -> torch.Tensor:
    """(S, 128, 66) normalised log-mel segments of a mono 16 kHz waveform (N,)."""
    count = (wave.shape[0] - SEGMENT_SAMPLES) // SAMPLE_STEP + 1
    segments = wave.unfold(0, SEGMENT_SAMPLES, SAMPLE_STEP)[:count]
    spec = torch.log(mel(segments) + 1e-6)
    frames = 66
    spec = F.pad(spec, (0, frames - spec.shape[-1])) if spec.shape[-1] < frames else spec[..., :frames]
    return (spec - MEL_MEAN) / (2 * MEL_STD)


class AVSync(PointwiseReward):
    """``-DeSync``: minus Synchformer's mean absolute audio-visual offset over the clip's first and last 4.8 s.

    Options: :class:`Options`. Inputs: ``video`` and ``audio`` (its soundtrack). Extras: ``desync`` (seconds, the
    published metric), ``offset_first`` and ``offset_last`` (signed offsets, seconds, on the 0.2 s grid).
    """

    inputs = Inputs(("video", "audio"), frames="native", audio="tensor", sample_rate=SAMPLE_RATE)

    class Options(RewardOptions):
        fps: PositiveNumber = FPS
        """The videos' frame rate (Synchformer runs at 25 fps; others are brought to 25 fps by nearest frame)."""
        duration: PositiveNumber = 8.0
        """Seconds scored from the start (8.0: MMAudio's evaluation); shorter clips use their own length."""

        @field_validator("duration")
        @classmethod
        def _at_least_a_window(cls, value: float) -> float:
            if value < 4.8:
                raise ValueError("must be at least 4.8 (14 segments of 0.64 s every 0.32 s)")
            return value

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        import torchaudio

        self.model = self.hold(build_synchformer(model_path).to(self.device, self.dtype))
        self.mel = torchaudio.transforms.MelSpectrogram(**MEL).to(self.device)
        self.grid = GRID.to(self.device)

    def _offsets(self, frames: Any, wave: torch.Tensor, sample: int) -> torch.Tensor:
        frames = torch.as_tensor(frames)
        if frames.ndim != 4 or frames.shape[1] != 3:
            raise InputError(f"expected frames (T, 3, H, W), got {tuple(frames.shape)}", field="video", sample=sample)
        wave = wave.reshape(-1)  # mono (1, time)
        seconds = min(self.options.duration, frames.shape[0] / self.options.fps, wave.shape[0] / SAMPLE_RATE)
        if seconds < 4.8 - 1e-9:
            raise InputError(
                f"{seconds:.2f} s of video and audio in common; Synchformer needs 4.8 s (14 segments)",
                field="video" if frames.shape[0] / self.options.fps < 4.8 else "audio",
                sample=sample,
            )
        size = self.model.config.image_size
        video = video_segments(frames, self.options.fps, seconds, self.device, size).to(self.dtype)
        audio = audio_segments(wave[: int(SAMPLE_RATE * seconds)].to(self.device).float(), self.mel).to(self.dtype)
        count = min(video.shape[0], audio.shape[0])
        if count < WINDOW:
            raise InputError(f"{count} segments fit; Synchformer needs {WINDOW}", field="video", sample=sample)
        v = self.model.video_features(video[:count])
        a = self.model.audio_features(audio[:count])
        starts = (0, count - WINDOW)
        v = torch.stack([v[s : s + WINDOW] for s in starts])
        a = torch.stack([a[s : s + WINDOW] for s in starts])
        return self.grid[self.model.offset_logits(v, a).argmax(-1)]

    def __call__(
        self,
        video: Sequence[Any] | None = None,
        audio: Sequence[Any] | None = None,
        audio_sample_rate: Sequence[int] | None = None,
        **_: Any,
    ) -> RewardOutput:
        if video is None or audio is None:
            raise InputError("needs the video and its audio", field="video" if video is None else "audio")
        if len(video) != len(audio):
            raise InputError(f"got {len(audio)} audio clips for {len(video)} videos", field="audio")
        from ...shared.audio import prepare_clips

        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)  # engine: no-op
        with torch.inference_mode():
            offsets = torch.stack([self._offsets(v, torch.tensor(a), i) for i, (v, a) in enumerate(zip(video, clips))])
        offsets = offsets.cpu()
        desync = offsets.abs().mean(dim=1)
        return RewardOutput(
            (-desync).numpy(),
            extras={
                "desync": desync.numpy(),
                "offset_first": offsets[:, 0].numpy(),
                "offset_last": offsets[:, 1].numpy(),
            },
        )
