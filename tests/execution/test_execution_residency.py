"""``offload: drop`` per family that loads weights: scores after sleep + wake equal a resident model's, bit for bit,
and a wake reads the weights back from the checkpoint files the reward was loaded from (memory-mapped), not from a
private copy. Also: a wake whose checkpoint file is gone (or rewritten) since load raises a WakeError naming the
reward and the file, and the reward stays asleep.

The tiny models are built here with the builders of :mod:`rewardzoo.testing` (the same ones the per-modality
fixtures use), each in its own directory so no other test shares the cached model.
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("open_clip")

from PIL import Image

from rewardzoo import RewardProcessor
from rewardzoo import testing as rzt
from rewardzoo.errors import WakeError

PROMPTS = ["a red cube on a table", "two cats", "a city at night", "a bowl of fruit"]


def _images(n, seed=0, size=(64, 64)):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)) for _ in range(n)]


def _image_prompt(n=4):
    return [{"image": im, "prompt": PROMPTS[i]} for i, im in enumerate(_images(n))]


def _grouped(n=4):
    return [{**s, "group_id": i // 2} for i, s in enumerate(_image_prompt(n))]


def _edits(n=2):
    sources, edited = _images(n, seed=1), _images(n, seed=2)
    return [{"prompt": PROMPTS[i], "image": e, "condition_images": [sources[i]]} for i, e in enumerate(edited)]


def _texts(n=4):
    return [{"prompt": "the cat sat", "completion": " ".join(["on the mat"] * (i + 1))} for i in range(n)]


def _build(family, root):
    """(config entry, samples) of ``family``, its tiny model written under ``root``."""
    if family in ("open_clip", "group_rank", "hps_head", "aesthetic_head"):
        oc = str(rzt.tiny_open_clip_dir(root / "oc", seed=0))
        if family == "open_clip":
            return {"reward_model": "clip_score", "model_path": oc}, _image_prompt()
        if family == "group_rank":
            return {
                "reward_model": "group_rank",
                "kwargs": {"base": {"reward_model": "clip_score", "model_path": oc}},
            }, _grouped()
        if family == "hps_head":
            ckpt, _ = rzt.hps_checkpoint(root / "HPS_v2.1_compressed.pt", seed=5)
            return {"reward_model": "hpsv2", "model_path": str(ckpt), "kwargs": {"clip_model": oc}}, _image_prompt()
        head = rzt.aesthetic_head_file(root / "sac+logos+ava1-l14-linearMSE.pth", seed=7)
        return {
            "reward_model": "laion_aesthetic",
            "model_path": str(head),
            "kwargs": {"clip_model": oc},
        }, _image_prompt()
    if family == "hf_clip":
        path = rzt.tiny_hf_clip_dir(root / "openai-tiny-clip", seed=1)
        return {"reward_model": "pickscore", "model_path": str(path)}, _image_prompt()
    if family == "dino_groupwise":
        path = rzt.tiny_dino_dirs(root / "dino", seed=0)["vit"]
        return {"reward_model": "group_diversity", "model_path": str(path)}, _grouped()
    if family == "blip":
        from tests.verifiers.image_reward_tiny import write_tiny_checkpoint

        (root / "ir").mkdir()
        write_tiny_checkpoint(root / "ir")
        return {"reward_model": "image_reward", "model_path": str(root / "ir")}, _image_prompt()
    if family == "qwen_vl_judge":
        path = rzt.tiny_vlm_dir(root / "qwen2_vl", "qwen2_vl", seed=0)
        return {"reward_model": "vqascore", "model_path": str(path)}, _image_prompt(2)
    if family == "edit_reward_heads":
        base, ckpt = rzt.tiny_edit_reward_dirs(root / "er", seed=3)
        kwargs = {"base_model": str(base), "pixels": 112 * 112}
        return {"reward_model": "edit_reward", "model_path": str(ckpt), "kwargs": kwargs}, _edits()
    if family == "text":
        path = rzt.tiny_text_models(root / "text", seed=0)["gpt2_cls"]
        return {"reward_model": "sequence_reward", "model_path": path}, _texts()
    raise KeyError(family)


FAMILIES = [
    "open_clip",
    "hf_clip",
    "dino_groupwise",
    "blip",
    "qwen_vl_judge",
    "edit_reward_heads",
    "hps_head",
    "aesthetic_head",
    "text",
    "group_rank",
]


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_after_a_drop_and_a_wake_equal_a_resident_models_bit_for_bit(family, tmp_path):
    entry, samples = _build(family, tmp_path)
    entry = {"name": "r", "device": "cpu", **entry}
    expected = RewardProcessor([entry])(samples).rewards["r"]
    sleeper = RewardProcessor([{**entry, "offload": "drop"}])
    reward, residency = sleeper.rewards["r"], sleeper.loader.residency
    try:
        assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
        for _ in range(2):  # wake, score, sleep: twice
            assert sleeper(samples).rewards["r"].tobytes() == expected.tobytes()
            assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
        # read back from the checkpoint files under tmp_path, nearly nothing from the private drop file
        private = residency.private_bytes(reward)
        assert any(f.startswith(str(tmp_path.resolve())) for f in residency.files(reward))
        sleeper.wake()
        assert private <= 0.05 * residency.weight_bytes(reward), (private, residency.weight_bytes(reward))
    finally:
        sleeper.wake()  # cached models (open_clip, VLM backbones) stay usable for other tests


def test_an_onnx_reward_recreates_its_session_after_a_drop():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("nudenet")
    entry = {"name": "n", "reward_model": "nsfw_safety", "device": "cpu"}
    samples = [{"image": im} for im in _images(3, size=(96, 80))]
    expected = RewardProcessor([entry])(samples).rewards["n"]
    sleeper = RewardProcessor([{**entry, "offload": "drop"}])
    session = sleeper.rewards["n"].session
    assert session.released
    for _ in range(2):
        assert sleeper(samples).rewards["n"].tobytes() == expected.tobytes()
        assert session.released


def _own_open_clip(tmp_path):
    path = rzt.tiny_open_clip_dir(tmp_path / "oc", seed=4)
    entry = {"name": "r", "reward_model": "clip_score", "model_path": str(path), "device": "cpu", "offload": "drop"}
    return RewardProcessor([entry]), str((path / "open_clip_model.safetensors").resolve())


def test_a_wake_whose_checkpoint_file_is_gone_names_the_reward_and_the_file_and_stays_asleep(tmp_path):
    processor, checkpoint = _own_open_clip(tmp_path)
    reward, residency = processor.rewards["r"], processor.loader.residency
    samples = _image_prompt()
    expected = processor(samples).rewards["r"]
    assert checkpoint in residency.files(reward)
    os.rename(checkpoint, checkpoint + ".away")
    with pytest.raises(WakeError, match=f"reward 'clip_score' cannot wake: its checkpoint file {checkpoint} is gone"):
        processor(samples)
    assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
    with pytest.raises(WakeError, match="stays asleep"):
        processor.wake()
    assert residency.is_asleep(reward)
    os.rename(checkpoint + ".away", checkpoint)  # back: the next call wakes it, on the same weights
    assert processor(samples).rewards["r"].tobytes() == expected.tobytes()


def test_a_wake_whose_checkpoint_file_was_rewritten_refuses_to_read_it(tmp_path):
    processor, checkpoint = _own_open_clip(tmp_path)
    reward, residency = processor.rewards["r"], processor.loader.residency
    samples = _image_prompt()
    expected = processor(samples).rewards["r"]
    shutil.copy2(checkpoint, checkpoint + ".orig")  # its bytes and modification time
    other = rzt.tiny_open_clip_dir(tmp_path / "other", seed=9) / "open_clip_model.safetensors"
    shutil.copy(other, checkpoint)  # same names and shapes, other values: reading it would score other weights
    with pytest.raises(WakeError, match=f"reward 'clip_score' cannot wake: its checkpoint file {checkpoint} was rewr"):
        processor.wake()
    assert residency.is_asleep(reward)
    os.replace(checkpoint + ".orig", checkpoint)
    assert processor(samples).rewards["r"].tobytes() == expected.tobytes()


_HEAP = """
import sys, torch
from rewardzoo.core.residency import release_heap

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

