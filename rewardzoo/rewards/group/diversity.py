"""Group diversity: how far each sample lies from the other members of its group in an embedding space.

With ``e_i`` the L2-normalised embedding of sample i and ``d_ij = 1 - cos(e_i, e_j)`` over the n members of
a group (:func:`distance_matrix`):

- ``group_diversity``: ``score_i = mean_{j != i} d_ij`` (range [0, 2]; a group of one scores 0). The extra
  ``nearest_distance`` is ``min_{j != i} d_ij``.
- ``diversity_weighted`` (GARDO's diversity-aware advantage, He et al. 2025, arXiv:2512.24138; the form of
  ``PerPromptStatTracker.update(type='gardo')`` in github.com/tinnerhrhe/GARDO, commit 1cc77fb, file
  ``flow_grpo/stat_tracking.py``): with ``s`` the oriented base scores of the group,
  ``A_i = s_i - mean(s)``, ``d_i = min_{j != i} d_ij`` and ``w_i = d_i / mean(d)`` when ``A_i >= 0`` else 1,
  ``score_i = A_i * w_i`` — only better-than-average samples are amplified, in proportion to their
  novelty; no division by the group std (GARDO drops it). ``mean(d) == 0`` (all members identical) gives
  ``w = 1``. ``distance: mean`` uses the mean distance instead of the nearest one.

Embeddings (``embedding:``): ``dino`` — the CLS token of a DINO ViT (:mod:`rewardzoo.rewards.models.dino`, the model
and preprocessing of ``subject_consistency``; default ``facebook/dino-vitb16``); ``clip`` — the image
features of a CLIP backbone (:mod:`rewardzoo.rewards.models.clip`, shared with every reward that loads the same one;
default open_clip ``ViT-B-32`` / ``openai``); ``timm`` — a timm model's pooled output after timm's own eval
transform for it (:mod:`rewardzoo.rewards.models.timm_backbone`; default ``vit_large_patch16_dinov3.lvd1689m``).
``media: video`` embeds ``num_frames`` uniformly sampled frames and averages their normalised embeddings (then
normalises the mean).

``preset: gardo``: GARDO's embedding (1cc77fb, ``scripts/train_sd3_grpo_gardo.py``): ``embedding: timm`` with
``vit_large_patch16_dinov3.lvd1689m`` (unless ``model_path`` names another copy), images only, and for
``diversity_weighted`` the nearest distance; options that contradict it are a ConfigError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, InputError
from ...shared.video import float_frames
from ..base import GroupwiseReward, Inputs, RewardOutput
from ..models.groups import group_positions
from ..options import PositiveInt, RewardOptions, WeightPath, model_validator
from .ranking import GroupwiseOverBase

DEFAULT_MODELS = {"dino": "facebook/dino-vitb16", "clip": "ViT-B-32", "timm": "vit_large_patch16_dinov3.lvd1689m"}
DEFAULT_RESIZE = 224  # DINO's shorter side


def distance_matrix(embeddings: np.ndarray) -> np.ndarray:
    """``1 - cos`` between every pair of rows of (n, D) embeddings (normalised here), clipped to [0, 2]."""
    e = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    return 1.0 - np.clip(e @ e.T, -1.0, 1.0)


def off_diagonal(distances: np.ndarray) -> np.ndarray:
    """(n, n - 1): each row's distances to the other members."""
    n = distances.shape[0]
    return distances[~np.eye(n, dtype=bool)].reshape(n, n - 1)


