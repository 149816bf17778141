"""Run by tests/audio/test_audio_scale.py in a fresh process: one processor call on one clip (a file path or a float32
array); prints the peak RSS growth of the call (VmHWM after, reset by /proc/self/clear_refs before) as JSON."""

from __future__ import annotations

import json
import sys

import numpy as np

from rewardzoo.rewards.base import Inputs, PointwiseReward


class FirstSample(PointwiseReward):
    """Score = the clip's first sample: what the processor's conversion holds, with no working set of its own."""

    inputs = Inputs(("audio",), sample_rate=16000)

    def __call__(self, audio, **_):
        return [float(a[0, 0]) for a in audio]


class FirstSampleStereo(FirstSample):
    inputs = Inputs(("audio",), mono=False, sample_rate=24000)


def status_kb(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def main(reward: str, path: str, form: str) -> None:
    import soundfile as sf

    from rewardzoo.core.processor import RewardProcessor

    model = reward if reward in ("loudness",) else f"tests.audio.scale_child:{reward}"  # a registry name: the reward
    proc = RewardProcessor([{"name": "first", "reward_model": model}])
    warm = np.zeros((2, 48000), np.float32)
    proc([{"audio": warm, "audio_sample_rate": 48000}])
    sample = {"audio": path}
    if form == "array":
        sample = {"audio": np.ascontiguousarray(sf.read(path, dtype="float32")[0].T), "audio_sample_rate": 48000}
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kb("VmRSS")
    proc([sample])
    print(json.dumps({"growth": (status_kb("VmHWM") - before) * 1024}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
