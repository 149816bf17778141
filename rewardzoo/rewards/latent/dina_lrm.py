"""DiNa-LRM (Liu et al., 2026; HKUST-C4G/diffusion-rm): a diffusion-native latent reward model.

``raw = head(SD3 trunk(x_sigma, t, text))``, ``score = scale * raw + shift`` (default ``(raw + 10) / 10``, the
README's and verl-omni's normalisation). The clean latent ``x0`` (SD3 VAE space, scaled and shifted as the
pipeline's ``output_type='latent'`` gives it) is noised to the flow-matching state
``x_sigma = (1 - sigma) * x0 + sigma * eps`` at the scheduler's discrete sigma nearest ``noise_level`` (its
timestep ``t``), then read by the first N blocks of SD3.5-Medium's transformer (LoRA fine-tuned) conditioned on the
prompt's SD3 text embeddings (CLIP-L + CLIP-G + T5), and a timestep-conditioned cross-attention head scores the
tapped image and text token states (:mod:`.dina_head`).

Checkpoint (``model_path``): ``config.json`` (the training config: trunk depth, taps, head) and ``checkpoint/``
(``backbone_lora/`` PEFT adapter + ``rm_head.pt``; or ``full_model.pt``; or ``rm_head.pt`` alone for a frozen
backbone). The SD3 pipeline directory (``base_model_path``, default the config's ``backbone_model_id``) supplies the
transformer, the text encoders, their tokenizers and the scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, ClassVar

import torch

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint, local_file, resolve_checkpoint
from ...shared.weights import load_state_dict, model_folder
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.latents import image_latents, local_folder, seeded_noise
from ..models.sd3 import TRUNK_EMBEDDERS, SD3TextEncoders, flow_match_sigma, load_sd3_trunk, read_peft_adapter
from ..options import Field, Number, PositiveInt, RewardOptions, WeightPath
from .dina_head import DiNaRewardHead

_PIPELINE_FILES = ("model_index.json", "scheduler/*", "transformer/*", "text_encoder*/*", "tokenizer*/*")
_HEAD_KEYS = ("width", "out_dim", "num_queries", "num_attn_heads", "use_proj_in")


def read_config(folder: Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` (JSON, or YAML as the reference's ``yaml.safe_load`` also reads)."""
    path = folder / "config.json"
    if not path.is_file():
        raise ConfigError(f"'{folder}' holds no config.json (a DiNa-LRM checkpoint directory)", field="model_path")
    text = path.read_text()
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        import yaml

        config = yaml.safe_load(text)
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ConfigError(f"'{path}' has no 'model' section", field="model_path")
    return config