tensors = [torch.ones(4 << 20, dtype=torch.uint8) for _ in range(64)]  # 256 MiB in 4 MiB heap chunks
top = torch.ones(1 << 10, dtype=torch.uint8)  # above them: free() cannot shrink the heap from its top
before = rss()
del tensors
freed = before - rss()
release_heap()
print(freed, before - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_heap_returns_freed_heap_pages_to_the_os():
    """Tensors under glibc's mmap threshold live on the heap, and free() keeps their pages (a real Llama-3.2-1B reward
    freed 86% of its weights at offload: drop, not 100%); sleep() now trims the heap (malloc_trim) after a drop.
    The thresholds are fixed through glibc's environment so the heap holds the tensors and free() does not trim."""
    import subprocess

    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}
    out = subprocess.run([sys.executable, "-c", _HEAP], capture_output=True, text=True, env=env, check=True)
    by_free, with_trim = map(int, out.stdout.split())
    assert by_free < 0.1 * (256 << 20)  # free() alone gave (almost) nothing back
    assert with_trim > 0.9 * (256 << 20)


def test_a_drop_trims_the_heap_and_a_cpu_sleep_does_not(monkeypatch, tmp_path):
    import rewardzoo.core.residency as residency

    calls = []
    monkeypatch.setattr(residency, "release_heap", lambda: calls.append(1))
    path = rzt.tiny_open_clip_dir(tmp_path / "clip")
    for mode, expected in (("cpu", 0), ("drop", 1)):
        calls.clear()
        entry = {"name": "r", "reward_model": "clip_score", "model_path": str(path), "device": "cpu", "offload": mode}
        RewardProcessor([entry]).sleep()
        assert len(calls) == expected, mode
