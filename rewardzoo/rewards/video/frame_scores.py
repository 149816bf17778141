"""Video rewards that average an image reward over sampled frames: ``score = mean_t image_reward(frame_t)``.

The image reward is built through the :class:`~rewardzoo.loader.RewardLoader` as if it were one
more config entry (``reward_model`` = the image reward, same ``model_path``, ``device``, ``dtype``
and the remaining kwargs), so it is the very instance any ``clip_score`` / ``laion_aesthetic`` entry
with the same settings uses: one model in memory, no copied scoring code. Every frame of a call's
videos goes to the image reward together (in chunks of ``frame_batch_size``), the prompt repeated
per frame.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from ...errors import InputError
from ...shared.media import to_image_tensor, to_pil_rgb
from ...shared.video import check_num_frames, check_positive_int
from ..base import PointwiseReward, RewardOutput, validate_scores


class FrameAverage(PointwiseReward):
    """Mean over sampled frames of the image reward named by ``frame_reward``.

    Inputs: ``video`` as a float tensor (T, 3, H, W) in [0, 1], plus the image reward's other
    fields (e.g. ``prompt``, repeated for every frame). ``num_frames``: uniformly sampled frames
    (default 8; None = every frame). The image reward's extras are averaged per video too.
    Remaining keyword arguments configure the image reward (same names as in its model card).
    """

    frame_reward: ClassVar[str] = ""
    use_tensor_inputs = True
    modality = "video"
    extra = "video"

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 num_frames: int | None = 8, frame_batch_size: int = 64, loader: Any = None,
                 **frame_reward_kwargs: Any) -> None:
        super().__init__(model_path, device, dtype)
        self.num_frames = check_num_frames(num_frames)
        self.frame_batch_size = check_positive_int(frame_batch_size, "frame_batch_size")
        if loader is None:
            from ...loader import RewardLoader

            loader = RewardLoader()
        spec = {"name": f"{self.frame_reward} (frames of {type(self).__name__})", "reward_model": self.frame_reward,
                "model_path": model_path, "device": device, "dtype": dtype, "kwargs": frame_reward_kwargs}
        self.image_reward = loader.load(spec)
        self.thread_safe = self.image_reward.thread_safe

    def __call__(self, video: Sequence[torch.Tensor], **fields: Sequence[Any]) -> RewardOutput:
        wanted = [f for f in self.required_fields if f != "video"]
        for name in wanted:
            if len(fields[name]) != len(video):
                raise InputError(f"{len(video)} video but {len(fields[name])} {name} entries; one {name} per video",
                                 field=name, sample=min(len(video), len(fields[name])))
        counts = [int(v.shape[0]) for v in video]
        if 0 in counts:
            raise InputError("the video has no frames", field="video", sample=counts.index(0))
        owner = np.repeat(np.arange(len(video)), counts)  # flat frame index -> video index
        flat_frames: list[Any] = [frame for v in video for frame in v.unbind(0)]
        if not self.image_reward.use_tensor_inputs:
            flat_frames = [to_pil_rgb(f) for f in flat_frames]
        flat_fields = {name: [fields[name][i] for i in owner] for name in wanted}
        scores, extras = [], {}
        for start in range(0, len(flat_frames), self.frame_batch_size):
            stop = start + self.frame_batch_size
            chunk = {name: values[start:stop] for name, values in flat_fields.items()}
            frames = flat_frames[start:stop]
            if self.image_reward.use_tensor_inputs and len({tuple(f.shape) for f in frames}) == 1:
                frames = torch.stack(frames)  # one batched tensor: a single preprocessing group
            try:
                out = self.image_reward(image=frames, **chunk)
            except InputError as exc:  # locate it: the sample is the video, the frame goes into the message
                if exc.field not in (None, "image"):
                    raise InputError(exc.message, field=exc.field,
                                     sample=int(owner[start + (exc.sample or 0)])) from None
                offset, exc = _culprit(flat_frames[start:stop], exc)
                flat = start + (offset if offset is not None else exc.sample or 0)
                first = int(np.searchsorted(owner, owner[flat]))  # flat index of that video's first frame
                raise InputError(f"frame {flat - first}: {exc.message}", field="video",
                                 sample=int(owner[flat])) from None
            s, e = validate_scores(out, len(frames), self.image_reward.name)
            scores.append(s)
            for key, val in e.items():
                extras.setdefault(key, []).append(val)
        per_frame = np.concatenate(scores)
        bounds = np.cumsum([0] + counts)
        mean = [float(per_frame[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:])]
        extra_means = {}
        for key, parts in extras.items():
            vals = np.concatenate(parts)
            extra_means[key] = [float(vals[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:])]
        return RewardOutput(mean, extras=extra_means)


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
    (VBench's CLIP-T reports that mean cosine). ``model_path`` and the other options are those of
    ``clip_score`` (default open_clip ``ViT-B-32`` / ``pretrained: openai``, ``prefix: "A photo
    depicts "``).
    """

    frame_reward = "clip_score"
    required_fields = ("video", "prompt")
    score_range: ClassVar[tuple[float, float]] = (0.0, 2.5)


class VideoAesthetic(FrameAverage):
    """Mean over sampled frames of the LAION aesthetic v2 score (``laion_aesthetic``), about 1-10.

    Inputs: ``video``. ``model_path`` (the aesthetic head) and ``clip_model``/``clip_pretrained``/
    ``backend`` are those of ``laion_aesthetic``. Range unbounded in principle, about 1-10.
    """

    frame_reward = "laion_aesthetic"
    required_fields = ("video",)
