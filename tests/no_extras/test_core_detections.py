"""The detections structure: conversion, shape checks and selection, checked against NumPy indexing."""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo.rewards.image.detections import Detections

LABELS = ("dog", "cat", "dog")
SCORES = np.array([0.9, 0.5, 0.7])
BOXES = np.array([[0, 0, 4, 4], [1, 1, 3, 5], [2, 0, 5, 2]], dtype=np.float64)
MASKS = np.random.default_rng(0).random((3, 6, 5)) > 0.5  # (N, height=6, width=5)


def _dets(masks=MASKS) -> Detections:
    return Detections(LABELS, SCORES, BOXES, (5, 6), masks)


def test_arrays_are_converted_and_kept():
    d = _dets()
    assert len(d) == 3 and d.labels == LABELS and d.image_size == (5, 6)
    assert d.scores.dtype == np.float32 and d.boxes.dtype == np.float32
    np.testing.assert_array_equal(d.boxes, BOXES.astype(np.float32))
    np.testing.assert_array_equal(d.masks, MASKS)
    assert d.classes == ("dog", "cat")


@pytest.mark.parametrize("keep", [np.array([True, False, True]), [2, 0], np.array([], dtype=np.int64)])
def test_select_matches_numpy_indexing(keep):
    d = _dets().select(keep)
    index = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep, dtype=np.int64)
    assert d.labels == tuple(LABELS[i] for i in index)
    np.testing.assert_array_equal(d.scores, SCORES.astype(np.float32)[index])
    np.testing.assert_array_equal(d.boxes, BOXES.astype(np.float32)[index])
    np.testing.assert_array_equal(d.masks, MASKS[index])


def test_of_class_and_box_only():
    dogs = _dets(masks=None).of_class("dog")
    assert dogs.labels == ("dog", "dog") and dogs.masks is None
    np.testing.assert_array_equal(dogs.scores, np.float32([0.9, 0.7]))
    assert len(_dets().of_class("zebra")) == 0


def test_empty():
    e = Detections.empty((8, 4), with_masks=True)
    assert len(e) == 0 and e.boxes.shape == (0, 4) and e.masks.shape == (0, 4, 8)
    assert Detections((), [], [], (8, 4)).boxes.shape == (0, 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scores=SCORES[:2]), "scores must have shape"),
        (dict(scores=np.array([0.1, 1.5, 0.2])), r"in \[0, 1\]"),
        (dict(scores=np.array([0.1, np.nan, 0.2])), "finite"),
        (dict(boxes=BOXES[:, :3]), "boxes must have shape"),
        (dict(masks=MASKS[:, :, :4]), "masks must have shape"),
        (dict(masks=MASKS.astype(np.uint8)), "boolean"),
        (dict(image_size=(0, 6)), "image_size"),
        (dict(labels=("dog", 3, "cat")), "strings"),
    ],
)
def test_bad_shapes_are_named(kwargs, match):
    fields = dict(labels=LABELS, scores=SCORES, boxes=BOXES, image_size=(5, 6), masks=MASKS) | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        Detections(**fields)


def test_select_rejects_a_wrong_mask_or_index():
    with pytest.raises(ValueError, match="boolean mask"):
        _dets().select(np.array([True, False]))
    with pytest.raises(IndexError):
        _dets().select([3])
