"""Tiny random-init models saved to disk the way users hold real weights, for tests and benchmarks (ours and yours).

One module per family, beside the loader whose layout it writes: ``clip``, ``aesthetic``, ``video`` (DINO,
timm DINOv3), ``imagebind``, ``audio``, ``text``, ``vlm``, ``llava``, ``qalign`` (mPLUG-Owl2), ``reward_models``
(VideoAlign), ``vae`` (diffusers VAEs for decode stages), ``latent`` (SD3 pipelines, DiNa-LRM; SD1.5 / SDXL pipelines, LRM); ``common`` — what they
share. Same seed, bit-identical files; how and an example: ``docs/testing.md``.

May import only the rewards, :mod:`rewardzoo.shared` and :mod:`rewardzoo.errors` (torch, open_clip, transformers
and timm inside the builders); nothing in ``rewardzoo`` imports it. Every public name loads its module on first
access, so importing the package stays light.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_FAMILIES = {
    "rewardzoo.testing.clip": (
        "IMAGE_SIZE",
        "EMBED_DIM",
        "TINY_OPEN_CLIP",
        "TINY_VIDEO_OPEN_CLIP",
        "CLIP_PREPROCESS",
        "tiny_open_clip_dir",
        "tiny_open_clip_model",
        "clip_tokenizer",
        "tiny_hf_clip_config",
        "tiny_hf_clip_dir",
        "hps_checkpoint",
    ),
    "rewardzoo.testing.aesthetic": (
        "ReferenceAestheticMLP",
        "reference_aesthetic_head",
        "aesthetic_head_file",
        "linear_aesthetic_head_file",
    ),
    "rewardzoo.testing.qalign": ("tiny_qalign_dir", "tiny_llama_tokenizer"),
    "rewardzoo.testing.vae": (
        "TINY_VAE_SCALING",
        "TINY_VAE_SHIFT",
        "TINY_VAE_CHANNELS",
        "tiny_vae_dir",
        "tiny_wan_vae_dir",
    ),
    "rewardzoo.testing.video": ("tiny_dino_dirs", "TINY_TIMM_DINOV3", "tiny_timm_dinov3_dir"),
    "rewardzoo.testing.imagebind": ("TINY_IMAGEBIND", "tiny_imagebind_dir"),
    "rewardzoo.testing.synchformer": ("TINY_SYNCHFORMER", "tiny_synchformer_dir"),
    "rewardzoo.testing.omni": ("OMNI_TOKENS", "OMNI_CHAT_TEMPLATE", "tiny_omni_dir"),
    "rewardzoo.testing.song_eval": ("TINY_MUQ", "TINY_SONGEVAL_HEAD", "tiny_muq_dir", "tiny_songeval_dir"),
    "rewardzoo.testing.audio": (
        "tiny_clap_dir",
        "tiny_wavlm_xvector_dir",
        "WHISPER_SPECIALS",
        "tiny_whisper_dir",
        "tiny_wav2vec2_ctc_dir",
        "tiny_audiobox_wavlm_config",
        "AUDIOBOX_TARGETS",
        "tiny_audiobox_checkpoint",
    ),
    "rewardzoo.testing.text": (
        "WORDS",
        "SPECIALS",
        "VOCAB",
        "CHAT_TEMPLATE",
        "word_tokenizer",
        "gpt2_config",
        "llama_config",
        "tiny_text_models",
    ),
    "rewardzoo.testing.reward_models": (
        "VIDEOALIGN_TOKENS",
        "VIDEOALIGN_NORM",
        "videoalign_model_config",
        "older_qwen2_vl_peft_key",
        "tiny_videoalign_release",
    ),
    "rewardzoo.testing.vlm": (
        "QWEN_SPECIAL_TOKENS",
        "QWEN2_VL_CHAT_TEMPLATE",
        "QWEN3_VL_CHAT_TEMPLATE",
        "VLM_CORPUS",
        "VLM_FAMILIES",
        "tiny_vlm_tokenizer",
        "tiny_vlm_config",
        "tiny_vlm_processor",
        "tiny_vlm_dir",
        "EDIT_REWARD_HEADS",
        "EDIT_REWARD_HEAD_WIDTHS",
        "tiny_edit_reward_dirs",
    ),
    "rewardzoo.testing.llava": (
        "TINY_PINPOINTS",
        "LLAVA_NAMES",
        "tiny_llava_onevision_config",
        "tiny_llava_onevision_processor",
        "llava_name",
        "tiny_llava_onevision_dirs",
    ),
    "rewardzoo.testing.latent": (
        "TINY_SD3_TRANSFORMER",
        "DINA_LORA_TARGETS",
        "tiny_sd3_dir",
        "dina_lrm_config",
        "tiny_dina_lrm_dir",
        "tiny_sd_dir",
        "tiny_lrm_unet_config",
        "tiny_lrm_dir",
    ),
}
_LAZY = {name: module for module, names in _FAMILIES.items() for name in names}

#: ``ReferenceAestheticMLP`` is a torch class, so it stays out of ``import *`` (which imports no torch).
__all__ = sorted(name for name in _LAZY if name != "ReferenceAestheticMLP")

__getattr__ = lazy_getattr("rewardzoo.testing", _LAZY)


def __dir__() -> list[str]:
    return sorted(_LAZY)
