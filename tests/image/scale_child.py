"""Run by tests/image/test_image_scale.py in a fresh process: one processor call on N 3840x2160 images; prints the
peak RSS growth of the call (VmHWM after, reset by /proc/self/clear_refs before) and the scores, as JSON."""

from __future__ import annotations

import json
import sys


def status_kb(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def main(spec_json: str, paths_json: str, small: str) -> None:
    from rewardzoo.core.processor import RewardProcessor

    proc = RewardProcessor([json.loads(spec_json)])
    proc([{"image": small, "prompt": "a cat"}] * 2)  # warm: lazy imports, thread pools, tokenizer caches
    samples = [{"image": p, "prompt": "a photo of a cat"} for p in json.loads(paths_json)]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    before = status_kb("VmRSS")
    result = proc(samples)
    growth = (status_kb("VmHWM") - before) * 1024
    name = json.loads(spec_json)["name"]
    print(json.dumps({"growth": growth, "scores": [float(x) for x in result.rewards[name]]}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
