"""VLM judge benchmarks on tiny random-init Qwen2-VL models (``rewardzoo.testing.tiny_vlm_dir``).

- vqascore batched: the reward on 8 (image, prompt) pairs in one left-padded forward pass, against
  t2v_metrics' pattern on the same model: one ``generate(max_new_tokens=1, output_scores=True)`` per pair
  (transformers alone, processor call per pair). A tiny model measures the batching, not a 7B checkpoint.
- endpoint concurrency: ``OpenAIVLM.generate`` of 16 queries with 8 requests in flight against the same
  backend with 1 in flight, both against one local server on 127.0.0.1 (``tests/vlm/openai_server.py``:
  the tiny model through transformers, batching requests that arrive together as vLLM / SGLang do).
  ``transformers serve`` 5.24 is not used here: on this machine it answered 16 concurrent requests more
  slowly than 16 sequential ones (it does not batch them), so it cannot show what concurrency buys.
- shared backbone memory: peak RSS of a process that builds ``vqascore`` and ``unified_reward`` on one model
  (the loader shares one backbone) against one that loads the model twice (the cache emptied in between),
  on a larger random-init Qwen2-VL (hidden 512, 4 layers; bf16 on disk, fp32 in memory), each in a fresh
  subprocess.

Run: ``python benchmarks/bench_vlm.py [--quick] [--part speed|endpoint|memory]``. Ratios > 1 favour rewardzoo.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved, quiet_transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTION = 'Does this figure show "{}"? Please answer Yes or No.'


def pairs(n: int, seed: int = 0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (64 + 8 * (i % 3), 64, 3), dtype=np.uint8)) for i in range(n)]
    return images, [f"a photo of object {i} on a table" for i in range(n)]


def bench_vqascore(model_dir: str, repeats: int) -> dict:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    import rewardzoo

    reward = rewardzoo.load_reward({"name": "vqascore", "model_path": model_dir})
    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
    yes = processor.tokenizer.encode("Yes", add_special_tokens=False)[0]
    images, prompts = pairs(8)

    def t2v_metrics_loop():
        out = []
        for image, prompt in zip(images, prompts):
            messages = [
                {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION.format(prompt)}]}
            ]
            text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            inputs = processor(text=[text], images=[image], padding=True, return_tensors="pt")
            with torch.inference_mode():
                gen = model.generate(
                    **inputs,
                    max_new_tokens=1,
                    do_sample=False,
                    output_scores=True,
                    return_dict_in_generate=True,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                )
            out.append(float(torch.softmax(gen.scores[0][0], dim=-1)[yes]))
        return out

    batched = lambda: reward(prompt=prompts, image=images).rewards  # noqa: E731
    diff = float(np.max(np.abs(np.array(t2v_metrics_loop()) - batched())))
    times, ratios = interleaved({"t2v_metrics loop": t2v_metrics_loop, "batched": batched}, repeats)
    ratio = 1.0 / ratios["batched"]
    print(
        f"vqascore batch 8: loop {times['t2v_metrics loop'] * 1e3:.1f} ms | batched {times['batched'] * 1e3:.1f} ms"
        f" | {ratio:.2f}x (max |score difference| {diff:.1e})"
    )
    return figure(
        "vlm.vqascore.batched",
        "`vqascore` on 8 (image, prompt) pairs, tiny random-init Qwen2-VL, CPU, "
        "1 torch thread: one left-padded forward pass vs t2v_metrics' pattern (one generate of 1 token "
        f"per pair, transformers alone), median of {repeats} interleaved runs (median per-run ratio); "
        f"max |score difference| {diff:.1e}",
        measure("rewardzoo batched", times["batched"] * 1e3, "ms"),
        baseline=measure("t2v_metrics loop", times["t2v_metrics loop"] * 1e3, "ms"),
        ratio=ratio,
        ratio_label="x faster",
        goal=">= 3x",
        rewards=["vqascore", "video_vqascore", "vlm_judge"],
        notes="a tiny model measures per-call overhead and batching, not a 7B checkpoint",
    )


def bench_endpoint(model_dir: str, repeats: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "vlm"))
    from openai_server import ChatServer

    from rewardzoo.rewards.models.vlm.backbone import VLMQuery
    from rewardzoo.rewards.models.vlm.endpoint import OpenAIVLM

    server = ChatServer(model_dir, max_batch=8)
    images, prompts = pairs(16, seed=1)
    queries = [VLMQuery.of(f"Rate {p} from 1 to 5. Final Score:", image=im) for im, p in zip(images, prompts)]
    sequential = OpenAIVLM(server.url, model_dir, max_concurrency=1)
    concurrent = OpenAIVLM(server.url, model_dir, max_concurrency=8)
    try:
        same = sequential.generate(queries, max_new_tokens=8) == concurrent.generate(queries, max_new_tokens=8)
        times, ratios = interleaved(
            {
                "sequential": lambda: sequential.generate(queries, max_new_tokens=8),
                "8 in flight": lambda: concurrent.generate(queries, max_new_tokens=8),
            },
            repeats,
        )
    finally:
        sequential.close()
        concurrent.close()
        server.close()
    ratio = 1.0 / ratios["8 in flight"]
    print(
        f"endpoint 16 requests: sequential {times['sequential']:.3f} s | 8 in flight {times['8 in flight']:.3f} s | "
        f"{ratio:.2f}x (same answers: {same}; server batches {sorted(set(server.batches))})"
    )
    return figure(
        "vlm.endpoint.concurrency",
        "OpenAI-compatible backend, 16 chat completions (image + prompt, 8 new "
        "tokens) against a local server on 127.0.0.1 running the tiny Qwen2-VL and batching concurrent "
        f"requests (up to 8): 8 requests in flight vs 1, median of {repeats} interleaved runs; same "
        f"answers: {same}",
        measure("8 in flight", 16 / times["8 in flight"], "requests/s"),
        baseline=measure("sequential", 16 / times["sequential"], "requests/s"),
        ratio=ratio,
        ratio_label="x faster",
        goal=">= 3x",
        rewards=["unified_reward", "unified_reward_think", "vlm_judge", "vqascore"],
        notes="the server is the test suite's batching stand-in for vLLM/SGLang (tests/vlm/openai_server.py)",
    )


_MEMORY_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import torch, transformers  # imported before the baseline: only the models count
from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: F401
import rewardzoo
from rewardzoo.rewards.vlm import backbone as vlm
from rewardzoo.rewards.vlm import unified_reward, vqascore  # noqa: F401

def rss(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key)) / 1024

before = rss("VmRSS:")
a = rewardzoo.load_reward({"name": "vqascore", "model_path": sys.argv[1]})
if sys.argv[2] == "two":
    vlm._CACHE.clear()          # a second, separate load of the same model
b = rewardzoo.load_reward({"name": "unified_reward", "model_path": sys.argv[1]})
storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes()
            for r in (a, b) for p in r.backend.backbone.model.parameters()}
print(json.dumps({"peak_above_mb": rss("VmHWM:") - before, "param_mb": sum(storages.values()) / 2**20,
                  "shared": a.backend.backbone is b.backend.backbone}))
"""


