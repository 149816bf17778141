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
from rewardzoo.rewards.base import Inputs, PointwiseReward

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


# 2**24 + 4 elements: float32 cannot hold N - 1 = 2**24 + 3 and rounds it up to N, so a float32
# ``linspace(0, N - 1, k)`` ends one past the last element (the case of a real CLIP's 49408 x 1024 token embedding)
WIDE = 2**24 + 4


class WideWeights(PointwiseReward):
    """Test-local: the tensors of ``model_path``/model.safetensors as parameters, at their stored dtypes.
    Score = the sum over the parameters of their element ``len(prompt)`` places from the end (float64)."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32"):
        super().__init__(model_path, device, dtype)
        from safetensors.torch import load_file

        self.net = self.hold(torch.nn.Module())
        for key, value in load_file(os.path.join(model_path, "model.safetensors")).items():
            self.net.register_parameter(key, torch.nn.Parameter(value, requires_grad=False))

    def __call__(self, prompt, **_):
        return [sum(float(p.reshape(-1)[-len(q)]) for p in self.net.parameters()) for q in prompt]


def test_tensors_of_more_than_2_24_elements_drop_and_wake_bit_identical_from_their_checkpoint(tmp_path):
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    weights = {  # 32 MB each: a flat float16 one, a bfloat16 matrix (4 x (2**22 + 1))
        "f16": torch.randn(WIDE, generator=gen).to(torch.float16),
        "bf16": torch.randn(4, WIDE // 4, generator=gen).to(torch.bfloat16),
    }
    save_file(weights, str(tmp_path / "model.safetensors"))
    entry = {"name": "w", "reward_model": f"{__name__}:WideWeights", "model_path": str(tmp_path), "device": "cpu"}
    samples = [{"prompt": "x" * k} for k in (1, 2, 7)]
    expected = [sum(float(w.reshape(-1)[-k]) for w in weights.values()) for k in (1, 2, 7)]

    sleeper = RewardProcessor([{**entry, "offload": "drop"}])  # dropped at load: each tensor bound to its entry
    reward, residency = sleeper.rewards["w"], sleeper.loader.residency
    assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
    for _ in range(2):  # wake, score, sleep: twice
        np.testing.assert_array_equal(sleeper(samples).rewards["w"], np.float32(expected))
        assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
    # read back from the checkpoint file, nothing from a private copy
    assert residency.files(reward) == [str((tmp_path / "model.safetensors").resolve())]
    assert residency.private_bytes(reward) == 0
    sleeper.wake()
    params = dict(reward.net.named_parameters())
    for key, original in weights.items():
        woken = params[key].data
        assert woken.dtype == original.dtype and woken.shape == original.shape
        assert torch.equal(woken.view(torch.int16), original.view(torch.int16)), key
    sleeper.close()


# Wake integrity (issue 49): the attacks that woke other weights, and what a WakeError left behind.


def _rewrite_in_place(path, data):
    """Overwrite ``path``'s bytes in place (same inode) with ``data`` and restore its access and modification
    times, as a careless tool or an attacker could (``utime`` cannot restore the change time)."""
    before = os.stat(path)
    assert len(data) == before.st_size
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def _small_weights(seed):
    gen = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(3, 70_000, generator=gen), "b": torch.randn(50_000, generator=gen).to(torch.bfloat16)}


def _small_weights_reward(tmp_path):
    """A ``WideWeights`` entry over a small file of seed 0, the file's other contents (seed 1), the samples and
    the scores of the seed-0 weights computed from the tensors themselves."""
    from safetensors.torch import save_file

    save_file(_small_weights(0), str(tmp_path / "model.safetensors"))
    other = tmp_path / "other.safetensors"
    save_file(_small_weights(1), str(other))
    entry = {"name": "w", "reward_model": f"{__name__}:WideWeights", "model_path": str(tmp_path), "device": "cpu"}
    samples = [{"prompt": "x" * k} for k in (1, 2, 7)]
    expected = np.float32([sum(float(w.reshape(-1)[-k]) for w in _small_weights(0).values()) for k in (1, 2, 7)])
    return entry, other.read_bytes(), samples, expected


def test_a_checkpoint_rewritten_in_place_with_its_mtime_restored_is_a_wake_error_not_other_scores(tmp_path):
    entry, other, samples, expected = _small_weights_reward(tmp_path)
    checkpoint = str((tmp_path / "model.safetensors").resolve())
    original = open(checkpoint, "rb").read()
    processor = RewardProcessor([{**entry, "offload": "drop"}])
    reward, residency = processor.rewards["w"], processor.loader.residency
    np.testing.assert_array_equal(processor(samples).rewards["w"], expected)
    _rewrite_in_place(checkpoint, other)
    with pytest.raises(WakeError, match=f"wideweights' cannot wake: its checkpoint file {checkpoint} was rewritten"):
        processor(samples)
    assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
    _rewrite_in_place(checkpoint, original)  # the loaded bits back (its change time still differs): accepted
    np.testing.assert_array_equal(processor(samples).rewards["w"], expected)
    one_bit = bytearray(original)  # one bit of a weight in the middle of the data, between the sampled windows
    one_bit[len(original) // 2 + 3] ^= 1
    _rewrite_in_place(checkpoint, bytes(one_bit))
    with pytest.raises(WakeError, match=f"its checkpoint file {checkpoint} was rewritten"):
        processor.wake()
    processor.close()


def test_a_rewrite_while_awake_does_not_change_the_live_models_scores(tmp_path):
    entry, other, samples, expected = _small_weights_reward(tmp_path)
    processor = RewardProcessor([{**entry, "offload": "drop"}])
    reward, residency = processor.rewards["w"], processor.loader.residency
    np.testing.assert_array_equal(processor(samples).rewards["w"], expected)  # woken from the file, asleep again
    with processor.awake():
        assert not residency.is_asleep(reward)
        _rewrite_in_place(str(tmp_path / "model.safetensors"), other)
        np.testing.assert_array_equal(processor(samples).rewards["w"], expected)
        for tensor in residency.tensors(reward):  # the live weights are private memory, not the file's pages
            assert tensor.data.untyped_storage().filename is None
    with pytest.raises(WakeError, match="was rewritten since it was loaded"):  # the next wake: the file is not it
        processor.wake()
    processor.close()


def test_after_a_wake_error_close_works_and_a_new_processor_loads_the_new_weights(tmp_path):
    processor, checkpoint = _own_open_clip(tmp_path)
    samples = _image_prompt()
    old_scores = processor(samples).rewards["r"]
    other_dir = rzt.tiny_open_clip_dir(tmp_path / "other", seed=9)
    entry = {"name": "r", "reward_model": "clip_score", "device": "cpu"}
    fresh = RewardProcessor([{**entry, "model_path": str(other_dir)}])(samples).rewards["r"]  # an independent load
    assert fresh.tobytes() != old_scores.tobytes()
    shutil.copy(other_dir / "open_clip_model.safetensors", checkpoint)
    with pytest.raises(WakeError, match=f"its checkpoint file {checkpoint} was rewritten"):
        processor(samples)
    processor.close()  # no WakeError: the reward just stays asleep
    old_model = processor.rewards["r"]
    for offload in ("none", "drop"):
        new = RewardProcessor([{**entry, "model_path": str(tmp_path / "oc"), "offload": offload}])
        assert new(samples).rewards["r"].tobytes() == fresh.tobytes()
        assert new(samples).rewards["r"].tobytes() == fresh.tobytes()
        new.close()
    with pytest.raises(WakeError, match="stays asleep"):  # the old processor still refuses the other weights
        processor(samples)
    assert processor.rewards["r"] is old_model


def test_a_shared_loader_builds_a_model_whose_wake_failed_afresh(tmp_path):
    from rewardzoo import RewardLoader

    entry, _other, samples, expected = _small_weights_reward(tmp_path)
    loader = RewardLoader()
    first = RewardProcessor([{**entry, "offload": "drop"}], loader)
    np.testing.assert_array_equal(first(samples).rewards["w"], expected)
    shutil.copy(tmp_path / "other.safetensors", tmp_path / "model.safetensors")
    with pytest.raises(WakeError, match="was rewritten since it was loaded"):
        first(samples)
    second = RewardProcessor([{**entry, "offload": "drop"}], loader)
    assert second.rewards["w"] is not first.rewards["w"]
    new = np.float32([sum(float(w.reshape(-1)[-k]) for w in _small_weights(1).values()) for k in (1, 2, 7)])
    np.testing.assert_array_equal(second(samples).rewards["w"], new)
    loader.close()  # the first model stays asleep; no WakeError


_HEAP = """
import sys, torch
from rewardzoo.shared.heap import release_heap

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
