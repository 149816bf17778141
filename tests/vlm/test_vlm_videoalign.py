"""videoalign: VideoAlign's released layout onto a tiny Qwen2-VL, scores against transformers' own model call.

The fixture builds what KwaiVGI/VideoReward publishes, at toy size (:func:`rewardzoo.testing.tiny_videoalign_release`):
a Qwen2-VL "base model" directory (config, tokenizer, chat template, processors; no weights), ``model_config.json``
(data / model / LoRA / inference sections) and ``checkpoint-7/model.pth``: the ``state_dict()`` of a real PEFT LoRA
model (``peft``) around VideoAlign's reward model (Qwen2-VL + bias-free ``rm_head``), under the older Qwen2-VL key
names (``base_model.model.visual.*``, ``base_model.model.model.layers.*.q_proj.base_layer.weight``,
``...lora_A.default.weight``, ``base_model.model.rm_head.weight``). The reference re-computes each score on its
own: qwen-vl-utils' frame choice and resize (written here from its source), the processor as VideoAlign calls
it, the PEFT model's own forward (LoRA unmerged) with the reward model's positions ``0 .. L-1``, the head
at the three reward tokens and the normalisation applied by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.vlm.videoalign import REWARD_TOKENS, VideoAlign, videoalign_text
from rewardzoo.testing import VIDEOALIGN_NORM as NORM
from rewardzoo.testing import tiny_videoalign_release, videoalign_model_config

peft = pytest.importorskip("peft")

MIN_PIXELS, MAX_PIXELS = 56 * 56, 8 * 28 * 28  # the test's frame bounds (VideoAlign's: 100352, 200704)
SOURCE_FPS = 4.0
PROMPTS = ["a cat on a mat", "a photo of a dog", "two cats"]
# (frames, h, w): frame counts 8, 12, 5 at 4 fps -> 4, 6, 2 frames (2 per second, even); mixed sizes
VIDEOS = [(8, 64, 96), (12, 100, 60), (5, 200, 200)]


def _model_config(base, *, lora=True, inference=True):
    return videoalign_model_config(base, max_pixels=MAX_PIXELS, lora=lora, inference=inference)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(released directory, base dir, PEFT reference model, processor with the reward tokens)."""
    released, base, lora, processor = tiny_videoalign_release(
        tmp_path_factory.mktemp("videoalign"), max_pixels=MAX_PIXELS
    )
    state = torch.load(released / "checkpoint-7" / "model.pth", weights_only=True)
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight" in state
    assert "base_model.model.visual.patch_embed.proj.weight" in state and "base_model.model.rm_head.weight" in state
    return released, base, lora, processor


@pytest.fixture(scope="module")
def reward(published):
    released, *_ = published
    return VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)


def _videos(seed=0, specs=VIDEOS):
    rng = np.random.default_rng(seed)
    return [[Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for _ in range(t)] for t, h, w in specs]


def _smart_nframes(total, fps=2.0, video_fps=SOURCE_FPS):
    """qwen-vl-utils ``smart_nframes`` (fps path), from its source."""
    lo = math.ceil(4 / 2) * 2
    hi = math.floor(min(768, total) / 2) * 2
    n = round(min(max(total / video_fps * fps, lo), hi) / 2) * 2
    return min(n, total)


def _smart_resize(h, w, lo=MIN_PIXELS, hi=MAX_PIXELS):
    hb, wb = max(28, round(h / 28) * 28), max(28, round(w / 28) * 28)
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = math.floor(h / beta / 28) * 28, math.floor(w / beta / 28) * 28
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / 28) * 28, math.ceil(w * beta / 28) * 28
    return hb, wb


