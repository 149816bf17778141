"""Tiny random-init models saved to disk the way users hold real weights, for tests and benchmarks (ours and yours).

Every builder writes the files a real checkpoint ships (an open_clip hub directory, a transformers
``save_pretrained`` directory, a ``{"state_dict": ...}`` checkpoint, a LAION aesthetic head file),
so the reward under test loads them through its ordinary ``model_path`` code path, offline. Weights
are random but reproducible: each builder calls ``torch.manual_seed(seed)`` right before it constructs
its model(s), in a fixed order, so two calls with the same seed give bit-identical files and a
reference model built in memory (``tiny_open_clip_model``, ``reference_aesthetic_head``) matches
the saved one. The sizes are tiny (seconds on a CPU); the ``model_cfg``/``config`` keywords take
full-size configurations for benchmarks, where speed does not depend on the weight values.

One module per family, beside the loader whose layout it writes:

- :mod:`~rewardzoo.testing.clip` — open_clip and transformers CLIP directories, HPSv2 checkpoints
  (:mod:`rewardzoo.shared.clip`);
- :mod:`~rewardzoo.testing.aesthetic` — LAION aesthetic v1 / v2 heads (:mod:`rewardzoo.rewards.image.aesthetic`);
- :mod:`~rewardzoo.testing.video` — DINO ViT and DINOv2 (:mod:`rewardzoo.rewards.video.consistency`);
- :mod:`~rewardzoo.testing.audio` — CLAP, WavLM x-vector, Whisper, wav2vec2 CTC, audiobox-aesthetics
  (:mod:`rewardzoo.rewards.audio`);
- :mod:`~rewardzoo.testing.text` — a word-level tokenizer, GPT-2 / Llama LMs and classifiers
  (:mod:`rewardzoo.rewards.text`);
- :mod:`~rewardzoo.testing.vlm` — Qwen2-VL, Qwen2.5-VL, Qwen3-VL with their processors (:mod:`rewardzoo.rewards.vlm`);
- :mod:`~rewardzoo.testing.llava` — LLaVA-OneVision in transformers' and LLaVA-NeXT's layouts
  (:mod:`rewardzoo.rewards.vlm.llava_checkpoint`);
- :mod:`~rewardzoo.testing.reward_models` — a VideoAlign release (PEFT LoRA checkpoint) on the tiny Qwen2-VL
  (:mod:`rewardzoo.rewards.vlm.videoalign`);
- :mod:`~rewardzoo.testing.common` — what several of them share (directories, safetensors files).

This is the test layer. Its modules may import the standard library, each other, the reward contract
(``rewardzoo.rewards``), ``rewardzoo.shared`` and ``rewardzoo.errors`` (today this file imports ``shared.imports``
and :mod:`~rewardzoo.testing.llava` the LLaVA chat template of ``rewards.vlm.llava_checkpoint``), and torch, open_clip and transformers only inside the builders that need them
(``image``, ``video``, ``audio`` or ``text`` extras). Nothing in ``rewardzoo`` imports this package (the import
test checks both); tests, benchmarks, scripts and examples do. Every public name is importable from here and its
module is loaded on first access, so importing the package stays light::

    from rewardzoo.testing import tiny_open_clip_dir, aesthetic_head_file
    clip_dir = tiny_open_clip_dir(tmp_path / "clip")
    head = aesthetic_head_file(tmp_path / "head.safetensors")
    reward = LaionAesthetic(model_path=str(head), clip_model=str(clip_dir))
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_FAMILIES = {
    "rewardzoo.testing.clip": (
        "IMAGE_SIZE", "EMBED_DIM", "TINY_OPEN_CLIP", "TINY_VIDEO_OPEN_CLIP", "CLIP_PREPROCESS", "tiny_open_clip_dir",
        "tiny_open_clip_model", "clip_tokenizer", "tiny_hf_clip_config", "tiny_hf_clip_dir", "hps_checkpoint"),
    "rewardzoo.testing.aesthetic": (
        "ReferenceAestheticMLP", "reference_aesthetic_head", "aesthetic_head_file", "linear_aesthetic_head_file"),
    "rewardzoo.testing.video": ("tiny_dino_dirs",),
    "rewardzoo.testing.audio": (
        "tiny_clap_dir", "tiny_wavlm_xvector_dir", "WHISPER_SPECIALS", "tiny_whisper_dir", "tiny_wav2vec2_ctc_dir",
        "tiny_audiobox_wavlm_config", "AUDIOBOX_TARGETS", "tiny_audiobox_checkpoint"),
    "rewardzoo.testing.text": (
        "WORDS", "SPECIALS", "VOCAB", "CHAT_TEMPLATE", "word_tokenizer", "gpt2_config", "llama_config",
        "tiny_text_models"),
    "rewardzoo.testing.reward_models": (
        "VIDEOALIGN_TOKENS", "VIDEOALIGN_NORM", "videoalign_model_config", "older_qwen2_vl_peft_key",
        "tiny_videoalign_release"),
    "rewardzoo.testing.vlm": (
        "QWEN_SPECIAL_TOKENS", "QWEN2_VL_CHAT_TEMPLATE", "QWEN3_VL_CHAT_TEMPLATE", "VLM_CORPUS", "VLM_FAMILIES",
        "tiny_vlm_tokenizer", "tiny_vlm_config", "tiny_vlm_processor", "tiny_vlm_dir", "EDIT_REWARD_HEADS",
        "EDIT_REWARD_HEAD_WIDTHS", "tiny_edit_reward_dirs"),
    "rewardzoo.testing.llava": (
        "TINY_PINPOINTS", "LLAVA_NAMES", "tiny_llava_onevision_config", "tiny_llava_onevision_processor", "llava_name",
        "tiny_llava_onevision_dirs"),
}
_LAZY = {name: module for module, names in _FAMILIES.items() for name in names}

#: ``ReferenceAestheticMLP`` is a torch class, so it stays out of ``import *`` (which imports no torch).
__all__ = sorted(name for name in _LAZY if name != "ReferenceAestheticMLP")

__getattr__ = lazy_getattr("rewardzoo.testing", _LAZY)


def __dir__() -> list[str]:
    return sorted(_LAZY)
