"""``dtype: auto`` is the precision each reward's reference runs in (issue 40, item 7).

The table below is written from the references' own code (the audit), not read from the cards: the loader's
resolution must give its dtype on CUDA and float32 on the CPU, every card that loads weights must be in it (so
a new reward cannot skip the audit), and each such card must say where its reference sets the precision.
"""

from __future__ import annotations

import pytest

from rewardzoo.core.loader import dtype_for
from rewardzoo.errors import RegistryError
from rewardzoo.registry import builtin, info_from_card, lookup, read_card
from rewardzoo.spec.config import RewardSpec

_CLIP_LOAD = "OpenAI clip.load: float16 weights on CUDA (CLIP d05afc4 clip/clip.py 139-141, model.py 434)"
_GARDO = "GARDO 1cc77fb scripts/train_sd3_grpo_gardo.py 625-631, 714: DINOv3 .to(device), float32 input, no autocast"
_VLLM = "vllm serve without --dtype: auto, the checkpoint's bfloat16"

#: reward -> (dtype on CUDA, where the reference sets it).
REFERENCE_PRECISION = {
    # transformers / open_clip / torch scorers
    "asr_cer": ("float16", "openai-whisper v20250625 transcribe.py 127-136, decoding.py 114: fp16=True"),
    "asr_wer": ("float16", "openai-whisper v20250625 transcribe.py 127-136, decoding.py 114: fp16=True"),
    "audiobox_aesthetics": ("float32", "audiobox-aesthetics 2618e9d infer.py 128-137: from_pretrained, no dtype"),
    "clap_score": ("float32", "LAION-AI/CLAP 1fd4c37 src/laion_clap/hook.py 40: precision='fp32'"),
    "clip_image_similarity": ("float32", "open_clip 89fb801 factory.py 1085: precision='fp32' default"),
    "clip_score": ("float16", f"jmhessel/clipscore 1036465 clipscore.py 229; {_CLIP_LOAD}"),
    "diversity_weighted": ("float32", _GARDO),
    "geneval": ("float32", "geneval af4902f evaluation/evaluate_images.py 64-67: mmdet + open_clip, float32"),
    "group_diversity": ("float32", _GARDO),
    "hpsv2": ("float32", "HPSv2 866735e img_score.py 23, 76: precision='amp' (float32 weights, fp16 autocast)"),
    "image_quality": ("float32", "pyiqa 01ae427 inference_model.py 67-68: the network moved without a dtype"),
    "image_reward": ("float32", "ImageReward 1.5 ImageReward/utils.py 78: ImageReward(...).to(device)"),
    "imagebind_score": ("float32", "Flow-Factory a0b2bc5 rewards/imagebind_reward.py 91-92: imagebind_huge, no dtype"),
    "imaging_quality": ("float32", "pyiqa 01ae427 inference_model.py 67-68; VBench imaging_quality.py 62-63"),
    "implicit_prm": ("bfloat16", "PRIME 18ad596 fsdp_workers.py 874-893: MixedPrecision(param_dtype=bfloat16)"),
    "laion_aesthetic": ("float16", f"improved-aesthetic-predictor 6934dd8 simple_inference.py 103; {_CLIP_LOAD}"),
    "pickscore": ("float32", "PickScore f79607f README.md 59: AutoModel.from_pretrained(...).to(device)"),
    "sequence_reward": ("float32", "PaLM-rlhf-pytorch bd0d0f3 reward.py: RewardModel, no dtype"),
    "speaker_similarity": ("float32", "UniSpeech 40ac183 speaker_verification/verification.py: .cuda(), no cast"),
    "utmos": ("float32", "utmos-pytorch 0.1.0 utmos_torch.py UTMOSScoreTorch.__init__: .to(device), no dtype"),
    "video_aesthetic": ("float16", f"VBench 45e79ec vbench/aesthetic_quality.py 85; {_CLIP_LOAD}"),
    "video_background_consistency": ("float16", f"VBench 45e79ec vbench/background_consistency.py 70; {_CLIP_LOAD}"),
    "video_clip_score": ("float16", f"VBench 45e79ec competitions/clip_score.py 49; {_CLIP_LOAD}"),
    "video_dynamic_degree": ("float32", "VBench 45e79ec vbench/dynamic_degree.py 156: mixed_precision False"),
    "video_quality": ("float32", "pyiqa 01ae427 inference_model.py 67-68: the network moved without a dtype"),
    "video_imaging_quality": ("float32", "VBench 45e79ec vbench/imaging_quality.py 62-63: MUSIQ, no dtype"),
    "video_subject_consistency": ("float32", "VBench 45e79ec vbench/subject_consistency.py 73: hub DINO, no dtype"),
    # VLM judges
    "edit_reward": ("bfloat16", "EditReward edb027e config/EditReward-Qwen2.5-7B-VL.yaml 57-58: bfloat16"),
    "edit_score": ("bfloat16", "EditScore 6e0f1b9 mllm_tools/qwen25vl.py 42, qwen3vl.py 41: torch.bfloat16"),
    "hpsv3": ("bfloat16", "HPSv3 d232ff8 hpsv3/config/HPSv3_7B.yaml 55-56: torch_dtype bfloat16"),
    "rational_rewards": ("bfloat16", f"Flow-Factory a0b2bc5 scripts/start_vllm_rational_reward.sh: {_VLLM}"),
    "rational_rewards_edit": ("bfloat16", f"Flow-Factory a0b2bc5 scripts/start_vllm_rational_reward.sh: {_VLLM}"),
    "tifa_vqa": ("bfloat16", "GenEval2 a6e82d2 evaluation.py 23-26: dtype='auto' on Qwen3-VL-8B (bfloat16)"),
    "unified_reward": ("bfloat16", "UnifiedReward ff6f520 qwen_point_score_image_generation.py 14: 'auto'"),
    "unified_reward_2": ("bfloat16", f"Pref-GRPO 3e787f6 vllm_utils/vllm_server_UnifiedReward.sh: {_VLLM}"),
    "unified_reward_edit": ("bfloat16", f"UnifiedReward ff6f520 UnifiedReward-Edit/vllm_server.sh: {_VLLM}"),
    "unified_reward_edit_pairwise": ("bfloat16", f"UnifiedReward ff6f520 UnifiedReward-Edit/vllm_server.sh: {_VLLM}"),
    "unified_reward_think": ("bfloat16", f"Pref-GRPO 3e787f6 vllm_server_UnifiedReward_Think.sh: {_VLLM}"),
    "video_unified_reward_2": ("bfloat16", f"Pref-GRPO 3e787f6 vllm_utils/vllm_server_UnifiedReward.sh: {_VLLM}"),
    "video_vlm_judge": ("bfloat16", f"Flow-Factory a0b2bc5 rewards/vllm_evaluate.py: a vLLM server, {_VLLM}"),
    "video_vqascore": ("bfloat16", "t2v_metrics 6ecb74f qwen2vl_model.py 53-86: torch_dtype=torch.bfloat16"),
    "videoalign": ("bfloat16", "VideoAlign 1140ffd inference.py 30-43, 209-211: dtype=torch.bfloat16"),
    "videoscore2": ("float32", "VideoScore2 e6abe26 vs2_inference.py: from_pretrained without a dtype, .to('cuda')"),
    "vlm_judge": ("bfloat16", f"Flow-Factory a0b2bc5 rewards/vllm_evaluate.py: a vLLM server, {_VLLM}"),
    "vqascore": ("bfloat16", "t2v_metrics 6ecb74f qwen2vl_model.py 53-86: torch_dtype=torch.bfloat16"),
    # weights shipped inside a wheel (download: false), run in float32
    "dnsmos": ("float32", "speechmos 0.0.1.1 dnsmos.py 19-20, 77-80: ONNX sessions fed float32"),
    "nsfw_safety": ("float32", "nudenet 3.4.2 nudenet.py 148: the float32 320n.onnx"),
    "ocr": ("float32", "flow_grpo ac4c86e flow_grpo/ocr.py 14-19: PaddleOCR(use_gpu=False), float32"),
    "speech_presence": ("float32", "silero-vad 6.2.3 utils_vad.py 265: the float32 TorchScript model"),
    "video_ocr": ("float32", "flow_grpo ac4c86e flow_grpo/ocr.py 14-19: PaddleOCR(use_gpu=False), float32"),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_PRECISION))
