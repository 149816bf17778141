"""nsfw_safety with the real NudeNet 320n weights, against ``nudenet.NudeDetector().detect`` itself.

The images are benign and made here (variants of matplotlib's sample portrait, which draws FACE_*
detections, and plain generated images); each is saved as PNG and given to NudeNet by path, its
documented input, while the reward gets the decoded RGB image, as the processor hands it over.
"""

from __future__ import annotations

import numpy as np
import pytest

nudenet = pytest.importorskip("nudenet")

from rewardzoo import load_reward
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.image.safety import EXPOSED, LABELS, NudeNetSafety

from .media import benign_photos, synthetic_images


@pytest.fixture(scope="module")
def images():
    return benign_photos() + synthetic_images()


@pytest.fixture(scope="module")
def reference(images, tmp_path_factory):
    """NudeNet's own detections of each image, read from a PNG file."""
    folder = tmp_path_factory.mktemp("nudenet")
    detector = nudenet.NudeDetector()
    found = []
    for i, img in enumerate(images):
        path = folder / f"{i}.png"
        img.save(path)
        found.append(detector.detect(str(path)))
    return found


def formula(detections, classes) -> float:
    """1 - the highest confidence among the detections of ``classes`` (1 when there is none)."""
    return 1.0 - max((d["score"] for d in detections if d["class"] in classes), default=0.0)


@pytest.fixture(scope="module")
def reward():
    return load_reward({"name": "nsfw_safety", "device": "cpu"})


def test_labels_are_nudenets():
    assert tuple(vars(nudenet.nudenet)["__labels"]) == LABELS
    assert set(EXPOSED) == {c for c in LABELS if "EXPOSED" in c} and len(EXPOSED) == 9


def test_default_score_equals_formula_on_nudenets_detections(reward, images, reference):
    out = reward(image=images)
    np.testing.assert_allclose(out.rewards, [formula(d, EXPOSED) for d in reference], rtol=0, atol=1e-6)
    for cls in EXPOSED:
        expected = [max((d["score"] for d in dets if d["class"] == cls), default=0.0) for dets in reference]
        np.testing.assert_allclose(out.extras[cls.lower()], expected, rtol=0, atol=1e-6)


def test_all_classes_score_and_detections_equal_nudenets(images, reference):
    """With every class counted, the faces NudeNet finds move the score (a test that can fail)."""
    everything = NudeNetSafety(classes=list(LABELS))
    out = everything(image=images)
    expected = [formula(d, LABELS) for d in reference]
    assert sum(s < 1.0 for s in expected) >= 3  # the portraits draw detections
    np.testing.assert_allclose(out.rewards, expected, rtol=0, atol=1e-6)
    for ours, theirs in zip(everything.detect(images), reference):
        assert list(ours.labels) == [d["class"] for d in theirs]
        np.testing.assert_allclose(ours.scores, [d["score"] for d in theirs], rtol=0, atol=1e-6)
        xywh = np.concatenate([ours.boxes[:, :2], ours.boxes[:, 2:] - ours.boxes[:, :2]], axis=1)
        np.testing.assert_allclose(xywh, np.array([d["box"] for d in theirs]).reshape(-1, 4), atol=1.01)


def test_batch_invariance(images):
    everything = NudeNetSafety(classes=list(LABELS), batch_images=3)
    together = everything(image=images)
    alone = [everything(image=[img]).rewards[0] for img in images]
    np.testing.assert_allclose(together.rewards, alone, rtol=0, atol=1e-6)


def test_classes_are_checked():
    with pytest.raises(ConfigError, match="unknown NudeNet class"):
        NudeNetSafety(classes=["NUDE"])
    with pytest.raises(ConfigError):
        NudeNetSafety(classes="FEET_EXPOSED")
    with pytest.raises(ConfigError):
        NudeNetSafety(classes=[])


def test_an_offloaded_onnx_reward_releases_its_session_and_scores_the_same_after(images):
    from rewardzoo import RewardProcessor

    entry = {"name": "n", "reward_model": "nsfw_safety", "device": "cpu"}
    batch = [{"image": im} for im in images[:3]]
    expected = RewardProcessor([entry])(batch).rewards["n"]
    sleeper = RewardProcessor([{**entry, "offload": "drop"}])
    session = sleeper.rewards["n"].session
    assert sleeper.loader.residency.is_asleep(sleeper.rewards["n"]) and session.released
    assert sleeper(batch).rewards["n"].tobytes() == expected.tobytes()
    assert session.released  # asleep again after the phase
