"""Video rewards that average an image reward over sampled frames: ``score = mean_t image_reward(frame_t)``.

The image reward is an inner reward (:meth:`FrameAverage.inner_rewards`): the loader builds it as if
it were one more config entry (``reward_model`` = the image reward, same ``model_path``, ``device``,
``dtype`` and the remaining kwargs), so it is the very instance any ``clip_score`` /
``laion_aesthetic`` entry with the same settings uses: one model in memory, no copied scoring code.
Every frame of a call's videos goes to the image reward together (in chunks of
``frame_batch_size``), the prompt repeated per frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Protocol, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError, InputError, RewardOutputError
from ...shared.media import to_image_tensor, to_pil_rgb
from ...shared.video import CONVERT_BYTES, float_frames
from ...shared.weights import load_state_dict, strip_prefix
from ..base import InnerReward, Inputs, PointwiseReward, Reward, RewardOutput, invoke, is_text_extra, validate_scores
from ..models.clip import ClipBackbone
from ..models.weights import resolve_weights_file
from ..options import PositiveInt, WeightPath, model_validator
from .vbench import CLIP_MEAN, CLIP_STD, VBenchOptions, middle_indices, vbench_transform

VBENCH_CLIP_T_FRAMES = 8  # VBench's CLIP-T reads 8 frames (sample="middle")


class _PixelScorer(Protocol):
    """An image reward with a differentiable path (a video reward built on it has one only then)."""

    def score_pixels(self, pixels: Any, *, gradient_checkpointing: bool = ..., **fields: Any) -> Any: ...


class FrameAverage(PointwiseReward):
    """Mean over sampled frames of the image reward named by ``frame_reward``.

    Inputs: ``video`` as a tensor (T, 3, H, W) in its native form (uint8 for 8-bit sources: a ``uint8`` image
    reward takes those bits, a ``float`` one gets ``x / 255`` a few full-resolution frames at a time), plus the
    image reward's other fields (e.g. ``prompt``, repeated for every frame). The image reward's extras are
    averaged per video too. Options: :class:`Options`; the remaining keyword arguments configure the image reward
    (same names as in its model card).
    """

    frame_reward: ClassVar[str] = ""

    class Options(VBenchOptions):
        image_reward: InnerReward = None
        """The image reward averaged (built by the loader from the entry: ``frame_reward`` with this entry's
        ``model_path``, device, dtype and the options not declared here)."""
        frame_batch_size: PositiveInt = 64
        """Frames per call of the image reward."""

    options: Options

    @classmethod
    def inner_rewards(
        cls, kwargs: dict[str, Any], *, model_path: str | None, device: str, dtype: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The image reward (``frame_reward``) with this entry's weights, device, dtype and other kwargs."""
        own = {k: kwargs.pop(k) for k in cls.Options.model_fields if k in kwargs and k != "image_reward"}
        entry = {
            "reward_model": cls.frame_reward,
            "model_path": model_path,
            "device": device,
            "dtype": dtype,
            "kwargs": kwargs,
        }
        return own, {"image_reward": entry}

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.preset = self.options.preset
        image_reward = self.options.image_reward
        if not isinstance(image_reward, Reward):
            raise ConfigError(
                f"{self.name} averages a built image reward; build it through the loader, "
                "e.g. rewardzoo.load_reward({'name': 'video_clip_score', 'model_path': ...})",
                field="image_reward",
            )
        self.num_frames = self.options.sampled_frames()  # the preset samples inside the call
        self.frame_batch_size = self.options.frame_batch_size
        self.inputs = replace(self.inputs, num_frames=self.num_frames)
        self.image_reward = image_reward
        self.thread_safe = image_reward.thread_safe

    def inner_part(self, attribute: str, kind: type | None = None) -> Any:
        """The image reward's ``attribute`` that a preset reads (its CLIP backbone, its MUSIQ network), of ``kind``
        when given; ConfigError when the image reward has none (another reward than ``frame_reward``). The video
        family reaches the image reward only through this inner reward, never by importing its class."""
        part = getattr(self.image_reward, attribute, None)
        if part is None or (kind is not None and not isinstance(part, kind)):
            raise ConfigError(
                f"{self.name}: preset {self.preset} reads the {attribute} of a {self.frame_reward} image reward, "
                f"got {type(self.image_reward).__name__}",
                field="kwargs.preset",
            )
        return part

    def vbench(self, video: Sequence[torch.Tensor], *args: Any, **fields: Any) -> RewardOutput:
        """``preset: vbench``: VBench's own computation (subclasses)."""
        raise ConfigError(f"{self.name} has no VBench preset", field="kwargs.preset")

    def __call__(self, video: Sequence[torch.Tensor], **fields: Sequence[Any]) -> RewardOutput:
        if self.preset == "vbench":
            for i, v in enumerate(video):
                if int(v.shape[0]) == 0:
                    raise InputError("the video has no frames", field="video", sample=i)
            with torch.inference_mode():
                return self.vbench(video, **fields)
        wanted = [f for f in self.inputs.fields if f != "video"]
        for name in wanted:
            if len(fields[name]) != len(video):
                raise InputError(
                    f"{len(video)} video but {len(fields[name])} {name} entries; one {name} per video",
                    field=name,
                    sample=min(len(video), len(fields[name])),
                )
        counts = [int(v.shape[0]) for v in video]
        if 0 in counts:
            raise InputError("the video has no frames", field="video", sample=counts.index(0))
        owner = np.repeat(np.arange(len(video)), counts)  # flat frame index -> video index
        flat_frames: list[Any] = [frame for v in video for frame in v.unbind(0)]
        form = self.image_reward.inputs.images
        # Full-resolution frames a few at a time: a chunk's copy in the image reward's form holds at most
        # CONVERT_BYTES (float32: 4 bytes a value, PIL about 1.3, uint8 1), as frame_batches bounds it.
        size = {"float": 4, "pil": 2}.get(form, 1)
        step = min(self.frame_batch_size, *(max(1, CONVERT_BYTES // (size * max(1, int(v[0].numel())))) for v in video))
        flat_fields = {name: [fields[name][i] for i in owner.tolist()] for name in wanted}
        scores: list[np.ndarray] = []
        extras: dict[str, list[np.ndarray]] = {}
        for start in range(0, len(flat_frames), step):
            stop = start + step
            chunk = {name: values[start:stop] for name, values in flat_fields.items()}
            frames = flat_frames[start:stop]
            if form == "pil":
                frames = [to_pil_rgb(f) for f in frames]
            elif len({tuple(f.shape) for f in frames}) == 1:
                frames = torch.stack(frames)  # one batched tensor: a single preprocessing group
                if form == "float":  # a uint8 frame's float value (a "uint8" image reward takes the 8 bits)
                    frames = float_frames(frames)
            elif form == "float":
                frames = [float_frames(f) for f in frames]
            try:
                out = invoke(self.image_reward, {"image": frames, **chunk})
            except InputError as exc:  # locate it: the sample is the video, the frame goes into the message
                if exc.field not in (None, "image"):
                    raise exc.located(indices=owner[start:stop].tolist(), sample=int(owner[start])) from None
                offset, exc = _culprit(flat_frames[start:stop], exc)
                flat = start + (offset if offset is not None else exc.sample or 0)
                first = int(np.searchsorted(owner, owner[flat]))  # flat index of that video's first frame
                raise exc.located(
                    indices=(),
                    sample=int(owner[flat]),
                    field="video",
                    renamed={"image": "video"},
                    prefix=f"frame {flat - first}: ",
                ) from None
            try:
                s, e = validate_scores(out, len(frames), self.image_reward.name, self.image_reward.info.score_range)
            except RewardOutputError as exc:  # frame positions -> the videos they belong to
                raise exc.remapped(owner[start:stop].tolist()) from exc
            scores.append(s)
            for key, val in e.items():
                if not is_text_extra(val):  # numeric extras average per video; text has no mean
                    extras.setdefault(key, []).append(val)
        per_frame = np.concatenate(scores)
        bounds = np.cumsum([0] + counts)
        mean = [float(self.formula(per_frame[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
        extra_means = {}
        for key, parts in extras.items():
            vals = np.concatenate(parts)
            extra_means[key] = [float(vals[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:])]
        return RewardOutput(mean, extras=extra_means)

    @staticmethod
    def formula(frame_scores: Any, axis: int = -1) -> Any:
        """The video's score from its frames' scores: their mean (NumPy arrays or tensors)."""
        return frame_scores.mean(axis) if isinstance(frame_scores, np.ndarray) else frame_scores.mean(dim=axis)

    def score_pixels(
        self, pixels: torch.Tensor, gradient_checkpointing: bool = False, **fields: Sequence[Any]
    ) -> torch.Tensor:
        """Differentiable score of float videos (B, T, 3, H, W) in [0, 1] -> (B,).

        Not available with ``preset: vbench`` (VBench's pipeline has no gradient path here).
        ``num_frames`` frames are sampled uniformly as in a call (indices of
        :func:`rewardzoo.shared.video.sample_indices`), every frame of every video goes to the image
        reward's ``score_pixels`` in chunks of ``frame_batch_size`` (the other fields, e.g. ``prompt``,
        repeated per frame), and :meth:`formula` averages them per video.
        """
        from ...shared.video import sample_indices

        if self.preset is not None:
            raise ConfigError(
                "score_pixels has no VBench preset: drop kwargs.preset for the differentiable path",
                field="kwargs.preset",
            )
        if not isinstance(pixels, torch.Tensor) or pixels.ndim != 5:
            shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
            raise InputError(f"expected float videos of shape (B, T, 3, H, W) in [0, 1], got {shape}", field="video")
        b, t = pixels.shape[:2]
        wanted = [f for f in self.inputs.fields if f != "video"]
        for name in wanted:
            if name not in fields or len(fields[name]) != b:
                got = len(fields[name]) if name in fields else 0
                raise InputError(f"{b} video but {got} {name} entries; one {name} per video", field=name)
        keep = sample_indices(int(t), self.num_frames)
        if len(keep) != t:
            pixels = pixels[:, torch.tensor(keep, device=pixels.device)]
        k = pixels.shape[1]
        frames = pixels.reshape(b * k, *pixels.shape[2:])
        flat_fields = {name: [fields[name][i] for i in range(b) for _ in range(k)] for name in wanted}
        scorer = cast(_PixelScorer, self.image_reward)  # differentiable() checked this reward's path
        parts = []
        for start in range(0, b * k, self.frame_batch_size):
            stop = start + self.frame_batch_size
            chunk = {name: values[start:stop] for name, values in flat_fields.items()}
            parts.append(
                scorer.score_pixels(frames[start:stop], gradient_checkpointing=gradient_checkpointing, **chunk)
            )
        per_frame = parts[0] if len(parts) == 1 else torch.cat(parts)
        return self.formula(per_frame.reshape(b, k))


def _culprit(frames: Sequence[Any], exc: InputError) -> tuple[int | None, InputError]:
    """The first frame the image conversion rejects, and its error (a batched tensor hides which)."""
    for i, frame in enumerate(frames):
        try:
            to_image_tensor(frame)
        except InputError as err:
            return i, err
    return None, exc


class VideoClipScore(FrameAverage):
    """Mean over sampled frames of CLIPScore, ``2.5 * max(cos(frame, prefix + prompt), 0)``.

    Inputs: ``video`` and ``prompt``. Range [0, 2.5]; extra ``cosine`` = mean raw frame-text cosine
    (against ``prefix + prompt`` on the sampled frames; with ``preset: vbench`` it is VBench's CLIP-T:
    8 midpoint frames, no antialias, the bare prompt). ``model_path`` and the other options are those of
    ``clip_score`` (default open_clip ``ViT-B-32`` / ``pretrained: openai``, ``prefix: "A photo
    depicts "``).
    """

    frame_reward = "clip_score"
    inputs = Inputs(("video", "prompt"), frames="native")

    def vbench(self, video: Sequence[torch.Tensor], prompt: Sequence[str], **_: Any) -> RewardOutput:
        """VBench CLIP-T: 8 frames at interval midpoints, ``clip_transform`` on the uint8 frames (bicubic,
        no antialias, centre crop, /255), raw cosine against the bare prompt (no prefix), mean over frames.
        The score keeps this reward's formula on those cosines (mean ``2.5 * max(cos, 0)``); the extra
        ``cosine`` is VBench's CLIP-T number."""
        backbone = self.inner_part("backbone", ClipBackbone)
        if len(prompt) != len(video):
            raise InputError(
                f"{len(video)} video but {len(prompt)} prompt entries; one prompt per video",
                field="prompt",
                sample=min(len(video), len(prompt)),
            )
        text = backbone.encode_text(list(prompt))
        scores, cosines = [], []
        for i, frames in enumerate(video):
            picked = frames[torch.tensor(middle_indices(VBENCH_CLIP_T_FRAMES, int(frames.shape[0])))]
            x = vbench_transform(
                picked.to(backbone.device),
                size=backbone.image_size,
                interpolation="bicubic",
                crop=True,
                mean=CLIP_MEAN,
                std=CLIP_STD,
                uint8=True,
            )
            img = torch.cat([backbone.encode_image(c) for c in x.split(self.frame_batch_size)])
            cos = (img.double() @ text[i].double()).cpu()
            scores.append(float((2.5 * cos.clamp_min(0.0)).mean()))
            cosines.append(float(cos.mean()))
        return RewardOutput(scores, extras={"cosine": cosines})


#: The LAION aesthetic predictor v1 linear head on CLIP ViT-L/14 (the one VBench's aesthetic quality uses).
OFFICIAL_LINEAR_HEAD_URL = "https://github.com/LAION-AI/aesthetic-predictor/raw/main/sa_0_4_vit_l_14_linear.pth"


def load_linear_aesthetic_head(path: str, field: str = "kwargs.linear_head_path") -> nn.Linear:
    """The v1 head, ``Linear(D, 1)``, from a state dict with the published key names ``weight`` / ``bias``
    (optionally prefixed ``module.`` / ``model.``), loaded strictly."""
    try:
        state = strip_prefix(load_state_dict(path), ("module.", "model."))
    except InputError as exc:
        raise ConfigError(exc.message, field=field) from None
    weight = state.get("weight")
    if weight is None or weight.ndim != 2 or weight.shape[0] != 1 or set(state) != {"weight", "bias"}:
        raise ConfigError(
            f"'{path}' is not a LAION aesthetic v1 linear head (expected exactly 'weight' (1, D) and "
            f"'bias'; keys: {sorted(state)[:6]})",
            field=field,
        )
    head = nn.Linear(int(weight.shape[1]), 1)
    try:
        head.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"'{path}' does not fit Linear({int(weight.shape[1])}, 1): {exc}", field=field) from None
    return head.eval().requires_grad_(False)


class VideoAesthetic(FrameAverage):
    """Mean over sampled frames of the LAION aesthetic v2 score (``laion_aesthetic``), about 1-10.

    ``preset: vbench``: VBench's aesthetic quality (every frame, ``clip_transform``, the v1 linear head from
    ``linear_head_path``, /10). Inputs: ``video``. ``model_path`` (the aesthetic head) and ``clip_model``/``clip_pretrained``/
    ``backend`` are those of ``laion_aesthetic``; options: :class:`Options`. Range unbounded in principle, about
    1-10.
    """

    frame_reward = "laion_aesthetic"
    inputs = Inputs(("video",), frames="native")

    class Options(FrameAverage.Options):
        linear_head_path: WeightPath | None = None
        """``preset: vbench`` only: the v1 linear aesthetic head (default: the official
        ``sa_0_4_vit_l_14_linear.pth``)."""

        @model_validator(mode="after")
        def _head_with_preset(self) -> VideoAesthetic.Options:
            if self.linear_head_path is not None and self.preset != "vbench":
                raise ConfigError(
                    "kwargs.linear_head_path is used by preset: vbench only", field="kwargs.linear_head_path"
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        linear_head_path = self.options.linear_head_path
        self.linear_head: torch.nn.Module | None = None
        if self.preset == "vbench":
            head = load_linear_aesthetic_head(resolve_weights_file(linear_head_path or OFFICIAL_LINEAR_HEAD_URL))
            dim = self.backbone().embed_dim
            if head.in_features != dim:
                raise ConfigError(
                    f"the linear head expects {head.in_features}-d embeddings but the CLIP model gives {dim}-d ones",
                    field="kwargs.linear_head_path",
                )
            self.linear_head = head.to(self.backbone().device)

    def backbone(self) -> ClipBackbone:
        """The CLIP backbone of the inner ``laion_aesthetic`` (VBench's features come from it)."""
        return cast(ClipBackbone, self.inner_part("backbone", ClipBackbone))

    def vbench(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        """VBench aesthetic quality: every frame, ``clip_transform`` on the float 0-255 frames (bicubic, no
        antialias, centre crop, /255), L2-normalised CLIP features in float32, the v1 ``Linear(768, 1)`` head,
        divided by 10, mean over frames (about 0-1)."""
        backbone, head = self.backbone(), self.linear_head
        if head is None:  # (set by __init__ for preset: vbench)
            raise ConfigError("the VBench aesthetic head is not loaded", field="kwargs.linear_head_path")
        scores = []
        for frames in video:
            parts = []
            for chunk in frames.split(self.frame_batch_size):
                x = vbench_transform(
                    chunk.to(backbone.device),
                    size=backbone.image_size,
                    interpolation="bicubic",
                    crop=True,
                    mean=CLIP_MEAN,
                    std=CLIP_STD,
                )
                feats = F.normalize(backbone.encode_image(x).float(), dim=-1, p=2)
                parts.append(head(feats).squeeze(-1))
            scores.append(float((torch.cat(parts) / 10).mean()))
        return RewardOutput(scores)
