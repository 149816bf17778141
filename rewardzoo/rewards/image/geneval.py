"""GenEval (Ghosh et al., NeurIPS 2023) as a reward, without mmdet.

Detector: transformers' Mask2Former (COCO instance checkpoints, hub id or local directory) with
GenEval's mmdet post-processing re-done on its raw outputs; colours: zero-shot CLIP on the masked
object crops; decisions: GenEval's rules in :mod:`.geneval_rules`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import ConfigError, InputError, RewardExecutionError
from ...shared.media import to_uint8_tensor
from ...shared.weights import loading
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs, load_clip_backbone
from ..options import Field, Number, PositiveInt, RewardOptions, WeightPath
from .detections import Detections
from .geneval_rules import (
    CLASS_NAMES,
    COLOR_TEMPLATES,
    COLORS,
    Requirements,
    Thresholds,
    color_requests,
    evaluate,
    parse_metadata,
    select_objects,
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: Other spellings of COCO classes (detectron2's, VOC-style), keyed by their lower-case alphanumeric form.
_COCO_ALIASES = {
    "mouse": "computer mouse",
    "remote": "tv remote",
    "keyboard": "computer keyboard",
    "motorbike": "motorcycle",
    "aeroplane": "airplane",
    "sofa": "couch",
    "tvmonitor": "tv",
    "pottedplant": "potted plant",
    "diningtable": "dining table",
    "hairdryer": "hair drier",
    "doughnut": "donut",
}


class GenEval(PointwiseReward):
    """GenEval: 1.0 when the image meets every requirement of its prompt's GenEval metadata, else 0.0.

    Inputs: ``image`` and ``metadata`` (one line of GenEval's ``evaluation_metadata.jsonl``: ``tag``,
    ``include`` [{class, count, color?, position?}], ``exclude``). ``score: partial`` gives flow_grpo's
    partial score instead (mean of per-clause terms, at most 1, negative when far too many objects).
    Extras: ``correct`` (GenEval), ``partial`` and ``exact`` (flow_grpo), ``fraction_met`` (clauses met /
    clauses), ``verdicts`` (JSON list, one entry per clause) and ``reason`` (GenEval's failure reasons).

    ``model_path``: a transformers Mask2Former COCO instance model (default
    ``facebook/mask2former-swin-small-coco-instance``); options: :class:`Options`.
    """

    inputs = Inputs(("image", "metadata"), images="uint8")
    default_model: ClassVar[str] = "facebook/mask2former-swin-small-coco-instance"

    class Options(RewardOptions):
        score: Literal["strict", "partial"] = "strict"
        """``strict``: GenEval's 1/0; ``partial``: flow_grpo's partial score."""
        clip_model: WeightPath = "ViT-L-14"
        """The colour classifier's CLIP (open_clip ``ViT-L-14``, as GenEval)."""
        clip_pretrained: WeightPath | None = "openai"
        """Its open_clip weights tag or file."""
        threshold: Number = Field(0.3, ge=0, le=1)
        """Detection confidence an object needs (GenEval's 0.3)."""
        counting_threshold: Number = Field(0.9, ge=0, le=1)
        """Confidence for counting prompts (GenEval's 0.9)."""
        max_objects: PositiveInt = 16
        """Objects kept per class, most confident first (GenEval's 16)."""
        max_overlap: Number = Field(1.0, ge=0, le=1)
        """Box IoU at or above which a less confident detection of the same class is dropped (GenEval's 1.0: none)."""
        position_threshold: Number = Field(0.1, ge=0)
        """Margin, relative to the objects' sizes, for a relative position to hold (GenEval's 0.1)."""
        max_per_image: PositiveInt = 100
        """Detections kept per image (Mask2Former's post-processing)."""
        shortest_edge: PositiveInt = 800
        """The detector's input resize: shortest edge (detectron2's 800)."""
        longest_edge: PositiveInt = 1333
        """The detector's input resize: longest edge (detectron2's 1333)."""
        background: int = Field(153, ge=0, le=255)
        """Grey level around a masked object before colour classification (GenEval's 153)."""
        detector_batch: PositiveInt | None = None
        """Images per detector call (default: all of a call)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        from transformers import Mask2FormerForUniversalSegmentation

        o = self.options
        self.score = o.score
        self.rules = Thresholds(o.threshold, o.counting_threshold, o.max_objects, o.max_overlap, o.position_threshold)
        self.max_per_image, self.shortest_edge, self.longest_edge = o.max_per_image, o.shortest_edge, o.longest_edge
        self.detector_batch, self.background = o.detector_batch, o.background
        clip_model, clip_pretrained = o.clip_model, o.clip_pretrained
        path = str(model_path or self.default_model)
        with loading(f"Mask2Former '{path}'"):
            model = Mask2FormerForUniversalSegmentation.from_pretrained(path)
        self.class_names = _geneval_names(model.config, path)
        self.detector = model.to(device=device, dtype=self.dtype).eval().requires_grad_(False)
        self.mean, self.std = _normalisation(path)
        self.clip = load_clip_backbone(clip_model, pretrained=clip_pretrained, device=device, dtype=dtype)
        self._classifiers: dict[str, torch.Tensor] = {}
        self._lock = threading.Lock()

    # -------------------------------------------------------------------------------------- call
    def __call__(self, image: Sequence[Any], metadata: Sequence[Any], **_: Any) -> RewardOutput:
        check_pairs(image=image, metadata=metadata)
        reqs = [parse_metadata(m, sample=i) for i, m in enumerate(metadata)]
        images = []
        for i, img in enumerate(image):
            try:
                images.append(to_uint8_tensor(img))
            except InputError as exc:
                raise exc.located(field="image", sample=i) from None
        dets = self.detect(images, min_scores=[self.rules.confidence(r.tag) for r in reqs])
        objects = [select_objects(d, r.tag, self.rules) for d, r in zip(dets, reqs)]
        colors = self.classify_colors(images, objects, reqs)
        verdicts = [evaluate(o, r, c, self.rules) for o, r, c in zip(objects, reqs, colors)]
        strict = [float(v.correct) for v in verdicts]
        partial = [float(v.partial) for v in verdicts]
        extras = {
            "correct": strict,
            "partial": partial,
            "exact": [float(v.exact) for v in verdicts],
            "fraction_met": [v.fraction_met for v in verdicts],
            "verdicts": [_verdicts_json(r, v) for r, v in zip(reqs, verdicts)],
            "reason": ["\n".join(v.reasons) for v in verdicts],
        }
        return RewardOutput(strict if self.score == "strict" else partial, extras=extras)

    # ---------------------------------------------------------------------------------- detector
    @torch.no_grad()
    def detect(self, images: Sequence[torch.Tensor], *, min_scores: Sequence[float] | None = None) -> list[Detections]:
        """Instance detections per image (uint8 (3, H, W) tensors), masks and boxes at the image's size.

        mmdet's Mask2Former post-processing (``MaskFormerFusionHead.instance_postprocess``): the
        ``max_per_image`` best (query, class) pairs by class probability (softmax without the no-object
        class); score = class probability x mean sigmoid of the mask logits inside the mask (logits > 0,
        bilinearly upsampled to the input and then to the image size); box = the mask's tight box
        (``x_max + 1``). ``min_scores[i]``: only pairs whose class probability exceeds it are kept (the
        score can never exceed the class probability, so GenEval's threshold drops them anyway).
        Images of one size run as one batch (at most ``detector_batch`` images per forward; default all on
        CUDA, one on other devices); different
        sizes run as separate batches (Mask2Former in transformers ignores padding masks, so padding one
        image to another's size would change its result).
        """
        min_scores = list(min_scores) if min_scores is not None else [0.0] * len(images)
        out: dict[int, Detections] = {}  # image index -> its detections (every image is in one group)
        groups: dict[tuple[int, int], list[int]] = {}
        for i, img in enumerate(images):
            groups.setdefault(tuple(img.shape[-2:]), []).append(i)
        # default: one image per forward on the CPU, where stacking was measured slower (bench_geneval.py)
        step = self.detector_batch or (len(images) if str(self.device).startswith("cuda") else 1)
        chunks = [(size, index[k : k + step]) for size, index in groups.items() for k in range(0, len(index), step)]
        for (height, width), index in chunks:
            pixels, (rh, rw) = self._preprocess(torch.stack([images[i] for i in index]))
            result = self.detector(pixel_values=pixels)
            for j, i in enumerate(index):
                out[i] = self._postprocess(
                    result.class_queries_logits[j],
                    result.masks_queries_logits[j],
                    pixels.shape[-2:],
                    (rh, rw),
                    (height, width),
                    min_scores[i],
                )
        return [out[i] for i in range(len(images))]

    def _preprocess(self, batch: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """mmdet's test pipeline: keep-ratio resize to fit (longest_edge, shortest_edge), bilinear without
        antialiasing and rounded to 8 bits (cv2), normalise, zero-pad to a multiple of 32."""
        height, width = batch.shape[-2:]
        scale = min(self.longest_edge / max(height, width), self.shortest_edge / min(height, width))
        rh, rw = int(height * scale + 0.5), int(width * scale + 0.5)
        x = batch.to(self.device, torch.float32)
        if (rh, rw) != (height, width):
            x = F.interpolate(x, size=(rh, rw), mode="bilinear", align_corners=False).round_().clamp_(0, 255)
        mean = torch.tensor(self.mean, device=x.device).view(1, 3, 1, 1) * 255
        std = torch.tensor(self.std, device=x.device).view(1, 3, 1, 1) * 255
        x = (x - mean) / std
        ph, pw = -rh % 32, -rw % 32
        if ph or pw:
            x = F.pad(x, (0, pw, 0, ph))
        return x.to(self.dtype), (rh, rw)

    def _postprocess(
        self,
        class_logits: torch.Tensor,
        mask_logits: torch.Tensor,
        padded: Sequence[int],
        resized: tuple[int, int],
        size: tuple[int, int],
        min_score: float,
    ) -> Detections:
        num_classes = class_logits.shape[1] - 1
        probs = class_logits.float().softmax(-1)[:, :-1].flatten()
        top, pair = probs.topk(min(self.max_per_image, probs.numel()))
        keep = top > min_score
        top, pair = top[keep], pair[keep]
        height, width = size
        if not len(pair):
            return Detections.empty((width, height), with_masks=True)
        queries, labels = pair // num_classes, pair % num_classes
        unique, inverse = torch.unique(queries, return_inverse=True)
        logits = F.interpolate(
            mask_logits[unique][None].float(), size=tuple(padded), mode="bilinear", align_corners=False
        )[..., : resized[0], : resized[1]]
        logits = F.interpolate(logits, size=(height, width), mode="bilinear", align_corners=False)[0][inverse]
        binary = logits > 0
        mask_score = (logits.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
        scores = (top * mask_score).clamp_(0, 1)
        masks = binary.cpu().numpy()
        return Detections(
            tuple(self.class_names[int(k)] for k in labels),
            scores.cpu().numpy(),
            _mask_boxes(masks),
            (width, height),
            masks,
        )

    # ------------------------------------------------------------------------------------ colours
    @torch.no_grad()
    def classify_colors(
        self, images: Sequence[torch.Tensor], objects: Sequence[dict[str, Detections]], reqs: Sequence[Requirements]
    ) -> list[dict[int, list[str]]]:
        """GenEval's colour of each object it asks about, all crops of the call in one CLIP batch.

        A crop: the image where the object's mask is set, grey ``background`` (GenEval's ``#999``)
        elsewhere, cut to the object's box; the colour: argmax over GenEval's 10 colours of CLIP's
        similarity to the mean of three prompt embeddings per colour.
        """
        crops, where = [], []
        for i, (img, objs, req) in enumerate(zip(images, objects, reqs)):
            for clause_index, cls, k in color_requests(objs, req):
                top = objs[cls].select(np.arange(k))
                if top.masks is None:  # (the segmenter gives every detection its mask)
                    raise RewardExecutionError(f"the detections of {cls!r} have no masks to crop", reward=self.name)
                for box, mask in zip(top.boxes, top.masks):
                    crops.append(_masked_crop(img, mask, box, self.background))
                    where.append((i, clause_index, cls))
        result: list[dict[int, list[str]]] = [{} for _ in images]
        if not crops:
            return result
        feats = self.clip.encode_images(crops)
        for (i, clause_index, cls), feat in zip(where, feats):
            color = COLORS[int((100.0 * feat @ self._color_classifier(cls)).argmax())]
            result[i].setdefault(clause_index, []).append(color)
        return result

    def _color_classifier(self, cls: str) -> torch.Tensor:
        """(D, 10) zero-shot weights for ``cls``: per colour, the renormalised mean of its prompt embeddings."""
        with self._lock:
            found = self._classifiers.get(cls)
        if found is None:
            texts = [t.format(c=c, obj=cls) for c in COLORS for t in COLOR_TEMPLATES]
            emb = self.clip.encode_text(texts).view(len(COLORS), len(COLOR_TEMPLATES), -1)
            found = F.normalize(F.normalize(emb, dim=-1).mean(dim=1), dim=-1).T.contiguous()
            with self._lock:
                self._classifiers[cls] = found
        return found


def _geneval_names(config: Any, path: str) -> tuple[str, ...]:
    """GenEval's class name per label index; the checkpoint must be a COCO instance model (80 classes).

    Labels map by index (COCO's thing order, as GenEval's ``object_names.txt``). The checkpoint's own names
    are checked against GenEval's (case, spaces and known spellings aside, e.g. detectron2's ``mouse``);
    more than a few disagreements mean another label set or order, refused.
    """
    n = int(config.num_labels)
    if n != len(CLASS_NAMES):
        raise ConfigError(
            f"'{path}' predicts {n} classes; GenEval needs a COCO instance model with the 80 COCO "
            "thing classes (e.g. facebook/mask2former-swin-small-coco-instance)",
            field="model_path",
        )
    id2label = {int(k): str(v) for k, v in (config.id2label or {}).items()}
    if all(v == f"LABEL_{k}" for k, v in id2label.items()):  # an unnamed (e.g. freshly initialised) head
        return CLASS_NAMES
    wrong = [
        (k, id2label.get(k), CLASS_NAMES[k])
        for k in range(n)
        if _plain(_COCO_ALIASES.get(_plain(id2label.get(k, "")), id2label.get(k, ""))) != _plain(CLASS_NAMES[k])
    ]
    if len(wrong) > 5:
        shown = ", ".join(f"{k}: {got!r} (GenEval {want!r})" for k, got, want in wrong[:4])
        raise ConfigError(
            f"'{path}' labels are not COCO's 80 thing classes in COCO's order ({len(wrong)} differ: {shown}, ...)",
            field="model_path",
        )
    return CLASS_NAMES


def _plain(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _normalisation(path: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The checkpoint's image mean/std (preprocessor_config.json), else ImageNet's (GenEval's mmdet config)."""
    from pathlib import Path

    cfg = Path(path) / "preprocessor_config.json"
    data: dict[str, Any] = {}
    if cfg.is_file():
        data = json.loads(cfg.read_text())
    elif not Path(path).exists():
        try:
            from huggingface_hub import hf_hub_download

            data = json.loads(Path(hf_hub_download(path, "preprocessor_config.json")).read_text())
        except Exception:  # no processor config on the hub / offline: GenEval's (ImageNet) constants
            data = {}
    return tuple(data.get("image_mean", IMAGENET_MEAN)), tuple(data.get("image_std", IMAGENET_STD))


def _mask_boxes(masks: np.ndarray) -> np.ndarray:
    """Tight boxes ``x_min, y_min, x_max + 1, y_max + 1`` of (N, H, W) masks; zeros for an empty mask (mmdet)."""
    boxes = np.zeros((len(masks), 4), dtype=np.float32)
    cols, rows = np.asarray(masks.any(axis=1)), np.asarray(masks.any(axis=2))
    for i in range(len(masks)):
        xs, ys = np.flatnonzero(cols[i]), np.flatnonzero(rows[i])
        if len(xs) and len(ys):
            boxes[i] = (xs[0], ys[0], xs[-1] + 1, ys[-1] + 1)
    return boxes


def _masked_crop(image: torch.Tensor, mask: np.ndarray, box: np.ndarray, background: int) -> torch.Tensor:
    """uint8 (3, h, w): ``image`` inside ``mask``, grey elsewhere, cut to ``box`` (rounded, as PIL's crop)."""
    m = torch.from_numpy(mask).to(image.device)
    out = torch.where(m, image, torch.full_like(image, background))
    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    return out[:, y0:y1, x0:x1]


def _verdicts_json(req: Requirements, verdict: Any) -> str:
    items = [{"clause": f"include {c.describe()}", "met": bool(m)} for c, m in zip(req.include, verdict.include_met)]
    items += [
        {"clause": f"exclude {c.cls} >= {c.count}", "met": bool(m)} for c, m in zip(req.exclude, verdict.exclude_met)
    ]
    return json.dumps(items)