class Embedder:
    """One embedding of images or videos for the diversity rewards (see the module docstring); its settings are
    checked by :class:`EmbeddingOptions`."""

    def __init__(
        self,
        embedding: str,
        model_path: str | None,
        device: str,
        dtype: Any,
        *,
        media: str,
        num_frames: int | None,
        batch_size: int,
        resize: int | None,
        pretrained: str | None,
        backend: str,
        processor_path: str | None,
        owner: str = "group_diversity",
    ) -> None:
        self.embedding, self.media, self.num_frames, self.batch_size = embedding, media, num_frames, batch_size
        self.resize = DEFAULT_RESIZE if resize is None else resize
        self.model_path = model_path or DEFAULT_MODELS[self.embedding]
        if self.embedding == "dino":
            from ..models.dino import load_dino_backbone

            self.dino = load_dino_backbone(self.model_path, device, dtype)
        elif self.embedding == "timm":
            from ..models.timm_backbone import load_timm_backbone

            self.timm = load_timm_backbone(self.model_path, device, dtype, reward=owner)
        else:
            from ..models.clip import load_clip_backbone

            self.clip = load_clip_backbone(
                self.model_path,
                backend=backend,
                device=device,
                dtype=dtype,
                pretrained=pretrained,
                processor_path=processor_path,
            )

    def inputs(self) -> Inputs:
        """The medium as tensors: images float (3, H, W); videos (T, 3, H, W) with ``num_frames`` sampled frames
        in their native form (uint8 for 8-bit sources, converted a batch at a time; float in [0, 1])."""
        return Inputs((self.media,), images="float", frames="native", num_frames=self.num_frames)

    def __call__(self, media: Sequence[Any]) -> np.ndarray:
        """(N, D) float64 L2-normalised embeddings of the call's images or videos."""
        import torch

        with torch.inference_mode():
            if self.media == "image":
                images = [_float_image(x, i, "image") for i, x in enumerate(media)]
                return self._frames(images, "image")
            out = []
            for i, video in enumerate(media):
                frames = _float_frames(video, i)
                try:
                    feats = self._frames(list(frames.unbind(0)), "video")
                except InputError as exc:
                    raise exc.located(indices=(), sample=i, field="video") from None
                mean = feats.mean(axis=0)
                out.append(mean / np.linalg.norm(mean))
            return np.stack(out) if out else np.zeros((0, 0))

    def _frames(self, images: list, field: str) -> np.ndarray:
        """Normalised embeddings of images (3, H, W), float in [0, 1] (or uint8 video frames), same-sized ones in
        batches of ``batch_size``."""
        import torch
        import torch.nn.functional as F

        out: list[Any] = [None] * len(images)
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, image in enumerate(images):
            by_size.setdefault(tuple(image.shape), []).append(i)
        for idx in by_size.values():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                batch = torch.stack([images[i] for i in chunk])
                if self.embedding == "dino":
                    feats = self.dino.features(self.dino.preprocess(batch, self.resize))
                elif self.embedding == "timm":
                    feats = self.timm.features(self.timm.preprocess(float_frames(batch)))
                else:
                    feats = self.clip.encode_images(batch, field=field)
                feats = F.normalize(feats.detach().to("cpu", torch.float64), dim=-1).numpy()
                for k, i in enumerate(chunk):
                    out[i] = feats[k]
        return np.stack(out)


def _float_image(value: Any, sample: int, field: str):
    """A float tensor (3, H, W) in [0, 1] from any supported image."""
    import torch

    from ...shared.media import to_uint8_tensor

    try:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            x = value.detach()
        else:
            x = to_uint8_tensor(value).float() / 255.0
    except InputError as exc:
        raise exc.located(field=field, sample=sample) from None
    if x.ndim != 3 or x.shape[0] != 3 or 0 in x.shape:
        raise InputError(f"expected an RGB image (3, H, W), got shape {tuple(x.shape)}", field=field, sample=sample)
    if not bool(torch.isfinite(x).all()):
        raise InputError("the image has NaN or infinite pixels", field=field, sample=sample)
    return x


def _float_frames(value: Any, sample: int):
    """A tensor (T, 3, H, W), uint8 or float in [0, 1] (T >= 1), from a video tensor or a list of frames."""
    import torch

    if (
        isinstance(value, torch.Tensor)
        and value.ndim == 4
        and (value.dtype == torch.uint8 or value.is_floating_point())
    ):
        frames = value.detach()
    elif isinstance(value, (list, tuple)):
        frames = torch.stack([_float_image(f, sample, "video") for f in value]) if value else None
    else:
        raise InputError(
            f"expected a video as a float tensor (T, 3, H, W) or a list of frames, got {type(value).__name__}",
            field="video",
            sample=sample,
        )
    if frames is None or frames.shape[0] == 0:
        raise InputError("the video has no frames", field="video", sample=sample)
    if frames.shape[1] != 3:
        raise InputError(f"expected frames (T, 3, H, W), got shape {tuple(frames.shape)}", field="video", sample=sample)
    if frames.is_floating_point() and not bool(torch.isfinite(frames).all()):
        raise InputError("the video has NaN or infinite pixels", field="video", sample=sample)
    return frames