def _reference(published, frames, prompt, *, normalize=True, lora_on=True):
    """(overall, VQ, MQ, TA) of one video, step by step as VideoAlign's inference does for a decoded file."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.functional import resize

    _, _, lora, processor = published
    video = torch.from_numpy(np.stack([np.asarray(f) for f in frames])).permute(0, 3, 1, 2)  # decord: uint8 TCHW
    idx = torch.linspace(0, len(frames) - 1, _smart_nframes(len(frames))).round().long().tolist()
    video = video[idx]
    video = resize(
        video, list(_smart_resize(*video.shape[-2:])), interpolation=InterpolationMode.BICUBIC, antialias=True
    ).float()
    msgs = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": videoalign_text(prompt)}]}]
    text = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    batch = processor(text=[text], videos=[video], return_tensors="pt", videos_kwargs={"do_rescale": True})
    positions = torch.arange(batch["input_ids"].shape[1])[None]
    inner = lora.base_model.model  # the reward model; its LoRA layers are live inside
    with torch.no_grad():
        if lora_on:
            hidden = inner.model(**batch, position_ids=positions).last_hidden_state[0]
        else:
            with lora.disable_adapter():
                hidden = inner.model(**batch, position_ids=positions).last_hidden_state[0]
        ids = processor.tokenizer.convert_tokens_to_ids(list(REWARD_TOKENS))
        at = [int((batch["input_ids"][0] == t).nonzero()) for t in ids]
        raw = (hidden[at] @ inner.rm_head.weight.T)[:, 0].double().numpy()  # VQ, MQ, TA
    if normalize:
        raw = np.array([(raw[k] - NORM[f"{d}_mean"]) / NORM[f"{d}_std"] for k, d in enumerate(("VQ", "MQ", "TA"))])
    return np.array([raw.sum(), *raw])


def test_matches_step_by_step_reference_per_video(reward, published):
    videos = _videos(0)
    out = reward(video=videos, prompt=PROMPTS)
    expected = np.array([_reference(published, v, p) for v, p in zip(videos, PROMPTS)])
    np.testing.assert_allclose(np.asarray(out.rewards), expected[:, 0], atol=1e-5, rtol=0)
    for k, d in enumerate(("VQ", "MQ", "TA"), start=1):
        np.testing.assert_allclose(np.asarray(out.extras[d]), expected[:, k], atol=1e-5, rtol=0)
    assert np.ptp(expected[:, 0]) > 1e-3


def test_batched_equals_one_at_a_time_over_frame_counts(reward):
    videos = _videos(1)
    batched = np.asarray(reward(video=videos, prompt=PROMPTS).rewards)
    single = np.array([float(reward(video=[v], prompt=[p]).rewards[0]) for v, p in zip(videos, PROMPTS)])
    np.testing.assert_allclose(batched, single, atol=1e-5, rtol=0)


def test_lora_is_merged_and_normalisation_can_be_switched_off(published):
    released, *_ = published
    videos = _videos(2, VIDEOS[:1])
    raw = VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, normalize=False)
    got = raw(video=videos, prompt=PROMPTS[:1])
    ref = _reference(published, videos[0], PROMPTS[0], normalize=False)
    np.testing.assert_allclose([got.extras[d][0] for d in ("VQ", "MQ", "TA")], ref[1:], atol=1e-5, rtol=0)
    no_lora = _reference(published, videos[0], PROMPTS[0], normalize=False, lora_on=False)
    assert np.abs(ref[1:] - no_lora[1:]).max() > 1e-4  # the LoRA changes the scores: it was really merged


def test_frame_choice_follows_qwen_vl_utils():
    from rewardzoo.rewards.models.vlm.reward_models import video_frame_indices

    # 2 fps of a 24 fps clip: 49 frames -> 4 (the minimum), 121 -> 10, 5 s at 16 fps (81) -> 10
    assert len(video_frame_indices(49, fps=2.0, source_fps=24.0)) == 4
    assert len(video_frame_indices(121, fps=2.0, source_fps=24.0)) == 10
    assert video_frame_indices(81, fps=2.0, source_fps=16.0) == torch.linspace(0, 80, 10).round().long().tolist()
    assert video_frame_indices(3, fps=2.0, source_fps=24.0) == [0, 2]
    assert video_frame_indices(30, num_frames=7) == torch.linspace(0, 29, 8).round().long().tolist()
    assert len(video_frame_indices(3, num_frames=8)) == 3
    with pytest.raises(InputError, match="2 or more"):
        video_frame_indices(1, fps=2.0, source_fps=24.0)


def test_frame_choice_stays_inside_a_video_of_more_than_2_24_frames():
    from rewardzoo.rewards.models.vlm.reward_models import video_frame_indices

    total = 2**24 + 4  # float32 rounds total - 1 = 2**24 + 3 up to total: qwen-vl-utils' last index is past the end
    reference = torch.linspace(0, total - 1, 8).round().long().tolist()
    assert reference[-1] == total
    got = video_frame_indices(total, num_frames=8)
    assert got[:-1] == reference[:-1] and got[-1] == total - 1  # the reference's choice, its last frame kept inside


def test_fixed_num_frames(published):
    released, *_ = published
    r = VideoAlign(model_path=str(released), num_frames=4, min_pixels=MIN_PIXELS)
    videos = _videos(3, [(12, 64, 96)])
    # 12 frames at 4 fps give 6 frames by fps; num_frames 4 must give a different input and score
    by_fps = VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    assert (
        abs(
            float(r(video=videos, prompt=PROMPTS[:1]).rewards[0])
            - float(by_fps(video=videos, prompt=PROMPTS[:1]).rewards[0])
        )
        > 1e-6
    )


def test_released_layout_variants_and_config_errors(published, tmp_path):
    released, base, _lora, _ = published
    with pytest.raises(ConfigError, match="source_fps"):
        VideoAlign(model_path=str(released))
    with pytest.raises(ConfigError, match="checkpoint-3"):
        VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, checkpoint_step=3, min_pixels=MIN_PIXELS)
    # no inference_config: normalisation cannot be applied (the reference then returns raw scores; we ask)
    other = tmp_path / "noinf"
    (other / "checkpoint-7").mkdir(parents=True)
    (other / "checkpoint-7" / "model.pth").symlink_to(released / "checkpoint-7" / "model.pth")
    (other / "model_config.json").write_text(json.dumps(_model_config(base, inference=False)))
    with pytest.raises(ConfigError, match="normalize"):
        VideoAlign(model_path=str(other), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    VideoAlign(model_path=str(other), source_fps=SOURCE_FPS, normalize=False, min_pixels=MIN_PIXELS)
    # LoRA keys but a config that says no LoRA: no scaling, refused
    (other / "model_config.json").write_text(json.dumps(_model_config(base, lora=False)))
    with pytest.raises(ConfigError, match="LoRA"):
        VideoAlign(model_path=str(other), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    # a different prompt template is another model
    cfg = _model_config(base)
    cfg["data_config"]["prompt_template_type"] = "simple"
    (other / "model_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="detailed_special"):
        VideoAlign(model_path=str(other), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    with pytest.raises(ConfigError, match="model_config.json"):
        VideoAlign(model_path=str(tmp_path), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)


def test_plain_full_state_dict_without_peft_loads(published, tmp_path):
    """A full checkpoint of the unwrapped reward model (LoRA merged by the reference's save) loads too."""
    released, base, lora, _ = published
    import copy

    merged = copy.deepcopy(lora).merge_and_unload()  # peft's own merge (on a copy: the fixture stays wrapped)
    state = {k: v.clone() for k, v in merged.state_dict().items()}
    plain = {}
    for k, v in state.items():
        if k.startswith("model.language_model."):
            k = "model." + k[len("model.language_model.") :]
        elif k.startswith("model.visual."):
            k = k[len("model.") :]
        plain[k] = v
    folder = tmp_path / "plain" / "checkpoint-1"
    folder.mkdir(parents=True)
    torch.save(plain, folder / "model.pth")
    (folder.parent / "model_config.json").write_text(json.dumps(_model_config(base, lora=False)))
    a = VideoAlign(model_path=str(folder.parent), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    b = VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS)
    videos = _videos(4, VIDEOS[:1])
    np.testing.assert_allclose(
        np.asarray(a(video=videos, prompt=PROMPTS[:1]).rewards),
        np.asarray(b(video=videos, prompt=PROMPTS[:1]).rewards),
        atol=1e-5,
        rtol=0,
    )


def test_bad_inputs_are_input_errors(reward):
    videos = _videos(5, VIDEOS[:2])
    with pytest.raises(InputError, match="prompt") as info:
        reward(video=videos, prompt=["a cat", None])
    assert info.value.sample == 1 and info.value.field == "prompt"
    with pytest.raises(InputError, match="VQ_reward") as info:
        reward(video=videos, prompt=["a cat", "<|VQ_reward|> twice"])
    assert info.value.sample == 1
    with pytest.raises(InputError, match="2 or more") as info:
        reward(video=[videos[0], videos[1][:1]], prompt=["a cat", "a dog"])
    assert info.value.sample == 1 and info.value.field == "video"
    with pytest.raises(InputError):
        reward(video=videos, prompt=["a cat"])
    with pytest.raises(InputError, match="context") as info:  # no silent truncation
        reward(video=videos, prompt=["a cat", "a red car " * 6000])
    assert info.value.sample == 1


def test_loads_through_the_registry_card(published):
    import rewardzoo

    released, *_ = published
    r = rewardzoo.load_reward(
        {
            "name": "videoalign",
            "model_path": str(released),
            "kwargs": {"source_fps": SOURCE_FPS, "min_pixels": MIN_PIXELS},
        }
    )
    assert r.info.name == "videoalign" and r.info.modality == "video"
    out = r(video=_videos(6, VIDEOS[:1]), prompt=PROMPTS[:1])
    assert set(out.extras) == {"VQ", "MQ", "TA"}


def test_card_states_the_exact_prompt_template():
    from pathlib import Path

    from rewardzoo.rewards.vlm.videoalign import PROMPT_TEMPLATE

    card = (Path(__file__).parents[2] / "rewardzoo" / "model_cards" / "videoalign.md").read_text(encoding="utf-8")
    assert card.split("```text\n", 1)[1].split("```", 1)[0] == PROMPT_TEMPLATE


def test_direct_calls_take_arrays_and_tensors(reward):
    videos = _videos(7, VIDEOS[:1])
    arr = np.stack([np.asarray(f) for f in videos[0]])  # (T, H, W, 3) uint8
    as_list = float(reward(video=videos, prompt=PROMPTS[:1]).rewards[0])
    assert float(reward(video=[arr], prompt=PROMPTS[:1]).rewards[0]) == pytest.approx(as_list, abs=1e-6)
    tensor = torch.from_numpy(arr).permute(0, 3, 1, 2).float() / 255
    assert float(reward(video=[tensor], prompt=PROMPTS[:1]).rewards[0]) == pytest.approx(as_list, abs=1e-6)
    mixed = videos[0][:3] + [videos[0][3].resize((50, 40))]
    with pytest.raises(InputError, match="differ in size"):
        reward(video=[mixed], prompt=PROMPTS[:1])


def test_processor_scores_video_files_and_reports_the_extras(published, tmp_path):
    """Through the engine: an mp4 path is decoded (every frame) and scored like its decoded frames."""
    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.shared.video import read_video, write_video
    from rewardzoo.spec.sample import Sample

    released, *_ = published
    frames = np.stack([np.asarray(f) for f in _videos(8, [(8, 64, 96)])[0]])
    path = tmp_path / "clip.mp4"
    write_video(path, frames, fps=SOURCE_FPS)
    decoded = [Image.fromarray(f) for f in read_video(path)]
    proc = RewardProcessor(
        [
            {
                "name": "videoalign",
                "model_path": str(released),
                "device": "cpu",
                "kwargs": {"source_fps": SOURCE_FPS, "min_pixels": MIN_PIXELS},
            }
        ]
    )
    result = proc([Sample(video=str(path), prompt=PROMPTS[0])])
    expected = _reference(published, decoded, PROMPTS[0])
    np.testing.assert_allclose(result.rewards["videoalign"], [expected[0]], atol=1e-5, rtol=0)
    for k, d in enumerate(("VQ", "MQ", "TA"), start=1):
        np.testing.assert_allclose(result.extras["videoalign"][d], [expected[k]], atol=1e-5, rtol=0)


def test_merge_lora_false_keeps_peft_lora_layers_and_matches_peft(published, reward):
    """``merge_lora: false``: PEFT's own LoRA layers hold the checkpoint's base weights and lora_A / lora_B
    unmerged (as the reference's PEFT model), and the scores equal that PEFT model's forward, step by step."""
    from peft.tuners.lora import Linear as LoraLinear

    released, _, lora, _ = published
    unmerged = VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, merge_lora=False)
    mine = unmerged.vlm.model.language_model.layers[0].self_attn.q_proj
    theirs = lora.base_model.model.model.language_model.layers[0].self_attn.q_proj
    assert isinstance(mine, LoraLinear) and not mine.merged
    assert torch.equal(mine.base_layer.weight, theirs.base_layer.weight)
    assert torch.equal(mine.lora_A["default"].weight, theirs.lora_A["default"].weight)
    assert torch.equal(mine.lora_B["default"].weight, theirs.lora_B["default"].weight)
    assert mine.scaling["default"] == theirs.scaling["default"] == 8 / 4
    merged_q = reward.vlm.model.language_model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(merged_q, mine.base_layer.weight)  # the default merges: another weight
    videos = _videos(9, VIDEOS[:2])
    out = unmerged(video=videos, prompt=PROMPTS[:2])
    expected = np.array([_reference(published, v, p) for v, p in zip(videos, PROMPTS[:2])])
    np.testing.assert_allclose(np.asarray(out.rewards), expected[:, 0], atol=1e-5, rtol=0)