class DiNaLRM(PointwiseReward):
    """DiNa-LRM: ``scale * head(SD3 trunk(noised latent, prompt)) + shift`` on SD3 latents.

    Inputs: ``latent`` ((C, H, W) or (1, C, H, W), the SD3 pipeline's clean latent) and ``prompt``. Range unbounded;
    the raw head output is the extra ``raw``. ``model_path``: a DiNa-LRM checkpoint (default
    ``liuhuohuo/DiNa-LRM-SD35M-12layers``); options: :class:`Options`.
    """

    inputs = Inputs(("prompt", "latent"))
    default_model: ClassVar[str] = "liuhuohuo/DiNa-LRM-SD35M-12layers"

    class Options(RewardOptions):
        base_model_path: WeightPath | None = None
        """The SD3 pipeline directory or hub id (transformer, text encoders, tokenizers, scheduler); default the
        checkpoint config's ``model.backbone_model_id`` (``stabilityai/stable-diffusion-3.5-medium``)."""
        noise_level: float = Field(0.4, ge=0.0, le=1.0)
        """The sigma ``u`` the latent is noised to (the scheduler's nearest discrete sigma): 0.4 as the README for
        generated latents and verl-omni's trainer; the README suggests 0.1 for clean (VAE-encoded) images."""
        noise_seed: int | None = 0
        """Seed of the noise, drawn on the CPU per latent (every latent of a call gets the same draw, on every device
        and batch split); null draws fresh noise from torch's global generator each call, as the reference does."""
        ensemble_levels: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(None, min_length=1)
        """Several noise levels scored together, one noise draw shared: the head reads the token states of every
        level at once (the reference's ``forward_ensemble``; its evaluation uses ``[0.2, 0.5, 0.7]``). Replaces
        ``noise_level``; costs one trunk pass per level."""
        max_sequence_length: PositiveInt = 256
        """T5 tokens of the prompt (padded / truncated): 256 as the README's and vLLM-Omni's inference; the
        training code encoded 128."""
        scale: Number = 0.1
        """Multiplies the raw score (``(raw + 10) / 10`` by default, the README's normalisation)."""
        shift: Number = 1.0
        """Added after ``scale``."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        folder = model_folder(str(model_path or self.default_model), ("config.json", "checkpoint/*", "checkpoint/*/*"))
        config = read_config(folder)
        model = config["model"]
        if model.get("use_logistic"):
            raise ConfigError(
                f"'{folder}': use_logistic checkpoints are not supported (their logistic parameters are not saved)",
                field="model_path",
            )
        base_source = self.options.base_model_path or model.get("backbone_model_id")
        if not base_source:
            raise ConfigError("no SD3 pipeline: set kwargs.base_model_path", field="kwargs.base_model_path")
        base = model_folder(str(base_source), _PIPELINE_FILES)
        self.visual_taps = tuple(int(i) for i in model["visual_head_idx"])
        self.text_taps = tuple(int(i) for i in model["text_head_idx"])
        self.add_noise = bool(config.get("training", {}).get("add_noise", True))
        levels = self.options.ensemble_levels or [self.options.noise_level]
        self.levels = flow_match_sigma(base / "scheduler", levels)
        self.sigma, self.timestep = self.levels[0]

        lora, scaling, replace, head_state = self._checkpoint(folder / "checkpoint", model)
        self.trunk = self.hold(
            load_sd3_trunk(
                base / "transformer",
                int(model["num_transformer_layers"]),
                device=device,
                dtype=self.dtype,
                lora=lora,
                lora_scaling=scaling,
                replace=replace,
            ),
            files=[str(folder), str(base)],
        )
        embed = self.trunk.pos_embed
        self.channels, self.patch = int(embed.proj.in_channels), int(embed.patch_size)
        self.max_tokens_side = int(embed.pos_embed_max_size or embed.height)
        head_options = {k: v for k, v in (model.get("reward_head") or {}).items() if k in _HEAD_KEYS}
        self.head = DiNaRewardHead(self.trunk.inner_dim, len(self.visual_taps), len(self.text_taps), **head_options)
        missing, unexpected = self.head.load_state_dict(head_state, strict=False)
        if missing or unexpected:
            raise ConfigError(
                f"'{folder}': rm_head does not fit the config's head (missing {missing[:3]}, unexpected "
                f"{unexpected[:3]})",
                field="model_path",
            )
        self.head = self.hold(
            self.head.to(device=device, dtype=self.dtype).eval().requires_grad_(False), files=[str(folder)]
        )
        self.text = SD3TextEncoders(base, device=device, dtype=self.dtype)
        for encoder in self.text.modules:
            self.hold(encoder, files=[str(base)])

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """What this reward reads: the checkpoint's LoRA adapter and head (or full model), the SD3 pipeline's
        transformer tensors of the trunk (its embedders and first ``num_transformer_layers`` blocks) and its three
        text encoders, found in local directories or the hub cache without downloading."""
        source = str(model_path or cls.default_model)
        root = local_folder(source)
        if root is None:
            return [Checkpoint(source, missing=f"'{source}' is neither a local directory nor in the hub cache")]
        try:
            model = read_config(root)["model"]
        except ConfigError as exc:
            return [Checkpoint(source, missing=exc.message)]
        ckpt = root / "checkpoint"
        frozen = bool(model.get("freeze_backbone"))
        if model.get("use_lora") and not frozen:
            parts = [resolve_checkpoint(str(ckpt / "backbone_lora")), local_file(ckpt / "rm_head.pt")]
        else:
            parts = [local_file(ckpt / ("rm_head.pt" if frozen else "full_model.pt"))]
        base_source = str(cls.configured(kwargs, "base_model_path") or model.get("backbone_model_id") or "")
        base = local_folder(base_source) if base_source else None
        if base is None:
            return [*parts, Checkpoint(base_source, missing=f"the SD3 pipeline '{base_source}' is not here")]
        blocks = tuple(f"transformer_blocks.{i}." for i in range(int(model["num_transformer_layers"])))
        trunk = replace(
            resolve_checkpoint(str(base / "transformer")), include=(*(f"{e}." for e in TRUNK_EMBEDDERS), *blocks)
        )
        encoders = [
            resolve_checkpoint(str(base / part)) for part in ("text_encoder", "text_encoder_2", "text_encoder_3")
        ]
        return [*parts, trunk, *encoders]

    @staticmethod
    def _checkpoint(folder: Path, model: dict[str, Any]) -> tuple[Any, float | None, Any, dict[str, Any]]:
        """(LoRA tensors, LoRA scaling, trunk tensors replacing the base ones, head tensors) in the order the
        reference's ``load_checkpoint`` looks for them: a LoRA adapter, a full model, a head alone."""
        frozen = bool(model.get("freeze_backbone"))
        if model.get("use_lora") and not frozen:
            lora, scaling = read_peft_adapter(folder / "backbone_lora")
            return lora, scaling, None, load_state_dict(folder / "rm_head.pt")
        if not frozen:
            state = load_state_dict(folder / "full_model.pt")
            trunk = {k.removeprefix("backbone."): v for k, v in state.items() if k.startswith("backbone.")}
            head = {k.removeprefix("reward_head."): v for k, v in state.items() if k.startswith("reward_head.")}
            return None, None, trunk, head
        return None, None, None, load_state_dict(folder / "rm_head.pt")

    def __call__(self, prompt: Sequence[str], latent: Sequence[Any], **_: Any) -> RewardOutput:
        if len(prompt) != len(latent):
            raise InputError(f"mismatched inputs: {len(prompt)} prompts, {len(latent)} latents", reward=self.name)
        latents = image_latents(latent, self.channels, "the SD3 transformer", self.name)
        for i, x in enumerate(latents):
            patch, most = self.patch, self.max_tokens_side * self.patch
            if x.shape[1] % patch or x.shape[2] % patch or max(x.shape[1:]) > most:
                raise InputError(
                    f"height and width must be multiples of {patch} and at most {most}, got {tuple(x.shape[1:])}",
                    reward=self.name,
                    field="latent",
                    sample=i,
                )
        raw = torch.empty(len(latents))
        with torch.no_grad():
            unique = list(dict.fromkeys(prompt))
            embeds, pooled = self.text.encode(unique, self.options.max_sequence_length)
            where = {p: i for i, p in enumerate(unique)}
            shapes: dict[tuple[int, ...], list[int]] = {}
            for i, x in enumerate(latents):
                shapes.setdefault(tuple(x.shape), []).append(i)
            for rows in shapes.values():
                pick = torch.tensor([where[prompt[i]] for i in rows], device=embeds.device)
                raw[rows] = self._score(torch.stack([latents[i] for i in rows]), embeds[pick], pooled[pick])
        score = self.options.scale * raw + self.options.shift
        return RewardOutput(score, extras={"raw": raw})

    def _score(self, clean: torch.Tensor, embeds: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """Raw head outputs (B,) for clean latents (B, C, H, W) and their prompts' embeddings: one trunk pass per
        noise level, the same noise draw for every level."""
        x0 = clean.float()
        noise = (
            torch.stack([seeded_noise(x0.shape[1:], self.options.noise_seed) for _ in range(x0.shape[0])])
            if self.add_noise
            else None
        )
        views = []
        for sigma, timestep in self.levels:
            x = x0
            if noise is not None:
                s = torch.tensor(sigma, dtype=torch.float32)
                x = (1.0 - s) * x0 + s * noise
            x = x.to(device=self.device, dtype=self.dtype)
            t = torch.full((x.shape[0],), timestep, dtype=torch.float32, device=self.device)
            temb, image_states, text_states = self.trunk(
                x, embeds.to(self.dtype), pooled.to(self.dtype), t, self.visual_taps, self.text_taps
            )
            views.append((image_states, text_states, temb))
        out = self.head(*views[0]) if len(views) == 1 else self.head.ensemble(views)
        return out[:, 0].float().cpu()
