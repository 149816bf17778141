"""Tiny SD3-shaped pipelines and DiNa-LRM checkpoints, laid out as the real ones are.

:func:`tiny_sd3_dir` writes a diffusers ``StableDiffusion3Pipeline`` directory without its VAE (``transformer/``
``SD3Transformer2DModel`` with SD3.5-Medium's dual-attention first block and RMS q/k norms; ``text_encoder`` /
``text_encoder_2`` ``CLIPTextModelWithProjection``, ``text_encoder_3`` ``T5EncoderModel``; CLIP BPE tokenizers, the
second padding with ``!`` as SD3.5's does; a small T5 unigram tokenizer; the flow-matching scheduler with SD3's shift
3). :func:`tiny_dina_lrm_dir` writes a DiNa-LRM checkpoint over it as diffusion-rm's training saves one:
``config.json`` (the config as JSON) and ``checkpoint/backbone_lora`` (PEFT ``save_pretrained`` of a LoRA on the
trunk's attention projections, lora_B random so the LoRA changes the output) + ``checkpoint/rm_head.pt``
(``torch.save`` of the head's state dict, every tensor random, the zero-initialised gates included). Needs diffusers,
transformers, peft and open_clip (the CLIP vocabulary).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .common import made_dir

#: The tiny transformer's config (SD3.5-Medium's shape, scaled down: 4 blocks of width 32).
TINY_SD3_TRANSFORMER = {
    "sample_size": 16,
    "patch_size": 2,
    "in_channels": 16,
    "num_layers": 4,
    "attention_head_dim": 8,
    "num_attention_heads": 4,
    "joint_attention_dim": 32,
    "caption_projection_dim": 32,
    "pooled_projection_dim": 24,
    "out_channels": 16,
    "pos_embed_max_size": 16,
    "dual_attention_layers": [0],
    "qk_norm": "rms_norm",
}
#: LoRA target modules of diffusion-rm's SD3 reward model.
DINA_LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"]
_T5_WORDS = "a an the cat dog red blue green on in of with sitting street girl walking photo wooden floor".split()


def _t5_tokenizer() -> Any:
    from transformers import T5Tokenizer

    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    vocab += [(chr(c), -3.0) for c in range(97, 123)] + [("▁" + w, -1.0) for w in _T5_WORDS]
    return T5Tokenizer(vocab=vocab, extra_ids=0)


def tiny_sd3_dir(path: str | Path, *, seed: int = 0) -> Path:
    """A tiny SD3 pipeline directory (no VAE) at ``path``; same seed, same weights."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection, T5Config, T5EncoderModel

    from .clip import clip_tokenizer

    path = made_dir(path)
    torch.manual_seed(seed)
    SD3Transformer2DModel(**TINY_SD3_TRANSFORMER).save_pretrained(path / "transformer")
    for part, width in (("text_encoder", 8), ("text_encoder_2", 16)):
        config = CLIPTextConfig(
            vocab_size=49408,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            projection_dim=width,
            bos_token_id=49406,
            eos_token_id=49407,
            pad_token_id=49407,
        )
        CLIPTextModelWithProjection(config).save_pretrained(path / part)
    t5 = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, decoder_start_token_id=0)
    T5EncoderModel(t5).save_pretrained(path / "text_encoder_3")
    clip_tokenizer().save_pretrained(path / "tokenizer")
    second = clip_tokenizer()
    second.pad_token = "!"
    second.save_pretrained(path / "tokenizer_2")
    _t5_tokenizer().save_pretrained(path / "tokenizer_3")
    FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0).save_pretrained(path / "scheduler")
    (path / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusion3Pipeline"}))
    return path


def dina_lrm_config(base: str | Path, *, num_layers: int = 3, taps: tuple[int, ...] = (1, 3)) -> dict[str, Any]:
    """A DiNa-LRM training config as diffusion-rm writes ``config.json`` (``config/sd3m/thurstone-12layer.yaml``'s
    keys), over the pipeline at ``base``: ``num_layers`` trunk blocks, image and text taps ``taps``."""
    return {
        "model": {
            "model_type": "thurstone",
            "backbone_model_id": str(base),
            "num_transformer_layers": num_layers,
            "freeze_backbone": False,
            "use_ema": True,
            "use_lora": True,
            "use_text_features": True,
            "lora_config": {"r": 4, "lora_alpha": 8, "init_lora_weights": "gaussian"},
            "use_logistic": False,
            "visual_head_idx": list(taps),
            "text_head_idx": list(taps),
            "use_t_embed": True,
            "reward_head": {
                "use_proj_in": False,
                "width": -1,
                "out_dim": 1,
                "num_queries": 4,
                "num_attn_heads": 8,
                "dropout": 0.0,
            },
        },
        "training": {"mixed_precision": "bf16", "add_noise": True, "t_weighting_scheme": "uniform"},
    }


def tiny_dina_lrm_dir(path: str | Path, base: str | Path, *, seed: int = 0, **config: Any) -> Path:
    """A DiNa-LRM checkpoint at ``path`` over the tiny pipeline at ``base`` (:func:`tiny_sd3_dir`)."""
    import torch
    from diffusers import SD3Transformer2DModel
    from peft import LoraConfig, get_peft_model

    from ..rewards.latent.dina_head import DiNaRewardHead

    path = made_dir(path)
    cfg = dina_lrm_config(base, **config)
    model = cfg["model"]
    (path / "config.json").write_text(json.dumps(cfg, indent=4))
    ckpt = made_dir(path / "checkpoint")
    torch.manual_seed(seed)
    transformer = SD3Transformer2DModel.from_pretrained(str(Path(base) / "transformer"))

    class Trunk(torch.nn.Module):  # the module names the reference's backbone gives its parts
        def __init__(self) -> None:
            super().__init__()
            self.pos_embed = transformer.pos_embed
            self.time_text_embed = transformer.time_text_embed
            self.context_embedder = transformer.context_embedder
            self.transformer_blocks = torch.nn.ModuleList(
                transformer.transformer_blocks[: model["num_transformer_layers"]]
            )

    lora = model["lora_config"]
    peft_model = get_peft_model(
        Trunk(),
        LoraConfig(
            r=lora["r"],
            lora_alpha=lora["lora_alpha"],
            init_lora_weights=lora["init_lora_weights"],
            target_modules=DINA_LORA_TARGETS,
        ),
    )
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05)
    peft_model.save_pretrained(str(ckpt / "backbone_lora"))
    head = DiNaRewardHead(
        transformer.inner_dim,
        len(model["visual_head_idx"]),
        len(model["text_head_idx"]),
        **{k: v for k, v in model["reward_head"].items() if k != "dropout"},
    )
    with torch.no_grad():
        for param in head.parameters():
            param.normal_(0.0, 0.2)
    torch.save(head.state_dict(), ckpt / "rm_head.pt")
    return path


