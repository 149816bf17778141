"""ImageBind score: cosine similarities between ImageBind embeddings of a prompt, a video and its audio.

The pairs and their weighted sum are Flow-Factory's ``rewards/imagebind_reward.py`` (and verl-omni's
``utils/reward_score/imagebind.py``, which copies it): ``audio_video = cos(e_audio, e_vision)``,
``text_audio = cos(e_text, e_audio)``, ``text_video = cos(e_text, e_vision)``, and for ``mode: all``
``sum_p w_p * pair_p`` (default weights 0.5 / 0.25 / 0.25). Preprocessing as the references run it:

- **text**: ImageBind's own BPE ``SimpleTokenizer`` (77 tokens);
- **audio**: mono, 16 kHz (``torchaudio.functional.resample``), three 2 s clips whose starts are evenly spaced
  over the clip (all at 0 when it is not longer than 2 s; a short clip is zero-padded), each: minus its mean,
  kaldi ``fbank`` (128 mel bins, 25 ms hanning windows every 10 ms, htk-compatible, no dither), cut or
  zero-padded to 204 frames, then ``(x + 4.268) / 9.138``;
- **video**: 5 clips of 2 frames each, centred at ``int((i + 0.5) * T / 5)``, each resized (bilinear,
  ``align_corners=False``) so its short side is 224, CLIP-normalised, and cut into 3 spatial crops of 224
  (start, centre, end of the long side): 15 clips; ImageBind averages its embeddings over them.

ImageBind's model code comes from the ``imagebind-unofficial`` release of Meta's code. Its package
``__init__`` imports ``imagebind.data``, which needs ``pytorchvideo`` (whose PyPI release 0.1.5 does not import
with torchvision >= 0.17) and ``pkg_resources``; the reward uses only ``imagebind.models``, so it imports that
without running the package's ``__init__`` (:func:`imagebind_modules`).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import torch
import torch.nn.functional as F

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.weights import load_state_dict, loading
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import Field, Number, PositiveNumber, RewardOptions, model_validator

PAIRS = {"audio_video": ("audio", "vision"), "text_audio": ("text", "audio"), "text_video": ("text", "vision")}
Pair = Literal["audio_video", "text_audio", "text_video"]
DEFAULT_WEIGHTS = {"audio_video": 0.5, "text_audio": 0.25, "text_video": 0.25}
#: Fields each modality is read from.
FIELDS = {"text": "prompt", "audio": "audio", "vision": "video"}
HUGE_URL = "https://dl.fbaipublicfiles.com/imagebind/imagebind_huge.pth"
WEIGHT_FILES = ("model.safetensors", "imagebind_huge.pth")

SAMPLE_RATE = 16_000
CLIP_SECONDS = 2
CLIPS = 3
MEL_BINS = 128
TARGET_FRAMES = 204
AUDIO_MEAN, AUDIO_STD = -4.268, 9.138
SIZE = 224
VIDEO_CLIPS, CLIP_FRAMES = 5, 2
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


def imagebind_modules() -> tuple[ModuleType, ModuleType]:
    """``imagebind.models.imagebind_model`` and ``imagebind.models.multimodal_preprocessors``, imported without
    running ``imagebind/__init__.py`` when ``imagebind`` is not imported yet (see the module docstring)."""
    if "imagebind" not in sys.modules:
        spec = importlib.util.find_spec("imagebind")
        if spec is None or spec.submodule_search_locations is None:
            raise MissingExtraError("imagebind_score", "imagebind", "imagebind")
        sys.modules["imagebind"] = importlib.util.module_from_spec(spec)  # the package, its __init__ not run
    try:
        from imagebind.models import imagebind_model, multimodal_preprocessors
    except ImportError as exc:
        raise MissingExtraError("imagebind_score", exc.name or "imagebind", "imagebind") from exc
    return imagebind_model, multimodal_preprocessors


def build_model(path: str | None) -> torch.nn.Module:
    """An ``ImageBindModel`` (eval mode, CPU) from ``path``: a directory with ``config.json`` (``ImageBindModel``
    keyword arguments; absent: ``imagebind_huge``'s) and ``model.safetensors`` or ``imagebind_huge.pth``; a weights
    file (the huge architecture); None: Meta's ``imagebind_huge.pth``, downloaded once to the torch hub cache."""
    ib, _ = imagebind_modules()
    if path is None:
        target = Path(torch.hub.get_dir()) / "checkpoints" / Path(HUGE_URL).name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with loading(f"ImageBind's weights from {HUGE_URL}", verb="download"):
                torch.hub.download_url_to_file(HUGE_URL, str(target), progress=False)
        path = str(target)
    where, config = Path(path), {}
    if where.is_dir():
        if (where / "config.json").is_file():
            config = json.loads((where / "config.json").read_text(encoding="utf-8"))
        found = [where / name for name in WEIGHT_FILES if (where / name).is_file()]
        if not found:
            raise ConfigError(f"'{where}' holds none of {', '.join(WEIGHT_FILES)}", field="model_path")
        where = found[0]
    elif not where.is_file():
        raise ConfigError(f"ImageBind weights not found: '{where}'", field="model_path")
    with loading(f"the ImageBind model '{path}'"):
        model = ib.ImageBindModel(**config) if config else ib.imagebind_huge(pretrained=False)
        model.load_state_dict(load_state_dict(where))
    return model.eval()


def audio_clips(waveform: torch.Tensor) -> torch.Tensor:
    """(3, 1, 128, 204) normalised log-mel clips of a mono 16 kHz waveform (1, T), as the module docstring says."""
    import torchaudio.compliance.kaldi as kaldi

    length = CLIP_SECONDS * SAMPLE_RATE
    duration = waveform.shape[1] / SAMPLE_RATE
    spacing = max(duration - CLIP_SECONDS, 0.0) / (CLIPS - 1)
    mels = []
    for i in range(CLIPS):
        start = int(i * spacing * SAMPLE_RATE)
        clip = waveform[:, start : start + length].float()
        clip = F.pad(clip, (0, length - clip.shape[1]))
        fbank = kaldi.fbank(
            clip - clip.mean(),
            htk_compat=True,
            sample_frequency=SAMPLE_RATE,
            use_energy=False,
            window_type="hanning",
            num_mel_bins=MEL_BINS,
            dither=0.0,
            frame_length=25,
            frame_shift=10,
        ).T
        fbank = F.pad(fbank, (0, max(TARGET_FRAMES - fbank.shape[1], 0)))[:, :TARGET_FRAMES]
        mels.append(((fbank - AUDIO_MEAN) / AUDIO_STD).unsqueeze(0))
    return torch.stack(mels)


def clip_frames(count: int) -> list[int]:
    """The 10 frame indices of the 5 clips of 2 frames out of ``count`` frames (centred at
    ``int((i + 0.5) * count / 5)``, as the references' temporal sampler picks them; repeated for short videos)."""
    index: list[int] = []
    for i in range(VIDEO_CLIPS):
        centre = int((i + 0.5) * count / VIDEO_CLIPS)
        index += torch.linspace(max(0, centre - 1), min(count - 1, centre), CLIP_FRAMES).long().tolist()
    return index


def video_clips(frames: torch.Tensor, device: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """(15, 3, 2, 224, 224) normalised clips of frames (T, 3, H, W), uint8 or float in [0, 1], as the module
    docstring says; written into ``out`` when given (one copy of the crops, not two).

    Only the 10 frames the clips use are converted (``x.float() / 255`` for uint8, the references' value of the
    whole video), on ``device``; they are resized as planes (clip, channel, frame) of one channel each, the
    references' own layout: the same values, and on a CPU faster than a 3-channel resize of either layout.
    """
    count, _, height, width = frames.shape
    picked = frames[clip_frames(count)].to(device)  # (10, 3, H, W): 5 clips of 2 frames
    planes = picked.view(VIDEO_CLIPS, CLIP_FRAMES, 3, height, width).transpose(1, 2).contiguous()
    planes = planes.float().div_(255.0) if frames.dtype == torch.uint8 else planes.float()
    size = (int(height / width * SIZE), SIZE) if width <= height else (SIZE, int(width / height * SIZE))
    resized = F.interpolate(planes.view(-1, 1, height, width), size=size, mode="bilinear", align_corners=False)
    clips = resized.view(VIDEO_CLIPS, 3, CLIP_FRAMES, *size)  # (5, 3, 2, h, w)
    clips.sub_(torch.tensor(MEAN, device=clips.device).view(1, 3, 1, 1, 1))
    clips.div_(torch.tensor(STD, device=clips.device).view(1, 3, 1, 1, 1))
    long_side = 3 if size[0] > size[1] else 4
    starts = (0, (clips.shape[long_side] - SIZE) // 2, clips.shape[long_side] - SIZE)
    if out is None:
        out = clips.new_empty((VIDEO_CLIPS * len(starts), 3, CLIP_FRAMES, SIZE, SIZE))
    grid = out.view(VIDEO_CLIPS, len(starts), 3, CLIP_FRAMES, SIZE, SIZE)  # clip-major, crops within a clip
    for k, start in enumerate(starts):
        grid[:, k].copy_(clips.narrow(long_side, start, SIZE))
    return out


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine of (N, D) embeddings."""
    return (F.normalize(a.float(), dim=-1) * F.normalize(b.float(), dim=-1)).sum(dim=-1)


def pair_weights(mode: str, weights: Mapping[Pair, float] | None) -> dict[str, float]:
    """The pairs scored and their weights: ``{mode: 1.0}`` for one pair; for ``all`` the given ``weights`` (a
    mapping over some of the pairs; pairs left out are not computed) or the references' defaults."""
    if mode != "all":
        return {mode: 1.0}
    return dict(DEFAULT_WEIGHTS) if weights is None else {str(pair): w for pair, w in weights.items()}


class ImageBindScore(PointwiseReward):
    """ImageBind cosine between text and video, text and audio, audio and video, or a weighted sum of them.

    Options: :class:`Options`. Each scored pair is also an extra ``<pair>_similarity``. Inputs: ``prompt``,
    ``video``, ``audio`` as the mode needs them; audio shorter than ``min_audio_seconds`` is an InputError.
    """

    inputs = Inputs(("prompt", "video", "audio"), frames="native", audio="tensor", sample_rate=SAMPLE_RATE)

    class Options(RewardOptions):
        mode: Literal["audio_video", "text_audio", "text_video", "all"] = "audio_video"
        """The pair scored, or ``all``: the weighted sum of the pairs in ``weights``."""
        weights: dict[Pair, Number] | None = Field(None, min_length=1)
        """``mode: all`` only: pair -> weight; pairs left out are not computed (default ``{audio_video: 0.5,
        text_audio: 0.25, text_video: 0.25}``, the references')."""
        min_audio_seconds: PositiveNumber = float(CLIP_SECONDS)
        """Shortest audio scored, in seconds (2.0: ImageBind's clip length; shorter clips are zero-padded)."""

        @model_validator(mode="after")
        def _weights_for_all(self) -> ImageBindScore.Options:
            if self.mode != "all" and self.weights is not None:
                raise ConfigError("applies only to mode: all (one pair is scored as it is)", field="kwargs.weights")
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.mode = self.options.mode
        self.weights = pair_weights(self.mode, self.options.weights)
        self.min_audio_seconds = self.options.min_audio_seconds
        self.modalities = tuple(m for m in FIELDS if any(m in PAIRS[p] for p in self.weights))
        self.inputs = self.inputs.with_fields([FIELDS[m] for m in self.modalities])
        _, pre = imagebind_modules()
        bpe = Path(str(pre.__file__)).resolve().parents[1] / "bpe" / "bpe_simple_vocab_16e6.txt.gz"
        self.tokenizer = pre.SimpleTokenizer(bpe_path=str(bpe))
        self.model = build_model(model_path).to(self.device, self.dtype)

    def _audio(self, audio: Sequence[Any], rates: Sequence[int] | None) -> torch.Tensor:
        from ...shared.audio import prepare_clips

        clips, _ = prepare_clips(audio, rates, target_rate=SAMPLE_RATE, mono=True)
        shortest = int(round(self.min_audio_seconds * SAMPLE_RATE))
        out = []
        for i, clip in enumerate(clips):
            if clip.shape[1] < shortest:
                raise InputError(
                    f"audio of {clip.shape[1] / SAMPLE_RATE:.3f} s is shorter than ImageBind's clip length "
                    f"({self.min_audio_seconds:g} s, kwargs.min_audio_seconds)",
                    field="audio",
                    sample=i,
                )
            out.append(audio_clips(torch.tensor(clip)))  # a copy: the clip may be a read-only view
        return torch.stack(out)

    def _video(self, video: Sequence[Any]) -> torch.Tensor:
        shape = (len(video), VIDEO_CLIPS * 3, 3, CLIP_FRAMES, SIZE, SIZE)
        out = torch.empty(shape, device=self.device, dtype=torch.float32)
        for i, frames in enumerate(video):
            frames = torch.as_tensor(frames)
            if frames.ndim != 4 or frames.shape[1] != 3 or frames.shape[0] == 0:
                raise InputError(f"expected frames (T, 3, H, W), got {tuple(frames.shape)}", field="video", sample=i)
            video_clips(frames, self.device, out[i])
        return out

    def __call__(
        self,
        prompt: Sequence[str] | None = None,
        video: Sequence[Any] | None = None,
        audio: Sequence[Any] | None = None,
        audio_sample_rate: Sequence[int] | None = None,
        **_: Any,
    ) -> RewardOutput:
        given = {"text": prompt, "audio": audio, "vision": video}
        n = None
        for modality in self.modalities:
            values = given[modality]
            if values is None:
                raise InputError(f"mode {self.mode} needs the {FIELDS[modality]}", field=FIELDS[modality])
            for i, value in enumerate(values):
                if value is None:
                    raise InputError(
                        f"mode {self.mode} needs the sample's {FIELDS[modality]}", field=FIELDS[modality], sample=i
                    )
            if n is not None and len(values) != n:
                raise InputError(f"got {len(values)} values for {n} samples", field=FIELDS[modality])
            n = len(values)
        ib = imagebind_modules()[0]
        kinds = {"text": ib.ModalityType.TEXT, "audio": ib.ModalityType.AUDIO, "vision": ib.ModalityType.VISION}
        inputs: dict[str, torch.Tensor] = {}
        index = None
        if "text" in self.modalities:
            prompts = [str(p) for p in given["text"] or ()]
            unique = list(dict.fromkeys(prompts))
            tokens = self.tokenizer(unique)
            inputs[kinds["text"]] = (tokens if tokens.ndim == 2 else tokens[None]).to(self.device)
            index = torch.tensor([unique.index(p) for p in prompts], device=self.device)
        if "audio" in self.modalities:
            inputs[kinds["audio"]] = self._audio(audio or (), audio_sample_rate).to(self.device, self.dtype)
        if "vision" in self.modalities:
            inputs[kinds["vision"]] = self._video(video or ()).to(self.dtype)
        with torch.inference_mode():
            found = self.model(inputs)
        emb = {m: found[kinds[m]] for m in self.modalities}
        if index is not None:
            emb["text"] = emb["text"][index]
        pairs = {p: cosine(emb[PAIRS[p][0]], emb[PAIRS[p][1]]) for p in self.weights}
        score = torch.stack([w * pairs[p] for p, w in self.weights.items()]).sum(dim=0)
        return RewardOutput(score.cpu().numpy(), extras={f"{p}_similarity": v.cpu().numpy() for p, v in pairs.items()})
