"""Rewards the worker tests build in a worker process (``reward_model: tests.environments.worker_rewards:NAME``).

Each reports the process it ran in (extra ``pid``), so a test can tell a worker's scores from in-process ones.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from rewardzoo.rewards.base import GroupwiseReward, Inputs, PointwiseReward, RewardOutput


def brightness(images) -> np.ndarray:
    """The test's independent computation: the mean of each image's uint8 pixels, divided by 255."""
    return np.array([np.asarray(img, dtype=np.float64).mean() / 255.0 for img in images])


class Brightness(PointwiseReward):
    """Mean pixel value in [0, 1] (plus ``offset``), with the worker's pid as an extra."""

    inputs = Inputs(("image", "prompt"))
    higher_is_better = False
    score_range = (0.0, 2.0)

    def __init__(self, model_path=None, device="cpu", dtype="float32", offset: float = 0.0, delay_s: float = 0.0):
        super().__init__(model_path, device, dtype)
        self.offset, self.delay_s = offset, delay_s

    def __call__(self, image, prompt):
        time.sleep(self.delay_s)
        scores = [float(v) + self.offset for v in brightness(image)]
        return RewardOutput(
            scores, {"pid": np.full(len(scores), float(os.getpid())), "device": [self.device] * len(scores)}
        )


class Length(PointwiseReward):
    """Characters in the completion."""

    inputs = Inputs(("completion",))
    score_range = (0.0, 1e6)

    def __call__(self, completion):
        return RewardOutput([float(len(c)) for c in completion], {"pid": np.full(len(completion), float(os.getpid()))})


class Centred(GroupwiseReward):
    """Each completion's length minus its group's mean length."""

    inputs = Inputs(("completion", "group_id"))

    def __call__(self, completion, group_id):
        lengths = np.array([len(c) for c in completion], dtype=np.float64)
        return lengths - lengths.mean()


class DiesOnce(PointwiseReward):
    """Kills its process on the first call (a marker file remembers it), scores the brightness afterwards."""

    inputs = Inputs(("image",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", marker: str = ""):
        super().__init__(model_path, device, dtype)
        self.marker = Path(marker)

    def __call__(self, image):
        if not self.marker.exists():
            self.marker.write_text("died")
            print("DiesOnce: dying now", file=sys.stderr, flush=True)
            os._exit(7)
        return brightness(image)


class AlwaysDies(PointwiseReward):
    inputs = Inputs(("prompt",))

    def __call__(self, prompt):
        print("AlwaysDies: segfault-like exit", file=sys.stderr, flush=True)
        os._exit(9)


class HangsAtStart(PointwiseReward):
    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32"):
        super().__init__(model_path, device, dtype)
        print("HangsAtStart: loading forever", file=sys.stderr, flush=True)
        time.sleep(600)


class Malformed(PointwiseReward):
    """Answers for the worker: a frame that is valid MessagePack but no score response."""

    inputs = Inputs(("prompt",))

    def __call__(self, prompt):
        import gc

        from rewardzoo.environments.channel import Channel

        channel = next(o for o in gc.get_objects() if isinstance(o, Channel))
        print("Malformed: answering nonsense", file=sys.stderr, flush=True)
        channel.send({"ok": {"protocol": 1, "rewards": "nonsense"}})
        time.sleep(600)  # never answers properly


class Raises(PointwiseReward):
    inputs = Inputs(("prompt",))

    def __call__(self, prompt):
        raise RuntimeError("the reward's own bug")


class HangsInFirstCall(PointwiseReward):
    """Writes a line per call into ``marker``; in the first call it starts a helper process (as a reward that
    runs a tool might) and then hangs; later calls score 1.0 per prompt."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", marker: str = ""):
        super().__init__(model_path, device, dtype)
        self.marker = Path(marker)

    def __call__(self, prompt):
        with open(self.marker, "a") as out:
            out.write(f"{os.getpid()}\n")
        if len(self.marker.read_text().splitlines()) == 1:
            import subprocess

            helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print(f"HangsInFirstCall: hanging in the call (helper pid {helper.pid})", file=sys.stderr, flush=True)
            time.sleep(600)
        return RewardOutput([1.0] * len(prompt), {"pid": np.full(len(prompt), float(os.getpid()))})


class StartsChild(PointwiseReward):
    """Starts a long ``sleep`` child when built and writes its pid to ``pidfile`` (a reward that runs a server or
    a tool process); scores the prompt length."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", pidfile: str = "", new_session: bool = False):
        import subprocess

        super().__init__(model_path, device, dtype)
        # new_session: the child leaves the worker's session and process group (a daemon-like tool server)
        self.child = subprocess.Popen(["sleep", "300"], start_new_session=new_session)
        with open(pidfile, "w") as fh:
            fh.write(str(self.child.pid))

    def __call__(self, prompt, **_):
        return [float(len(p)) for p in prompt]