def _clip_text_config(width: int, **extra: Any) -> Any:
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        vocab_size=49408,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=77,
        bos_token_id=49406,
        eos_token_id=49407,
        pad_token_id=49407,
        **extra,
    )


def tiny_sd_dir(path: str | Path, *, xl: bool = False, seed: int = 0) -> Path:
    """A tiny Stable Diffusion pipeline directory (tokenizers, text encoders, DDPM scheduler; no UNet, no VAE) at
    ``path``: SD1.5-shaped (``CLIPTextModel`` of width 16) or, with ``xl``, SDXL-shaped (a second
    ``CLIPTextModelWithProjection`` of width 16 whose tokenizer pads with ``!`` as SDXL's does)."""
    import torch
    from diffusers import DDPMScheduler
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    from .clip import clip_tokenizer

    path = made_dir(path)
    torch.manual_seed(seed)
    CLIPTextModel(_clip_text_config(8 if xl else 16)).save_pretrained(path / "text_encoder")
    first = clip_tokenizer()
    first.model_max_length = 77  # as the pipelines' tokenizer configs say
    first.save_pretrained(path / "tokenizer")
    if xl:
        CLIPTextModelWithProjection(_clip_text_config(16, projection_dim=12)).save_pretrained(path / "text_encoder_2")
        second = clip_tokenizer()
        second.pad_token, second.model_max_length = "!", 77
        second.save_pretrained(path / "tokenizer_2")
    DDPMScheduler(  # SD1.5's and SDXL's training schedule
        num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    ).save_pretrained(path / "scheduler")
    name = "StableDiffusionXLPipeline" if xl else "StableDiffusionPipeline"
    (path / "model_index.json").write_text(json.dumps({"_class_name": name}))
    return path


def tiny_lrm_unet_config(*, xl: bool = False) -> dict[str, Any]:
    """A tiny UNet2DConditionModel config of the SD1.5 (4 down blocks, the last without attention) or SDXL (3 down
    blocks, the first without attention, ``text_time`` added embedding) shape, 2 resnets per block as both have."""
    common = {"sample_size": 8, "in_channels": 4, "out_channels": 4, "layers_per_block": 2, "norm_num_groups": 4}
    if not xl:
        return {
            **common,
            "block_out_channels": (8, 16, 24, 24),
            "down_block_types": ("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
            "up_block_types": ("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
            "cross_attention_dim": 16,
            "attention_head_dim": 4,
        }
    return {
        **common,
        "block_out_channels": (8, 16, 24),
        "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        "up_block_types": ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        "cross_attention_dim": 24,
        "attention_head_dim": (2, 4, 6),
        "transformer_layers_per_block": (1, 1, 2),
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": 4,
        "projection_class_embeddings_input_dim": 6 * 4 + 12,
        "use_linear_projection": True,
    }


def tiny_lrm_dir(path: str | Path, base: str | Path, *, xl: bool = False, seed: int = 0) -> Path:
    """An LRM checkpoint at ``path`` laid out as LPO's ``save`` writes one (``unet/``, ``text_encoder/`` (SDXL: and
    ``text_encoder_2/``) fine-tuned copies of ``base``'s, ``state_dict.pt`` with ``visual_projection``, SD1.5's
    ``text_projection`` and ``logit_scale``), over the tiny pipeline at ``base`` (:func:`tiny_sd_dir`)."""
    import torch
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    path, base = made_dir(path), Path(base)
    torch.manual_seed(seed)
    config = tiny_lrm_unet_config(xl=xl)
    UNet2DConditionModel(**config).save_pretrained(path / "unet")
    encoders = [("text_encoder", CLIPTextModel)] + ([("text_encoder_2", CLIPTextModelWithProjection)] if xl else [])
    for part, cls in encoders:
        model = cls.from_pretrained(str(base / part))
        with torch.no_grad():
            for param in model.parameters():
                param.add_(0.05 * torch.randn_like(param))
        model.save_pretrained(path / part)
    channels = config["block_out_channels"]
    features = sum(channels) + channels[-1]  # each down block's last resnet, then the mid block
    width = 12 if xl else 10
    state: dict[str, Any] = {
        "visual_projection": {"weight": torch.randn(width, features) * 0.2},
        "logit_scale": torch.tensor(2.6592),
    }
    if not xl:
        state["text_projection"] = {"weight": torch.randn(width, 16) * 0.2}
    torch.save(state, path / "state_dict.pt")
    return path