class EmbeddingOptions(RewardOptions):
    """The embedding options of the diversity rewards (``group_diversity``, ``diversity_weighted``); ``pretrained``,
    ``backend`` and ``processor_path`` apply to ``embedding: clip``, as for ``clip_score`` (its
    :class:`~rewardzoo.rewards.models.clip.ClipOptions`, not imported here: this module loads without torch)."""

    embedding: Literal["dino", "clip", "timm"] | None = None
    """The embedding model family: ``dino`` (default), ``clip`` or ``timm`` (``preset: gardo``: timm)."""
    media: Literal["image", "video"] = "image"
    """What is embedded: images, or videos (the mean of ``num_frames`` frames' embeddings)."""
    num_frames: PositiveInt | None = 8
    """Video: frames sampled uniformly per video (null: every frame)."""
    embed_batch_size: PositiveInt = 32
    """Images (or frames) per embedding forward pass."""
    resize: PositiveInt | None = None
    """DINO's shorter side in pixels (default 224); not with ``embedding: timm`` (timm's data config)."""
    pretrained: WeightPath | None = "openai"
    """CLIP: open_clip's weights tag or a weights file, for a ``model_path`` naming an architecture."""
    backend: Literal["auto", "open_clip", "transformers"] = "auto"
    """CLIP: which library builds the model (``auto``: by the files ``model_path`` holds)."""
    processor_path: WeightPath | None = None
    """CLIP, transformers only: where the tokenizer and image-processor configs live (default ``model_path``)."""
    preset: Literal["gardo"] | None = None
    """``gardo``: GARDO's embedding (timm DINOv3 on images, nearest distance); options that contradict it are
    refused."""

    @model_validator(mode="after")
    def _preset_and_resize(self) -> EmbeddingOptions:
        if self.preset == "gardo":
            clashes = {
                "embedding": self.embedding not in (None, "timm"),
                "media": self.media != "image",
                "resize": self.resize is not None,
                "distance": getattr(self, "distance", None) not in (None, "nearest"),
            }
            for key, clash in clashes.items():
                if clash:
                    raise ConfigError(
                        "preset: gardo runs GARDO's embedding (timm DINOv3 on images, nearest distance); "
                        f"drop kwargs.{key} (got {getattr(self, key)!r})",
                        field=f"kwargs.{key}",
                    )
        if self.resize is not None and self.embedding == "timm":
            raise ConfigError(
                "kwargs.resize is DINO's; with embedding: timm the size is timm's data config for the model",
                field="kwargs.resize",
            )
        return self

    def embedding_name(self) -> str:
        """The embedding used: the configured one, ``timm`` under ``preset: gardo``, else ``dino``."""
        return "timm" if self.preset == "gardo" else self.embedding or "dino"


def _embedder(model_path: str | None, device: str, dtype: Any, options: EmbeddingOptions, owner: str) -> Embedder:
    return Embedder(
        options.embedding_name(),
        model_path,
        device,
        dtype,
        media=options.media,
        num_frames=options.num_frames,
        batch_size=options.embed_batch_size,
        resize=options.resize,
        pretrained=options.pretrained,
        backend=options.backend,
        processor_path=options.processor_path,
        owner=owner,
    )


