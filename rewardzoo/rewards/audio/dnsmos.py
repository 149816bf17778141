"""DNSMOS P.835 / P.808: Microsoft's non-intrusive speech quality MOS, with the real ONNX weights.

The weights ship inside the ``speechmos`` wheel (MIT) and are loaded from the installed package, never
downloaded. The computation follows speechmos / DNS-Challenge ``dnsmos_local.py``:

1. 16 kHz mono; samples clipped to [-1, 1] (the reference refuses values outside that range);
2. a clip shorter than 9.01 s is tiled (concatenated with itself until it is at least 9.01 s long);
3. windows of ``int(9.01 * 16000) = 144160`` samples every 1 s; the window count and ends use the
   reference's float arithmetic (``int(floor(len / 16000) - 9.01) + 1`` windows, end
   ``int((i + 9.01) * 16000)``), so windows whose end rounds one sample short (the reference skips
   them: the windows starting at 7-23 s) are skipped too;
4. per window: the P.835 model (``sig_bak_ovr.onnx``) on the raw samples -> raw SIG/BAK/OVRL, each
   mapped through its calibration polynomial; the P.808 model (``model_v8.onnx``) on the mel
   spectrogram of ``window[:-160]`` (n_fft 321, hop 160, periodic Hann, centred with zero padding,
   120 Slaney mels, power), as ``(max(10 log10 S - 10 log10 max S, -80) + 40) / 40``;
5. each score is the mean over windows.

The mel front end is computed with torch (no librosa). Windows of all clips in a call are batched
through the ONNX sessions.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import onnxruntime  # noqa: F401  (a missing audio extra fails at import, before any model is read)
import torch

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.audio import prepare_clips
from ...shared.checkpoints import Checkpoint, local_file, package_file
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.onnx import onnx_session
from ..options import PositiveInt, RewardOptions

SAMPLE_RATE = 16000
INPUT_SECONDS = 9.01
WINDOW = int(INPUT_SECONDS * SAMPLE_RATE)  # 144160 samples
N_FFT, HOP, N_MELS = 321, 160, 120
#: The shortest clip scored (tiled to the 9.01 s window below that): DNSMOS's windows need speech.
MIN_SECONDS = 1.0

#: Calibration polynomials (highest power first), from DNS-Challenge / speechmos.
POLY: dict[bool, dict[str, tuple[float, ...]]] = {
    False: {
        "sig": (-0.08397278, 1.22083953, 0.0052439),
        "bak": (-0.13166888, 1.60915514, -0.39604546),
        "ovrl": (-0.06766283, 1.11546468, 0.04602535),
    },
    True: {
        "sig": (-0.01019296, 0.02751166, 1.19576786, -0.24348726),
        "bak": (-0.04976499, 0.44276479, -0.1644611, 0.96883132),
        "ovrl": (-0.00533021, 0.005101, 1.18058466, -0.11236046),
    },
}
Target = Literal["ovrl", "sig", "bak", "p808"]
TARGETS: tuple[str, ...] = get_args(Target)


def _hz_to_mel(hz: float | np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    logstep = math.log(6.4) / 27.0
    return np.where(
        hz >= min_log_hz, min_log_hz / f_sp + np.log(np.maximum(hz, min_log_hz) / min_log_hz) / logstep, hz / f_sp
    )


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)), mel * f_sp)


def slaney_mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, fmin: float = 0.0, fmax: float | None = None
) -> np.ndarray:
    """Mel filterbank ``(n_mels, 1 + n_fft // 2)`` defined like ``librosa.filters.mel`` (its defaults).

    Triangles between ``n_mels + 2`` points equally spaced on Slaney's mel scale, evaluated at the FFT
    bin frequencies ``k * sr / n_fft``, each scaled by ``2 / (f_upper - f_lower)`` (Slaney's equal-area
    normalisation). torchaudio's ``melscale_fbanks`` differs (it interpolates on a different grid).
    """
    fmax = sample_rate / 2.0 if fmax is None else fmax
    bins = np.arange(1 + n_fft // 2, dtype=np.float64) * sample_rate / n_fft
    edges = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins[None, :] - lower) / (centre - lower)
    falling = (upper - bins[None, :]) / (upper - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (upper - lower))
    return weights.astype(np.float32)


def window_starts(length: int) -> list[int]:
    """Start samples of the 9.01 s windows of a (tiled) 16 kHz clip of ``length`` samples (reference arithmetic)."""
    count = int(np.floor(length / SAMPLE_RATE) - INPUT_SECONDS) + 1
    return [i * SAMPLE_RATE for i in range(count) if int((i + INPUT_SECONDS) * SAMPLE_RATE) - i * SAMPLE_RATE >= WINDOW]


def tile_to_window(x: np.ndarray) -> np.ndarray:
    """Concatenate a clip with itself until it holds at least one window (the reference's tiling)."""
    if x.shape[0] == 0:
        raise ValueError("cannot tile an empty clip")
    while x.shape[0] < WINDOW:
        x = np.concatenate([x, x])
    return x


def speechmos_model_dir() -> Path:
    """The folder of the installed ``speechmos`` package (found without importing it: it imports librosa)."""
    spec = importlib.util.find_spec("speechmos")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("dnsmos", "speechmos", "audio")
    return Path(next(iter(spec.submodule_search_locations)))


class DNSMOS(PointwiseReward):
    """DNSMOS P.835 (SIG, BAK, OVRL) and P.808 MOS of a speech clip; the score is the ``target`` MOS.

    Score per clip: mean over 9.01 s windows (1 s hop; shorter clips tiled) of the calibrated model
    output, ``poly_target(raw_target)`` for ovrl/sig/bak (the P.808 output is used as is); options:
    :class:`Options`. ``model_path``: None loads the ONNX files of the installed speechmos wheel; a directory
    must hold ``sig_bak_ovr.onnx`` and ``model_v8.onnx``.

    Inputs: ``audio`` (any rate/channels; mixed to mono and resampled to 16 kHz; samples clipped to
    [-1, 1]). Range: about 1-5 (higher is better). All four MOS are reported as extras
    ``ovrl``, ``sig``, ``bak``, ``p808``.
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=600.0)  # ~10 s of CPU per minute of audio
    personalized: bool = False

    class Options(RewardOptions):
        target: Target = "ovrl"
        """The MOS scored (all four are extras): ``ovrl`` (overall), ``sig`` (signal), ``bak`` (background) or
        ``p808`` (the P.808 MOS)."""
        personalized: bool | None = None
        """Use the personalised P.835 model (``pdnsmos_models``) and its polynomials; default: the reward's own
        (``dnsmos``: false, ``dnsmos_personalized``: true)."""
        max_batch_windows: PositiveInt = 16
        """Most 9.01 s windows per ONNX run (bounds memory for long or many clips)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        target, personalized = self.options.target, self.options.personalized
        if self.dtype_name != "float32":
            raise ConfigError(
                f"DNSMOS runs its ONNX models in float32; dtype '{self.dtype_name}' is not supported", field="dtype"
            )
        self.target = target
        self.personalized = type(self).personalized if personalized is None else personalized
        self.max_batch_windows = self.options.max_batch_windows
        primary, p808 = self._model_files(model_path)
        self._primary = onnx_session(primary, device=device)
        self._p808 = onnx_session(p808, device=device)
        self._poly = POLY[self.personalized]
        self._window = torch.hann_window(N_FFT, periodic=True, dtype=torch.float32, device=self.device)
        self._fbank = torch.from_numpy(slaney_mel_filterbank(SAMPLE_RATE, N_FFT, N_MELS)).to(self.device)

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The two ONNX files the sessions load (P.835, personalised or not, and P.808), as :meth:`_model_files`
        finds them: in ``model_path``, else in the installed speechmos wheel."""
        personalized = kwargs.get("personalized")
        personalized = cls.personalized if personalized is None else bool(personalized)
        if model_path is not None:
            return [local_file(Path(model_path) / name) for name in ("sig_bak_ovr.onnx", "model_v8.onnx")]
        primary = "pdnsmos_models" if personalized else "dnsmos_models"
        return [
            package_file("speechmos", primary, "sig_bak_ovr.onnx"),
            package_file("speechmos", "dnsmos_models", "model_v8.onnx"),
        ]

    def _model_files(self, model_path: str | None) -> tuple[Path, Path]:
        if model_path is None:
            root = speechmos_model_dir()
            primary_dir = root / ("pdnsmos_models" if self.personalized else "dnsmos_models")
            primary, p808 = primary_dir / "sig_bak_ovr.onnx", root / "dnsmos_models" / "model_v8.onnx"
        else:
            root = Path(model_path)
            primary, p808 = root / "sig_bak_ovr.onnx", root / "model_v8.onnx"
        for path in (primary, p808):
            if not path.is_file():
                raise ConfigError(
                    f"DNSMOS model file not found: '{path}' (model_path is a directory with "
                    "sig_bak_ovr.onnx and model_v8.onnx, or null for the speechmos weights)",
                    field="model_path",
                )
        return primary, p808

    def p808_features(self, segments: torch.Tensor) -> torch.Tensor:
        """P.808 input ``(B, 900, 120)`` from 16 kHz segments ``(B, 144000)`` (float32)."""
        spec = torch.stft(
            segments,
            n_fft=N_FFT,
            hop_length=HOP,
            win_length=N_FFT,
            window=self._window,
            center=True,
            pad_mode="constant",
            return_complex=True,
        )
        power = spec.real.square() + spec.imag.square()
        mel = torch.matmul(self._fbank, power)  # (B, 120, frames)
        db = 10.0 * torch.log10(mel.clamp_min(1e-10))
        db = db - db.amax(dim=(1, 2), keepdim=True)  # ref = max power of the segment
        return ((db.clamp_min(-80.0) + 40.0) / 40.0).transpose(1, 2).contiguous()

    def raw_scores(self, windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Uncalibrated P.835 outputs ``(W, 3)`` (sig, bak, ovrl) and P.808 MOS ``(W,)`` for windows ``(W, 144160)``."""
        p835 = self._primary.run(None, {"input_1": windows})[0]
        with torch.inference_mode():
            feats = self.p808_features(torch.from_numpy(windows[:, :-HOP]).to(self.device)).cpu().numpy()
        p808 = self._p808.run(None, {"input_1": feats})[0][:, 0]
        return p835.astype(np.float64), p808.astype(np.float64)

    def score_clips(self, clips: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """All four MOS for 16 kHz mono float32 clips ``(time,)``: ``{"ovrl", "sig", "bak", "p808"}`` arrays."""
        tiled = [tile_to_window(np.clip(c, -1.0, 1.0).astype(np.float32, copy=False)) for c in clips]
        plan = [(i, s) for i, x in enumerate(tiled) for s in window_starts(x.shape[0])]
        p835, p808 = [], []
        for first in range(0, len(plan), self.max_batch_windows):  # bounded memory for long/many clips
            chunk = plan[first : first + self.max_batch_windows]
            raw835, raw808 = self.raw_scores(np.stack([tiled[i][s : s + WINDOW] for i, s in chunk]))
            p835.append(raw835)
            p808.append(raw808)
        raw = np.concatenate(p835)
        owner = np.array([i for i, _ in plan])
        counts = np.bincount(owner, minlength=len(clips))
        per_window = {
            "sig": np.polyval(self._poly["sig"], raw[:, 0]),
            "bak": np.polyval(self._poly["bak"], raw[:, 1]),
            "ovrl": np.polyval(self._poly["ovrl"], raw[:, 2]),
            "p808": np.concatenate(p808),
        }
        return {k: np.bincount(owner, weights=v, minlength=len(clips)) / counts for k, v in per_window.items()}

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        for i, clip in enumerate(clips):
            if clip.shape[1] < MIN_SECONDS * SAMPLE_RATE:  # tiling a few samples to 9 s scores a made-up signal
                raise InputError(
                    f"DNSMOS needs at least {MIN_SECONDS:g} s of audio (shorter clips are tiled to its "
                    f"9.01 s window); got {clip.shape[1] / SAMPLE_RATE:.3f} s",
                    field="audio",
                    sample=i,
                )
        mos = self.score_clips([c[0] for c in clips])
        return RewardOutput(mos[self.target], extras=mos)


class PersonalizedDNSMOS(DNSMOS):
    """DNSMOS with the personalised P.835 model and polynomials (same as ``personalized: true``)."""

    personalized: bool = True
