"""Tiny reward-model releases on a Qwen2-VL backbone, in the layout their authors publish.

:func:`tiny_videoalign_release` writes what KwaiVGI/VideoReward publishes, at toy size: a Qwen2-VL "base
model" directory (config, tokenizer, chat template, processors; no weights), ``model_config.json`` (data /
model / LoRA / inference sections) and ``checkpoint-7/model.pth``, the ``state_dict()`` of a real PEFT LoRA
model around VideoAlign's reward model (Qwen2-VL + bias-free ``rm_head``) under the older Qwen2-VL key names
(``base_model.model.visual.*``, ``base_model.model.model.layers.*.q_proj.base_layer.weight``,
``...lora_A.default.weight``, ``base_model.model.rm_head.weight``). Imports: the standard library and
:mod:`.vlm` at module level; torch, peft and transformers inside the builder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .vlm import tiny_vlm_config, tiny_vlm_processor

#: The three reward tokens of VideoAlign's prompt (as :mod:`rewardzoo.rewards.vlm.videoalign` names them).
VIDEOALIGN_TOKENS = ("<|VQ_reward|>", "<|MQ_reward|>", "<|TA_reward|>")
#: The ``inference_config`` of the tiny release: per-dimension mean and std.
VIDEOALIGN_NORM = {"VQ_mean": 0.1, "VQ_std": 2.0, "MQ_mean": -0.3, "MQ_std": 0.5, "TA_mean": 0.7, "TA_std": 4.0}


def videoalign_model_config(base: str | Path, *, max_pixels: int, lora: bool = True, inference: bool = True) -> dict:
    """VideoAlign's ``model_config.json`` for a base model directory (the released keys, toy values)."""
    out = {
        "data_config": {
            "meta_data": "train.csv",
            "data_dir": "videos",
            "meta_data_test": None,
            "max_frame_pixels": max_pixels,
            "num_frames": None,
            "fps": 2.0,
            "p_shuffle_frames": 0.0,
            "p_color_jitter": 0.0,
            "eval_dim": ["VQ", "MQ", "TA"],
            "prompt_template_type": "detailed_special",
            "add_noise": False,
            "sample_type": "uniform",
            "use_tied_data": True,
        },
        "model_config": {
            "model_name_or_path": str(base),
            "output_dim": 1,
            "use_special_tokens": True,
            "reward_token": "special",
            "torch_dtype": "bfloat16",
        },
        "peft_lora_config": {
            "lora_enable": lora,
            "vision_lora": False,
            "lora_r": 4,
            "lora_alpha": 8,
            "lora_dropout": 0.05,
            "lora_namespan_exclude": ["lm_head", "rm_head", "embed_tokens", "visual"],
            "lora_task_type": "CAUSAL_LM",
            "use_rslora": False,
            "num_lora_modules": -1,
        },
    }
    if inference:
        out["inference_config"] = dict(VIDEOALIGN_NORM)
    return out


def older_qwen2_vl_peft_key(key: str) -> str:
    """A transformers 5 PEFT key -> the older (< 4.52) Qwen2-VL layout of VideoAlign's model.pth."""
    for new, old in (
        ("base_model.model.model.language_model.", "base_model.model.model."),
        ("base_model.model.model.visual.", "base_model.model.visual."),
    ):
        if key.startswith(new):
            return old + key[len(new) :]
    return key


def tiny_videoalign_release(
    root: str | Path, *, seed: int = 11, max_pixels: int = 8 * 28 * 28
) -> tuple[Path, Path, Any, Any]:
    """Write a tiny VideoAlign release under ``root``: (release directory, base directory, the PEFT model the
    checkpoint is the state of (LoRA unmerged, eval mode), the processor with the reward tokens).

    The LoRA (r 4, alpha 8, every Linear of the language model) starts from non-zero random weights
    (``init_lora_weights=False``), so it changes the scores; ``torch.manual_seed(seed)`` before the model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2VLForConditionalGeneration

    root = Path(root)
    # the real Qwen2-VL processor bounds: the frames VideoAlign resized pass unchanged
    processor = tiny_vlm_processor("qwen2_vl", min_pixels=56 * 56, max_pixels=28 * 28 * 1280)
    config = tiny_vlm_config("qwen2_vl", vocab_size=len(processor.tokenizer), max_position_embeddings=8192)
    base = root / "Qwen2-VL-2B-tiny"
    processor.save_pretrained(base)
    config.save_pretrained(base)

    processor.tokenizer.add_special_tokens({"additional_special_tokens": list(VIDEOALIGN_TOKENS)})
    config.text_config.vocab_size = len(processor.tokenizer)
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config).eval()
    model.rm_head = torch.nn.Linear(config.text_config.hidden_size, 1, bias=False)
    excluded = ("lm_head", "rm_head", "embed_tokens", "visual")
    targets = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not any(x in n for x in excluded)
    ]
    lora = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets, init_lora_weights=False)
    ).eval()
    state = {older_qwen2_vl_peft_key(k): v.clone() for k, v in lora.state_dict().items()}

    released = root / "VideoReward"
    (released / "checkpoint-7").mkdir(parents=True)
    (released / "checkpoint-3").mkdir()  # an older step without weights: the latest is read
    torch.save(state, released / "checkpoint-7" / "model.pth")
    (released / "model_config.json").write_text(json.dumps(videoalign_model_config(base, max_pixels=max_pixels)))
    return released, base, lora, processor