def test_dtype_auto_resolves_to_the_references_precision(name):
    want, _source = REFERENCE_PRECISION[name]
    spec = RewardSpec(name=name, reward_model=name)
    assert spec.dtype == "auto"
    card = lookup(spec.reward_model)
    assert dtype_for(spec, "cuda:0", card) == want
    assert dtype_for(spec, "cpu", card) == "float32"
    assert dtype_for(RewardSpec(name=name, reward_model=name, dtype="float32"), "cuda:0", card) == "float32"
    assert card.dtype_source, f"{name}'s card does not say where its reference sets the precision"


def test_every_card_that_loads_weights_is_in_the_audit():
    loads = {name for name, info in builtin().items() if info.download or info.dtype_source}
    assert loads == set(REFERENCE_PRECISION), (
        f"not audited: {sorted(loads - set(REFERENCE_PRECISION))}; "
        f"no longer loading weights: {sorted(set(REFERENCE_PRECISION) - loads)}"
    )
    assert all(source for _, source in REFERENCE_PRECISION.values())


def test_a_card_that_downloads_weights_must_state_its_dtype_source(tmp_path):
    meta, _ = read_card("pickscore")
    assert meta["download"] is True and "dtype_source" in meta
    without = {k: v for k, v in meta.items() if k != "dtype_source"}
    with pytest.raises(RegistryError, match="'dtype_source' is missing") as exc:
        info_from_card(without, tmp_path / "card.md")
    assert "card.md" in str(exc.value)
    # a third-party card may leave it out; a model-free card needs none
    assert info_from_card(without, tmp_path / "card.md", source="plugin zoo").dtype_source is None
    free, _ = read_card("jpeg_compressibility")
    assert free["download"] is False and info_from_card(free, tmp_path / "card.md").dtype_source is None
    for bad in ("", "  ", "two\nlines", 3):
        with pytest.raises(RegistryError, match="dtype_source"):
            info_from_card({**meta, "dtype_source": bad}, tmp_path / "card.md")
    line = "repo@abc file.py 1-2: loads in float32"
    assert info_from_card({**meta, "dtype_source": f" {line} "}, tmp_path / "card.md").dtype_source == line


@pytest.mark.parametrize("name", sorted(REFERENCE_PRECISION))
def test_the_card_shows_its_precision_and_its_source(name):
    _meta, body = read_card(name)
    section = body.split("\n## Precision\n", 1)[1].split("\n## ", 1)[0]
    want, _source = REFERENCE_PRECISION[name]
    lower = f"resolves to {want} on CUDA and float32" if want != "float32" else "resolves to float32 on every device"
    assert lower in section and lookup(name).dtype_source in section
