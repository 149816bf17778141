"""Test-local rewards for the execution tests (model-free; they record how they were called)."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np

from rewardzoo.rewards.base import GroupwiseReward, Inputs, PointwiseReward, RewardOutput
from rewardzoo.rewards.image.jpeg import jpeg_kilobytes


class Recorder(PointwiseReward):
    """Score = factor * len(prompt) + metadata["value"]; records call sizes and thread names."""

    inputs = Inputs(("prompt", "metadata"))
    modality = "text"
    calls: list[int] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def __init__(self, model_path=None, device="cpu", dtype="float32", factor: float = 1.0, delay: float = 0.0):
        super().__init__(model_path, device, dtype)
        self.factor, self.delay = factor, delay

    def __call__(self, prompt, metadata, **_):
        with type(self).lock:
            type(self).calls.append(len(prompt))
            type(self).threads.add(threading.current_thread().name)
        if self.delay:
            time.sleep(self.delay)
        values = [json.loads(m).get("value", 0.0) for m in metadata]
        # the call size enters the extras, so a different chunking would show up
        return RewardOutput(
            [self.factor * len(p) + v for p, v in zip(prompt, values)],
            extras={"call_size": [len(prompt)] * len(prompt)},
        )


class ScratchReward(PointwiseReward):
    """Not thread-safe on purpose: it writes each input into one shared buffer, yields, reads it back.

    Score = sum of the prompt's character codes / 1000. Two concurrent calls would overwrite each
    other's buffer and return wrong scores; ``max_active`` records the largest number of concurrent calls.
    """

    inputs = Inputs(("prompt",))
    modality = "text"
    thread_safe = False
    active = 0
    max_active = 0
    guard = threading.Lock()

    def __init__(self, model_path=None, device="cpu", dtype="float32"):
        super().__init__(model_path, device, dtype)
        self.buffer = np.zeros(256)

    def __call__(self, prompt, **_):
        cls = type(self)
        with cls.guard:
            cls.active += 1
            cls.max_active = max(cls.max_active, cls.active)
        try:
            out = []
            for p in prompt:
                codes = np.frombuffer(p.encode(), dtype=np.uint8).astype(float)
                self.buffer[:] = 0
                self.buffer[: len(codes)] = codes
                time.sleep(0.0005)  # let other threads run while the buffer is "ours"
                out.append(self.buffer.sum() / 1000)
            return out
        finally:
            with cls.guard:
                cls.active -= 1


class NumpyWork(PointwiseReward):
    """Thread-safe, deterministic numeric work: score = mean of tanh(A @ A.T) for A seeded by the prompt."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __call__(self, prompt, **_):
        out = []
        for p in prompt:
            rng = np.random.default_rng(sum(p.encode()))
            a = rng.standard_normal((48, 48))
            out.append(float(np.tanh(a @ a.T).mean()))
        return out


class CenteredValue(GroupwiseReward):
    """Groupwise: metadata["value"] minus the group mean; records each group it scored."""

    inputs = Inputs(("metadata", "group_id"))
    modality = "text"
    scored: list = []

    def __call__(self, metadata, group_id, **_):
        type(self).scored.append((os.getpid(), tuple(group_id)))
        values = np.array([json.loads(m)["value"] for m in metadata], dtype=float)
        return RewardOutput(values - values.mean(), extras={"group_size": [len(values)] * len(values)})


class CenteredJpeg(GroupwiseReward):
    """Groupwise: JPEG size (kB, quality 95) minus its group's mean size."""

    inputs = Inputs(("image", "group_id"))
    modality = "image"

    def __call__(self, image, **_):
        kb = np.array([jpeg_kilobytes(img) for img in image])
        return kb - kb.mean()


class Failing(PointwiseReward):
    """Raises ValueError on the prompt 'boom'; otherwise scores the prompt length."""

    inputs = Inputs(("prompt",))

    def __call__(self, prompt, **_):
        if "boom" in prompt:
            raise ValueError("the prompt said boom")
        return [float(len(p)) for p in prompt]


class Blocking(PointwiseReward):
    """Waits on a class-level event (released by the test) before scoring 1.0 per input."""

    inputs = Inputs(("prompt",))
    release = threading.Event()
    started = threading.Event()

    def __call__(self, prompt, **_):
        type(self).started.set()
        type(self).release.wait(30)
        return [1.0] * len(prompt)


def path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__name__}"


