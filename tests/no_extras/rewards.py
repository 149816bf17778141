"""Test-local rewards for the contract and processor tests (model-free, counting their calls)."""

from __future__ import annotations

import json
import math

import numpy as np

from rewardzoo.rewards.base import GroupwiseReward, Inputs, PointwiseReward, Reward, RewardOutput
from rewardzoo.rewards.info import PER_INSTANCE


class PromptLength(PointwiseReward):
    """Score = number of characters of the prompt times ``factor``; records every call's size."""

    inputs = Inputs(("prompt",))
    modality = "text"
    score_range = (0.0, math.inf)
    calls: list[int] = []
    seen_fields: list[set] = []

    def __init__(self, model_path=None, device="cpu", dtype="float32", factor: float = 1.0):
        super().__init__(model_path, device, dtype)
        self.factor = factor

    def __call__(self, prompt, **rest):
        type(self).calls.append(len(prompt))
        type(self).seen_fields.append({"prompt", *rest})
        return [self.factor * len(p) for p in prompt]


class MetadataValue(PointwiseReward):
    """Score = float(metadata["value"]); metadata arrives as a JSON string."""

    inputs = Inputs(("metadata",))
    modality = "text"

    def __call__(self, metadata, **_):
        assert all(isinstance(m, str) for m in metadata)
        return np.array([json.loads(m)["value"] for m in metadata], dtype=np.float64)


class CenteredLength(GroupwiseReward):
    """Prompt length minus the mean prompt length of its group; records group sizes."""

    inputs = Inputs(("prompt", "group_id"))
    modality = "text"
    groups: list[list] = []

    def __call__(self, prompt, group_id, **_):
        type(self).groups.append(list(group_id))
        lengths = np.array([len(p) for p in prompt], dtype=float)
        return RewardOutput(lengths - lengths.mean())


class Broken(PointwiseReward):
    """Returns whatever the ``mode`` kwarg asks for, to exercise output validation."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", mode: str = "nan"):
        super().__init__(model_path, device, dtype)
        self.mode = mode

    def __call__(self, prompt, **_):
        n = len(prompt)
        if self.mode == "nan":
            return [1.0] * (n - 1) + [float("nan")]
        if self.mode == "inf":
            return [float("inf")] * n
        if self.mode == "short":
            return [1.0] * (n - 1)
        if self.mode == "scalar":
            return 1.0
        if self.mode == "raise":
            raise ZeroDivisionError("boom")
        raise AssertionError(self.mode)


def path(cls: type) -> str:
    """The Python path of a test reward, as a config names it."""
    return f"{cls.__module__}:{cls.__name__}"


class Mutator(PointwiseReward):
    """Misbehaves on purpose: writes over every image, audio array and metadata it receives, then scores 0.

    PIL images are pasted black, NumPy arrays zeroed (a read-only view refuses: the refusal is swallowed,
    as a careless reward would never see it), lists cleared.
    """

    inputs = Inputs(("image", "audio"))

    def __call__(self, image, audio, **_):
        for img in image:
            img.paste((0, 0, 0), (0, 0, img.size[0], img.size[1]))
        for clip in audio:
            try:
                clip *= 0.0
            except ValueError:
                pass
        image.clear()
        return [0.0] * len(audio)


class MeanPixel(PointwiseReward):
    """Mean 8-bit pixel value of a PIL image / 255."""

    inputs = Inputs(("image",))
    score_range = (0.0, 1.0)

    def __call__(self, image, **_):
        return [float(np.asarray(img, dtype=np.float64).mean() / 255) for img in image]


class PeakAmplitude(PointwiseReward):
    """Peak |amplitude| of the audio (NumPy), any rate."""

    inputs = Inputs(("audio",), mono=False)

    def __call__(self, audio, **_):
        return [float(np.abs(a).max()) for a in audio]


class EitherKind(Reward):
    """Prompt length minus its call's mean; pointwise or groupwise as configured (``kind`` option), like a
    ``remote`` entry whose kind is its served rewards'. ``decide: false`` leaves the kind undecided (a bug)."""

    kind = PER_INSTANCE
    inputs = Inputs(("prompt",))
    modality = "text"
    calls: list[int] = []

    def __init__(self, model_path=None, device="cpu", dtype="float32", kind: str = "pointwise", decide: bool = True):
        super().__init__(model_path, device, dtype)
        if decide:
            self.decide_kind(kind)
            if kind == "groupwise":
                self.inputs = self.inputs.with_fields(("prompt", "group_id"))

    def __call__(self, prompt, **_):
        type(self).calls.append(len(prompt))
        lengths = np.array([len(p) for p in prompt], dtype=float)
        return lengths - lengths.mean()


class NamesItself(PointwiseReward):
    """Records ``self.name`` as its ``__init__`` sees it, before and after the base's; ``refuse`` raises a
    ConfigError naming it, as the VLM judges do for a bad option."""

    inputs = Inputs(("prompt",))
    seen: list[str] = []

    def __init__(self, model_path=None, device="cpu", dtype="float32", refuse: bool = False):
        type(self).seen.append(getattr(self, "name", "<unset>"))
        super().__init__(model_path, device, dtype)
        type(self).seen.append(self.name)
        if refuse:
            from rewardzoo.errors import ConfigError

            raise ConfigError(f"{self.name}: refused", field="kwargs.refuse")

    def __call__(self, prompt, **_):
        return [0.0] * len(prompt)


class Tripwire(PointwiseReward):
    """The prompt's length; each call appends its prompts to ``log`` (a file), and a call that meets the prompt
    ``trip`` raises while the file ``armed`` exists (an interruption at a chosen row, that a rerun can pass)."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", log: str = "", armed: str = "", trip: str = ""):
        super().__init__(model_path, device, dtype)
        self.log, self.armed, self.trip = log, armed, trip

    def __call__(self, prompt, **_):
        import os

        if self.trip in prompt and os.path.exists(self.armed):
            raise RuntimeError("interrupted on purpose")
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write("".join(p + "\n" for p in prompt))
        return [float(len(p)) for p in prompt]


class Spelled(PointwiseReward):
    """The prompt's length, with two extras a row's own (issue 50's joinable outputs): ``vowels`` (a number) and
    ``shout`` (the prompt upper-cased: a text extra); ``vowels`` is NaN (not reported) for a prompt holding
    ``quiet``. While the file ``armed`` exists a call meeting ``trip`` raises."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32", armed: str = "", trip: str = "\0"):
        super().__init__(model_path, device, dtype)
        self.armed, self.trip = armed, trip

    def __call__(self, prompt, **_):
        import os

        if self.armed and os.path.exists(self.armed) and any(self.trip in p for p in prompt):
            raise RuntimeError("interrupted on purpose")
        vowels = [float(sum(c in "aeiou" for c in p)) if "quiet" not in p else float("nan") for p in prompt]
        shout = [p.upper() for p in prompt]
        return RewardOutput([float(len(p)) for p in prompt], extras={"vowels": vowels, "shout": shout})
