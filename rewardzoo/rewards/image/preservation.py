"""Edit preservation: how much of the source image an edit kept where it was not asked to change it.

The counter-reward against edits that redraw the whole image. With the result ``y``, the source ``x`` (both
in [0, 1], RGB) and ``K`` the pixels outside the edit mask (every pixel without a mask;
:mod:`rewardzoo.shared.editing` reads source and mask), ``metric`` is one of:

- ``psnr``: ``10 log10(1 / max(MSE_K, 1 / (3 |K| 255^2)))`` in dB, ``MSE_K`` the mean squared difference over
  ``K`` and the three channels: scikit-image's ``peak_signal_noise_ratio(data_range=1)`` wherever the images differ
  on ``K``; an image identical on ``K`` (inf there) scores the largest value an 8-bit pair of that size reaches,
  one value off by one (107.09 dB for 512x512 without a mask);
- ``ssim``: the mean over ``K`` and the channels of the SSIM map of Wang et al. (2004): 11x11 Gaussian window,
  sigma 1.5, ``C1 = 0.01^2``, ``C2 = 0.03^2``, population (co)variances, as scikit-image's
  ``structural_similarity(..., gaussian_weights=True, use_sample_covariance=False, data_range=1)``; like
  scikit-image's mean, only pixels whose window lies inside the image count (5 pixels at each border are left out);
- ``l1``: the mean absolute difference over ``K`` and the channels (lower is better);
- ``dino`` / ``clip``: the cosine of the two images' DINO CLS / CLIP image features; with a mask the result's
  edit region is first replaced by the source's, so only changes outside the mask lower the score.

Pixel metrics need the result at the source's size; images of one size are scored in one batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F

from ...errors import InputError
from ...shared.editing import edit_inputs
from ..base import Inputs, PointwiseReward, RewardOutput
from ..info import RewardInfo
from ..models.clip import ClipOptions
from ..options import PositiveInt

#: metric -> (higher_is_better, score range) of an instance scoring it.
#: PSNR's bound: 10 log10(3 |K| 255^2) stays below it up to 5e10 kept pixels.
PSNR_MAX = 160.0
METRICS: Mapping[str, tuple[bool, tuple[float, float]]] = {
    "psnr": (True, (0.0, PSNR_MAX)),
    "ssim": (True, (-1.0, 1.0)),
    "l1": (False, (0.0, 1.0)),
    "dino": (True, (-1.0, 1.0)),
    "clip": (True, (-1.0, 1.0)),
}
PIXEL_METRICS = ("psnr", "ssim", "l1")
SSIM_SIGMA, SSIM_RADIUS = 1.5, 5  # scikit-image's gaussian window: truncate 3.5 -> radius int(3.5 * 1.5 + 0.5)
SSIM_C1, SSIM_C2 = 0.01**2, 0.03**2


def ssim_map(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The SSIM map (B, C, H - 10, W - 10) of images (B, C, H, W) in [0, 1] (see the module docstring)."""
    t = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, device=x.device, dtype=torch.float64)
    g = torch.exp(-(t**2) / (2 * SSIM_SIGMA**2))
    g = (g / g.sum()).to(x.dtype)
    c = x.shape[1]
    stack = torch.cat([x, y, x * x, y * y, x * y], dim=1)  # one separable 'valid' blur for the five moments
    stack = F.conv2d(stack, g.view(1, 1, 1, -1).expand(5 * c, 1, 1, -1), groups=5 * c)
    ux, uy, uxx, uyy, uxy = F.conv2d(stack, g.view(1, 1, -1, 1).expand(5 * c, 1, -1, 1), groups=5 * c).split(c, dim=1)
    vx, vy, vxy = uxx - ux * ux, uyy - uy * uy, uxy - ux * uy
    return ((2 * ux * uy + SSIM_C1) * (2 * vxy + SSIM_C2)) / ((ux * ux + uy * uy + SSIM_C1) * (vx + vy + SSIM_C2))