def test_head_dtype_and_merge_lora_options_are_checked(published):
    released, *_ = published
    with pytest.raises(ConfigError) as info:
        VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, merge_lora="no")
    assert info.value.field == "kwargs.merge_lora"
    with pytest.raises(ConfigError) as info:
        VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, head_dtype="float8")
    assert info.value.field == "kwargs.head_dtype"
    bf16_head = VideoAlign(
        model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, head_dtype="bfloat16"
    )
    assert bf16_head.head.weight.dtype == torch.bfloat16


def _held_bytes(model):
    held = {id(t): t for m in (model.vlm.model, model.head) for t in m.state_dict().values()}
    return sum(t.numel() * t.element_size() for t in held.values())


def test_plan_finds_the_release_checkpoint(published, reward, tmp_path):
    """`rewardzoo plan` sizes checkpoint-<step>/model.pth (the highest step, or checkpoint_step), found at real size
    to be 'unknown: no weight files' before (the release keeps its weights one folder down), from the file's
    tensor table as the reward holds it: the LoRA factors merged away (at real size they are 3.3% of the file: the
    plan was over by that, counting the file's size), no lm_head, the head in float32 (or kept LoRA factors with
    ``merge_lora: false``)."""
    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config

    released, *_ = published
    entry = {"name": "videoalign", "model_path": str(released), "kwargs": {"source_fps": SOURCE_FPS}}
    planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    pth = released / "checkpoint-7" / "model.pth"
    assert planned.files == [str(pth), str(pth)] and planned.how == "torch.save tensor table"
    assert planned.weights == _held_bytes(reward) < pth.stat().st_size
    options = {"merge_lora": False, "head_dtype": "bfloat16"}
    entry["kwargs"] = {"source_fps": SOURCE_FPS, **options}
    planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    unmerged = VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, **options)
    assert planned.weights == _held_bytes(unmerged) > _held_bytes(reward)
    entry["kwargs"]["checkpoint_step"] = 3  # a step without model.pth: unknown, saying why
    planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    assert planned.weights is None and "model.pth" in planned.how
