"""Detector outputs in one typed structure: what GenEval and the safety reward both consume.

NumPy only, so rules written against it (GenEval's decision rules, NudeNet's class maxima) are testable
on hand-built detections without torch or a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Detections:
    """The detections of one image.

    ``labels[i]`` is the class name of detection ``i``, ``scores[i]`` its confidence in [0, 1],
    ``boxes[i]`` its box ``x0, y0, x1, y1`` in pixels, ``masks[i]`` its (H, W) boolean mask (``None``
    for box-only detectors). ``image_size`` is ``(width, height)``; masks are ``(N, height, width)``.
    Arrays are converted to float32 / bool on construction; shapes are checked.
    """

    labels: tuple[str, ...]
    scores: np.ndarray
    boxes: np.ndarray
    image_size: tuple[int, int]
    masks: np.ndarray | None = None

    def __post_init__(self) -> None:
        labels = tuple(self.labels)
        if not all(isinstance(label, str) for label in labels):
            raise TypeError(f"Detections: labels must be strings, got {[type(x).__name__ for x in labels]}")
        n = len(labels)
        scores = np.asarray(self.scores, dtype=np.float32)
        if n == 0 and scores.size == 0:
            scores = scores.reshape(0)
        if scores.shape != (n,):
            raise ValueError(
                f"Detections: scores must have shape ({n},) to match {n} labels, got {np.shape(self.scores)}"
            )
        if n and (not np.isfinite(scores).all() or scores.min() < 0 or scores.max() > 1):
            raise ValueError(f"Detections: scores must be finite and in [0, 1], got {scores.tolist()}")
        boxes = np.asarray(self.boxes, dtype=np.float32)
        if n == 0 and boxes.size == 0:
            boxes = boxes.reshape(0, 4)
        if boxes.shape != (n, 4):
            raise ValueError(f"Detections: boxes must have shape ({n}, 4) (x0, y0, x1, y1), got {boxes.shape}")
        if n and not np.isfinite(boxes).all():
            raise ValueError("Detections: boxes must be finite")
        size = tuple(int(v) for v in self.image_size)
        if len(size) != 2 or min(size) <= 0:
            raise ValueError(f"Detections: image_size must be (width, height) > 0, got {self.image_size}")
        masks = self.masks
        if masks is not None:
            masks = np.asarray(masks)
            if masks.dtype != np.bool_:
                raise TypeError(f"Detections: masks must be boolean, got dtype {masks.dtype}")
            width, height = size
            if n == 0 and masks.size == 0:
                masks = masks.reshape(0, height, width)
            if masks.shape != (n, height, width):
                raise ValueError(
                    f"Detections: masks must have shape ({n}, {height}, {width}) (N, height, width), got {masks.shape}"
                )
        for name, value in (
            ("labels", labels),
            ("scores", scores),
            ("boxes", boxes),
            ("image_size", size),
            ("masks", masks),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def empty(cls, image_size: tuple[int, int], *, with_masks: bool = False) -> Detections:
        """No detections on an image of ``image_size`` (width, height)."""
        width, height = image_size
        masks = np.zeros((0, height, width), dtype=bool) if with_masks else None
        return cls((), np.zeros(0, np.float32), np.zeros((0, 4), np.float32), (width, height), masks)

    def __len__(self) -> int:
        return len(self.labels)

    def select(self, keep: np.ndarray | Sequence[int] | Sequence[bool]) -> Detections:
        """The detections picked by a boolean mask of length N or by integer indices (in that order)."""
        keep = np.asarray(keep)
        if keep.dtype == np.bool_:
            if keep.shape != (len(self),):
                raise ValueError(f"Detections.select: a boolean mask must have shape ({len(self)},), got {keep.shape}")
            index = np.flatnonzero(keep)
        elif keep.size == 0:
            index = np.zeros(0, dtype=np.int64)
        elif np.issubdtype(keep.dtype, np.integer) and keep.ndim == 1:
            index = keep.astype(np.int64)
            if index.min() < -len(self) or index.max() >= len(self):
                raise IndexError(f"Detections.select: index out of range for {len(self)} detections")
        else:
            raise TypeError(f"Detections.select: expected a boolean mask or integer indices, got {keep.dtype}")
        return Detections(
            tuple(self.labels[i] for i in index),
            self.scores[index],
            self.boxes[index],
            self.image_size,
            None if self.masks is None else self.masks[index],
        )

    def of_class(self, name: str) -> Detections:
        """The detections labelled ``name``."""
        return self.select(np.array([label == name for label in self.labels], dtype=bool))

    @property
    def classes(self) -> tuple[str, ...]:
        """The distinct labels, in order of first appearance."""
        return tuple(dict.fromkeys(self.labels))