def bench_memory(model_dir: str) -> dict:
    out = {}
    for mode in ("two", "shared"):
        res = subprocess.run(
            [sys.executable, "-c", _MEMORY_SCRIPT, model_dir, mode, str(ROOT)],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    two, shared = out["two"]["peak_above_mb"], out["shared"]["peak_above_mb"]
    params = out["two"]["param_mb"], out["shared"]["param_mb"]
    print(
        f"memory vqascore + unified_reward: two loads {two:.0f} MB | shared backbone {shared:.0f} MB | "
        f"{two / shared:.2f}x (weights held {params[0]:.0f} vs {params[1]:.0f} MB; shared: {out['shared']['shared']})"
    )
    return figure(
        "vlm.memory.shared_backbone",
        "`vqascore` + `unified_reward` on one model: peak RSS above the "
        "process start while building both, one shared backbone (the loader's cache) vs two separate "
        "loads; random-init Qwen2-VL, hidden 512, 4 layers, saved in bf16 and loaded in fp32 (weights "
        f"held: {params[0]:.0f} MB vs {params[1]:.0f} MB), each in a fresh process",
        measure("shared backbone", shared, "MB"),
        baseline=measure("two loads", two, "MB"),
        ratio=two / shared,
        ratio_label="x less memory",
        rewards=["vqascore", "unified_reward"],
    )


def memory_model(root: Path) -> str:
    from rewardzoo.testing import tiny_vlm_config, tiny_vlm_dir, tiny_vlm_processor

    processor = tiny_vlm_processor("qwen2_vl")
    config = tiny_vlm_config(
        "qwen2_vl",
        vocab_size=len(processor.tokenizer),
        vision={"hidden_size": 512},
        text={
            "hidden_size": 512,
            "intermediate_size": 2048,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]},
        },
    )  # sums to head_dim / 2
    path = tiny_vlm_dir(root / "memory", "qwen2_vl", config=config, processor=processor)
    from transformers import AutoModelForImageTextToText

    # bf16 on disk, fp32 in memory: each load converts (a copy), as a load onto a GPU copies; an fp32 file loaded
    # in fp32 on the CPU may stay memory-mapped, and two maps of one file share the page cache
    AutoModelForImageTextToText.from_pretrained(path, dtype="bfloat16").save_pretrained(path)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--part", choices=("speed", "endpoint", "memory"), help="run one part")
    args = parser.parse_args()
    import torch

    from rewardzoo.testing import tiny_vlm_dir

    quiet_transformers()
    torch.set_num_threads(1)
    repeats = 3 if args.quick else 7
    figs = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(tiny_vlm_dir(Path(tmp) / "tiny", "qwen2_vl", seed=0))
        if args.part in (None, "speed"):
            figs.append(bench_vqascore(model_dir, repeats))
        if args.part in (None, "endpoint"):
            figs.append(bench_endpoint(model_dir, repeats))
        if args.part in (None, "memory"):
            figs.append(bench_memory(memory_model(Path(tmp))))
    prefix = {"speed": "vlm.vqascore", "endpoint": "vlm.endpoint", "memory": "vlm.memory"}
    write_results(__file__, figs, parts=[prefix[args.part]] if args.part else None)


if __name__ == "__main__":
    main()