def pixel_metric(metric: str, result: torch.Tensor, source: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``metric`` (float64) of uint8 results vs sources (B, 3, H, W) over the pixels where ``keep`` (B, H, W) is True.

    PSNR and L1 sum the exact 8-bit differences (then scale by 255 or 255^2); SSIM runs in float32 on [0, 1] values.
    """
    if metric == "ssim":
        per_pixel = ssim_map(result.float().div_(255), source.float().div_(255)).mean(dim=1)
        keep = keep[:, SSIM_RADIUS:-SSIM_RADIUS, SSIM_RADIUS:-SSIM_RADIUS]
        return (per_pixel * keep).sum(dim=(1, 2)).double() / keep.sum(dim=(1, 2)).double()
    diff = result.float().sub_(source.float())  # integer-valued: each pixel's channel sum (< 2^24) is exact in float32
    per_pixel = (diff.abs_() if metric == "l1" else diff.square_()).sum(dim=1).mul_(keep)
    total = per_pixel.double().sum(dim=(1, 2))
    if metric == "psnr":  # an 8-bit squared difference is 0 or >= 1: flooring the sum at 1 changes only identical pairs
        total = total.clamp_min(1.0)
    mean = total / (3 * keep.sum(dim=(1, 2)).double() * (255.0 if metric == "l1" else 255.0**2))
    return -10 * torch.log10(mean) if metric == "psnr" else mean


class EditPreservation(PointwiseReward):
    """How well an edit kept its source outside the edit mask: ``metric`` psnr, ssim, l1, dino or clip.

    Inputs: ``image`` (the result) and ``condition_images`` ([source] or [source, mask], see
    :mod:`rewardzoo.shared.editing`). ``model_path``: the DINO checkpoint (default ``facebook/dino-vitb16``) or the
    CLIP backbone (default open_clip ``ViT-B-32`` / ``pretrained: openai``) of the model-based metrics; none for
    the pixel metrics. Direction and range follow the metric (``l1`` is lower-is-better). Extra ``kept_fraction``:
    the share of pixels outside the mask (1 without one).
    """

    inputs = Inputs(("image", "condition_images"), images="uint8")
    default_models: ClassVar[Mapping[str, str]] = {"dino": "facebook/dino-vitb16", "clip": "ViT-B-32"}

    class Options(ClipOptions):
        metric: Literal["psnr", "ssim", "l1", "dino", "clip"] = "ssim"
        """What is compared outside the edit mask (``clip``'s backbone takes the CLIP options)."""
        resize: PositiveInt = 224
        """``dino``: the shorter side both images are resized to, keeping the aspect ratio (CLIP uses its own size)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        self.metric, self.resize = self.options.metric, self.options.resize
        backend, pretrained, processor_path = self.options.backend, self.options.pretrained, self.options.processor_path
        self.backbone: Any = None
        if self.metric == "dino":
            from ..models.dino import load_dino_backbone

            self.backbone = load_dino_backbone(model_path or self.default_models["dino"], device, self.dtype)
        elif self.metric == "clip":
            from ..models.clip import load_clip_backbone

            self.backbone = load_clip_backbone(
                model_path or self.default_models["clip"],
                backend=backend,
                device=device,
                dtype=self.dtype,
                pretrained=pretrained,
                processor_path=processor_path,
            )

    @property
    def info(self) -> RewardInfo:
        """The card's record with this metric's direction and range."""
        card = self.__dict__.get("_info") or RewardInfo.of_class(type(self))
        higher, bounds = METRICS[self.metric]
        return card.refined({"higher_is_better": higher, "score_range": bounds})

    @info.setter
    def info(self, value: RewardInfo) -> None:
        self.__dict__["_info"] = value

    @torch.inference_mode()
    def __call__(self, image: Sequence[torch.Tensor], condition_images: Sequence[Any], **_: Any) -> RewardOutput:
        edits = edit_inputs(condition_images)
        dev = torch.device(self.device)
        results, sources, keeps = [], [], []
        for i, (result, edit) in enumerate(zip(image, edits)):
            if result.shape != edit.source.shape and (self.metric in PIXEL_METRICS or edit.mask is not None):
                why = (
                    f"{self.metric} compares them pixel for pixel"
                    if self.metric in PIXEL_METRICS
                    else "the edit mask marks pixels of both"
                )
                raise InputError(
                    f"the result is {result.shape[2]}x{result.shape[1]}, its source (condition_images[0]) "
                    f"{edit.source.shape[2]}x{edit.source.shape[1]}: {why}, so they must be the same size",
                    field="image",
                    sample=i,
                )
            keep = torch.ones(result.shape[1:], dtype=torch.bool) if edit.mask is None else ~torch.from_numpy(edit.mask)
            if not keep.any() or (self.metric == "ssim" and not _ssim_region(keep).any()):
                where = " inside the 5-pixel border SSIM leaves out" if keep.any() else ""
                raise InputError(
                    f"the edit mask leaves no pixel outside the edit{where}: nothing to preserve",
                    field="condition_images",
                    sample=i,
                )
            results.append(result.to(dev))
            sources.append(edit.source.to(dev))
            keeps.append(keep.to(dev))
        kept = torch.tensor([float(k.float().mean()) for k in keeps])
        if self.metric in PIXEL_METRICS:
            scores = self._pixel_scores(results, sources, keeps)
        else:
            scores = self._feature_scores(results, sources, keeps)
        return RewardOutput(scores, extras={"kept_fraction": kept})

    def _pixel_scores(self, results: list, sources: list, keeps: list) -> torch.Tensor:
        if self.metric == "ssim":
            for i, r in enumerate(results):
                if min(r.shape[1:]) <= 2 * SSIM_RADIUS:
                    raise InputError(
                        f"ssim needs images larger than {2 * SSIM_RADIUS + 1}x{2 * SSIM_RADIUS + 1}, "
                        f"got {r.shape[2]}x{r.shape[1]}",
                        field="image",
                        sample=i,
                    )
        scores = torch.empty(len(results), dtype=torch.float64)
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, r in enumerate(results):
            by_size.setdefault(tuple(r.shape), []).append(i)
        for idx in by_size.values():
            x, y = torch.stack([results[i] for i in idx]), torch.stack([sources[i] for i in idx])
            scores[idx] = pixel_metric(self.metric, x, y, torch.stack([keeps[i] for i in idx])).cpu()
        return scores

    def _feature_scores(self, results: list, sources: list, keeps: list) -> torch.Tensor:
        pasted = [r if k.all() else torch.where(k, r, s) for r, s, k in zip(results, sources, keeps)]
        a, b = self._features(pasted, "image"), self._features(sources, "condition_images")
        return (F.normalize(a.float(), dim=-1) * F.normalize(b.float(), dim=-1)).sum(-1).double().cpu()

    def _features(self, images: list, field: str) -> torch.Tensor:
        if self.metric == "clip":
            return self.backbone.encode_images(images, field=field)
        # DINO keeps the aspect ratio (shorter side to `resize`): one pass per size
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, img in enumerate(images):
            by_size.setdefault(tuple(img.shape), []).append(i)
        out: list[Any] = [None] * len(images)
        for idx in by_size.values():
            pixels = torch.stack([images[i] for i in idx]).float().div_(255)
            f = self.backbone.features(self.backbone.preprocess(pixels, self.resize))
            for j, i in enumerate(idx):
                out[i] = f[j]
        return torch.stack(out)


def _ssim_region(keep: torch.Tensor) -> torch.Tensor:
    return keep[SSIM_RADIUS:-SSIM_RADIUS, SSIM_RADIUS:-SSIM_RADIUS]
