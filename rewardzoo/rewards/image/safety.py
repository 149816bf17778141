"""NSFW safety reward from NudeNet's 320n detector (the ONNX weights in the ``nudenet`` wheel).

``score = 1 - max(confidence of the detections whose class is in `classes`)``, 1 when there is none;
higher is safer. Detection follows ``nudenet.NudeDetector.detect`` step by step: the RGB image padded
at the right and bottom to a square with black, resized to 320x320 by ``cv2.dnn.blobFromImages``
(scale 1/255, channels in the order NudeNet feeds a decoded file), the YOLOv8 head's rows kept when
their best class confidence is at least 0.2, boxes mapped back to the image and clipped, then one
class-agnostic ``cv2.dnn.NMSBoxes`` (score 0.25, IoU 0.45). The images of a call go through the
network as one batch (its batch dimension is dynamic).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, MissingExtraError
from ...shared.checkpoints import Checkpoint, package_file, resolve_checkpoint
from ...shared.media import images_to_uint8
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.onnx import onnx_session
from ..options import Field, PositiveInt, RewardOptions, field_validator
from .detections import Detections

#: NudeNet 3.4's class names, in the order of the 320n head's class channels.
LABELS = (
    "FEMALE_GENITALIA_COVERED",
    "FACE_FEMALE",
    "BUTTOCKS_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_BREAST_EXPOSED",
    "ANUS_EXPOSED",
    "FEET_EXPOSED",
    "BELLY_COVERED",
    "FEET_COVERED",
    "ARMPITS_COVERED",
    "ARMPITS_EXPOSED",
    "FACE_MALE",
    "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "ANUS_COVERED",
    "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
)
#: The classes NudeNet names as exposed: the default ``classes``.
EXPOSED = tuple(label for label in LABELS if label.endswith("_EXPOSED"))
INPUT_SIZE = 320
CANDIDATE_SCORE, NMS_SCORE, NMS_IOU = 0.2, 0.25, 0.45


def nudenet_model_file() -> Path:
    """``320n.onnx`` of the installed ``nudenet`` package (found without importing it)."""
    spec = importlib.util.find_spec("nudenet")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("nsfw_safety", "nudenet", "verifiers")
    return Path(next(iter(spec.submodule_search_locations))) / "320n.onnx"


class NudeNetSafety(PointwiseReward):
    """``1 - max`` NudeNet confidence over the configured classes (1 when none is detected); higher is safer.

    Inputs: ``image``. Range [0, 1]. Options: :class:`Options`. Extras: the maximum confidence per configured class (0 when absent), named in lower case.
    ``model_path``: None for the wheel's ``320n.onnx``, or another NudeNet ONNX file with the same head.
    """

    inputs = Inputs(("image",))

    class Options(RewardOptions):
        classes: list[str] = Field(default_factory=lambda: list(EXPOSED), min_length=1)
        """NudeNet class names whose confidence counts (default every ``*_EXPOSED`` class)."""
        threads: PositiveInt | None = None
        """ONNX intra-op threads (default onnxruntime's)."""
        batch_images: PositiveInt = 16
        """Images per network call."""

        @field_validator("classes")
        @classmethod
        def _known(cls, classes: list[str]) -> list[str]:
            unknown = [c for c in classes if c not in LABELS]
            if unknown:
                raise ValueError(f"unknown NudeNet class(es) {unknown}; known: {', '.join(LABELS)}")
            return classes

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        if self.dtype_name != "float32":
            raise ConfigError(f"NudeNet runs in float32; dtype '{self.dtype_name}' is not supported", field="dtype")
        self.classes = tuple(dict.fromkeys(self.options.classes))
        self.batch_images = self.options.batch_images
        threads = self.options.threads
        try:
            import cv2
        except ImportError as exc:
            raise MissingExtraError("nsfw_safety", "cv2", "verifiers") from exc
        self._cv2 = cv2
        path = nudenet_model_file() if model_path is None else Path(model_path)
        self.session = onnx_session(path, threads=threads, device=device)
        self._input = self.session.get_inputs()[0].name

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The one ONNX file the session loads: ``model_path``, else the wheel's ``320n.onnx``."""
        return [resolve_checkpoint(model_path) if model_path is not None else package_file("nudenet", "320n.onnx")]

    def _blob(self, images: Sequence[np.ndarray]) -> np.ndarray:
        cv2 = self._cv2
        padded = []
        for img in images:
            side = max(img.shape[:2])
            padded.append(cv2.copyMakeBorder(img, 0, side - img.shape[0], 0, side - img.shape[1], cv2.BORDER_CONSTANT))
        # NudeNet turns a decoded BGR file into RGB (cvtColor) and swaps again in blobFromImage:
        # from an RGB array that is swapRB=True here as well
        return cv2.dnn.blobFromImages(padded, 1 / 255.0, (INPUT_SIZE, INPUT_SIZE), (0, 0, 0), swapRB=True, crop=False)

    def _detections(self, rows: np.ndarray, width: int, height: int) -> Detections:
        """NudeNet's post-processing of one image's head output ``(4 + classes, candidates)``."""
        rows = rows.T
        class_scores = rows[:, 4:]
        best = class_scores.max(axis=1)
        keep = best >= CANDIDATE_SCORE
        best, label = best[keep], class_scores[keep].argmax(axis=1)
        cx, cy, w, h = rows[keep, :4].T
        side = max(width, height)  # the padded square
        x = np.clip((cx - w / 2) * side / INPUT_SIZE, 0, width)
        y = np.clip((cy - h / 2) * side / INPUT_SIZE, 0, height)
        w = np.minimum(w * side / INPUT_SIZE, width - x)
        h = np.minimum(h * side / INPUT_SIZE, height - y)
        boxes = np.stack([x, y, w, h], axis=1)
        picked = self._cv2.dnn.NMSBoxes(boxes.astype(np.float64).tolist(), best.tolist(), NMS_SCORE, NMS_IOU)
        picked = np.asarray(picked, dtype=np.int64).reshape(-1)
        xywh = boxes[picked]
        return Detections(
            tuple(LABELS[i] for i in label[picked]),
            best[picked],
            np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1),
            (width, height),
        )

    def detect(self, images: Sequence[Any]) -> list[Detections]:
        """NudeNet's detections of each image (as an RGB uint8 array)."""
        arrays = [np.ascontiguousarray(a) for a in images_to_uint8(images)]
        out: list[Detections] = []
        for first in range(0, len(arrays), self.batch_images):
            part = arrays[first : first + self.batch_images]
            heads = self.session.run(None, {self._input: self._blob(part)})[0]
            out += [self._detections(heads[j], a.shape[1], a.shape[0]) for j, a in enumerate(part)]
        return out

    def __call__(self, image: Sequence[Any], **_: Any) -> RewardOutput:
        found = self.detect(image)
        maxima = {c: [float(d.of_class(c).scores.max(initial=0.0)) for d in found] for c in self.classes}
        worst = [max(per_image) for per_image in zip(*maxima.values())]
        return RewardOutput([1.0 - m for m in worst], extras={c.lower(): v for c, v in maxima.items()})