class GroupDiversity(GroupwiseReward):
    """Mean ``1 - cos`` distance of each sample to the other members of its group; range [0, 2].

    Options: :class:`EmbeddingOptions`. ``model_path`` is the embedding model's. Extra: ``nearest_distance``. See
    the module docstring.
    """

    inputs: Inputs = Inputs(("image", "group_id"), images="float")

    class Options(EmbeddingOptions):
        pass

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.preset = self.options.preset
        self.embedder = _embedder(model_path, device, self.dtype, self.options, "group_diversity")
        self.model_path = self.embedder.model_path
        own = self.embedder.inputs()
        self.inputs = replace(own, fields=(*own.fields, "group_id"))

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        media = fields.get(self.embedder.media)
        if media is None:
            raise InputError(
                f"group_diversity needs '{self.embedder.media}' on every sample", field=self.embedder.media
            )
        groups = group_positions(fields.get("group_id"), len(media))
        embeddings = self.embedder(media)
        mean, nearest = np.zeros(len(media)), np.zeros(len(media))
        for idx in groups:
            if idx.size < 2:
                continue
            others = off_diagonal(distance_matrix(embeddings[idx]))
            mean[idx], nearest[idx] = others.mean(axis=1), others.min(axis=1)
        return RewardOutput(mean, extras={"nearest_distance": nearest})


class DiversityWeighted(GroupwiseOverBase):
    """GARDO's diversity-aware group advantage of a base reward: ``(s_i - mean(s)) * w_i``; range (-inf, inf).

    ``w_i = d_i / mean(d)`` for samples at or above the group mean, 1 below it; ``d_i`` the distance to the
    nearest other member (``distance: nearest``, GARDO's) or the mean distance (``distance: mean``), in the
    embedding of ``group_diversity`` (same options; ``model_path`` is the embedding model's, the base sets
    its own inside ``base``; ``preset: gardo``: GARDO's timm DINOv3 embedding); options: :class:`Options`.
    Extras: ``base_score``, ``diversity_weight``, ``distance``.
    """

    class Options(GroupwiseOverBase.Options, EmbeddingOptions):
        distance: Literal["nearest", "mean"] | None = None
        """``d_i``: the distance to the nearest other member (``nearest``, GARDO's; the default) or the mean
        distance (``mean``)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(None, device, dtype, **options)  # model_path is the embedding model's, not the base's
        self.distance = self.options.distance or "nearest"
        self.preset = self.options.preset
        self.embedder = _embedder(model_path, device, self.dtype, self.options, "diversity_weighted")
        self.model_path = self.embedder.model_path
        medium = self.embedder.media
        base = self.required_base()
        fields = (*base.inputs.fields, "group_id")
        if medium not in fields:  # the base does not see the medium: ours decides its form
            own = self.embedder.inputs()
            self.inputs = replace(
                base.inputs,
                fields=(medium, *fields),
                images=own.images,
                frames=own.frames,
                num_frames=own.num_frames,
            )
        elif medium == "video" and base.inputs.num_frames != self.embedder.num_frames:
            raise ConfigError(
                f"diversity_weighted: the base '{base.name}' samples "
                f"{base.inputs.num_frames} frames; set num_frames to the same "
                f"({base.inputs.num_frames}) so both see the same frames",
                field="kwargs.num_frames",
            )

    @classmethod
    def inner_rewards(
        cls, kwargs: dict[str, Any], *, model_path: str | None, device: str, dtype: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """As the other wrappers, except that ``model_path`` is the embedding model's (not refused)."""
        return super().inner_rewards(kwargs, model_path=None, device=device, dtype=dtype)

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        medium = self.embedder.media
        media = fields.get(medium)
        if media is None:
            raise InputError(f"diversity_weighted needs '{medium}' on every sample", field=medium)
        n = len(media)
        groups = group_positions(fields.get("group_id"), n)
        base = self.base_scores(fields, n)
        embeddings = self.embedder(media)
        out, weight, dist = np.zeros(n), np.ones(n), np.zeros(n)
        for idx in groups:
            advantage = base[idx] - base[idx].mean()
            if idx.size < 2:
                out[idx] = advantage
                continue
            others = off_diagonal(distance_matrix(embeddings[idx]))
            d = others.min(axis=1) if self.distance == "nearest" else others.mean(axis=1)
            mean_d = d.mean()
            w = np.where(advantage < 0, 1.0, d / mean_d) if mean_d > 0 else np.ones(idx.size)
            out[idx], weight[idx], dist[idx] = advantage * w, w, d
        return RewardOutput(out, extras={"base_score": base, "diversity_weight": weight, "distance": dist})