class FailOnRank(GroupwiseReward):
    """Groupwise: raises on the rank given by ``rank`` (read from torch.distributed), else zeros."""

    inputs = Inputs(("group_id",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", rank: int = 1):
        super().__init__(model_path, device, dtype)
        self.rank = rank

    def __call__(self, group_id, **_):
        import torch.distributed as dist

        if dist.get_rank() == self.rank:
            raise RuntimeError(f"group {group_id[0]!r} cannot be scored here")
        return [0.0] * len(group_id)


class SlowInit(PointwiseReward):
    """Records when its constructor ran (it takes ``seconds``); score 0.0."""

    inputs = Inputs(("prompt",))
    built: list[tuple[float, float]] = []

    def __init__(self, model_path=None, device="cpu", dtype="float32", seconds: float = 0.3):
        super().__init__(model_path, device, dtype)
        start = time.time()
        time.sleep(seconds)
        type(self).built.append((start, time.time()))

    def __call__(self, prompt, **_):
        return [0.0] * len(prompt)


# ---------------------------------------------------------------------------------------------------
# Shared data of the distributed tests: the global batch, which rank holds each sample, the specs.

DIST_GIDS = [
    0,
    0,
    0,
    0,
    1,
    1,
    1,
    1,
    7,
    7,
    "7",
    "7",
    "a",
    "a",
    "a",
    "a",
    "a",
    "a",
    "solo0",
    "solo0",
    "solo1",
    "solo1",
    "solo1",
    2,
    2,
    2,
]
DIST_RANKS = [0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1]
DATASETS = ["t2i", "edit", "t2i", "video", "edit"]


def dist_samples():
    from rewardzoo import Sample

    rng = np.random.default_rng(11)
    out = []
    for i, gid in enumerate(DIST_GIDS):
        size = int(rng.integers(12, 40))
        img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        img[: size // 2] //= int(rng.integers(1, 8))  # varied JPEG sizes
        out.append(
            Sample(
                prompt="x" * (i % 7 + 1),
                image=img,
                metadata={"value": float(rng.normal() * 10)},
                group_id=gid,
                dataset=DATASETS[i % len(DATASETS)],
            )
        )
    return out


def dist_specs(async_reward: bool = False):
    a = {"async_reward": True, "num_workers": 2} if async_reward else {}
    return [
        {"name": "rec", "reward_model": path(Recorder), "batch_size": 3, "applicable_datasets": ["t2i", "edit"], **a},
        {
            "name": "centered",
            "reward_model": path(CenteredValue),
            "applicable_datasets": ["t2i", "edit"],
            "weight": {"t2i": 2.0, "edit": 0.5},
            **a,
        },
        {"name": "centered_jpeg", "reward_model": path(CenteredJpeg), "weight": 0.1},
        {"name": "jpeg", "reward_model": "jpeg_compressibility", "batch_size": 4, **a},
    ]


def rank_indices(rank: int) -> list[int]:
    return [i for i, r in enumerate(DIST_RANKS) if r == rank]


class CardlessJpeg(PointwiseReward):
    """JPEG q95 size in kB, as a reward without a model card (so any device may be configured for it)."""

    inputs = Inputs(("image",))

    def __call__(self, image, **_):
        import io

        sizes = []
        for img in image:
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=95)
            sizes.append(buf.tell() / 1000)
        return sizes


class Rendezvous(PointwiseReward):
    """Score = factor * len(prompt); records each call's (tag, start, end, thread) in ``intervals``.

    While the class ``barrier`` is set (a ``threading.Barrier``), every call waits there for the others:
    entries of it then pass only when their calls are in progress at the same time (one by one, the
    barrier times out and the call fails). ``fail_on``: a prompt that raises ValueError.
    """

    inputs = Inputs(("prompt",))
    modality = "text"
    intervals: list[tuple[str, float, float, str]] = []
    barrier: threading.Barrier | None = None

    def __init__(
        self,
        model_path=None,
        device="cpu",
        dtype="float32",
        factor: float = 1.0,
        fail_on: str | None = None,
        tag: str = "",
    ):
        super().__init__(model_path, device, dtype)
        self.factor, self.fail_on, self.tag = factor, fail_on, tag

    def __call__(self, prompt, **_):
        start = time.perf_counter()
        if type(self).barrier is not None:
            type(self).barrier.wait()
        try:
            if self.fail_on is not None and self.fail_on in prompt:
                raise ValueError(f"the prompt said {self.fail_on}")
            return [self.factor * len(p) for p in prompt]
        finally:
            type(self).intervals.append((self.tag, start, time.perf_counter(), threading.current_thread().name))


def overlapping(a: tuple, b: tuple) -> bool:
    """Whether two recorded (name, start, end, ...) call intervals overlap in time."""
    return a[1] < b[2] and b[1] < a[2]


class Vandal(PointwiseReward):
    """Score = the mean of the uint8 image it got, which it then zeroes in place (a reward that writes its input)."""

    inputs = Inputs(("image",), images="uint8")
    modality = "image"
    seen: list = []

    def __call__(self, image, **_):
        out = []
        for im in image:
            type(self).seen.append(im)
            out.append(float(im.float().mean()))
            im.zero_()
        return out
