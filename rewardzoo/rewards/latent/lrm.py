"""LRM (Zhang et al., NeurIPS 2025; Kwai-Kolors/LPO): the noise-aware latent reward model LPO trains with.

``score = exp(logit_scale) * cos(W_v · pool(UNet down + mid features of (x_t, t)), text features)``. A fine-tuned
Stable Diffusion UNet (SD1.5 or SDXL) reads the latent ``x_t`` at DDPM timestep ``t`` conditioned on the prompt and on
the empty prompt, running only its input conv, down blocks and mid block. Global-average pooled features (the last
resnet output of each down block, then the mid block's output with classifier-free guidance
``mid_u + g (mid_c - mid_u)``; the other scales taken from the prompt pass) are concatenated and projected by
``visual_projection``; the text features are the prompt's pooled CLIP output (SD1.5: CLIP-L's pooled output through
``text_projection``; SDXL: CLIP-G's projected ``text_embeds``). The score is the cosine of the two, times
``exp(logit_scale)``, as ``get_preference_score`` computes it.

Checkpoint (``model_path``, optionally its ``subfolder``): the reference's ``save`` layout: ``unet/`` (a diffusers
``UNet2DConditionModel``), ``text_encoder/`` (and ``text_encoder_2/`` for SDXL) when the text encoders were
fine-tuned, and ``state_dict.pt`` (``visual_projection``, SD1.5's ``text_projection``, ``logit_scale``). The base
pipeline (``base_model_path``) supplies the tokenizers, the DDPM schedule and any text encoder the checkpoint lacks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint, local_file, resolve_checkpoint
from ...shared.weights import loading, model_folder
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.latents import image_latents, local_folder, seeded_noise
from ..options import Field, RewardOptions, WeightPath

#: The base pipeline each backbone's LRM was trained on (lrm_15 step_sd15.yaml; LPO's SDXL config).
BASE_MODELS = {"sd15": "sd-legacy/stable-diffusion-v1-5", "sdxl": "stabilityai/stable-diffusion-xl-base-1.0"}
_CKPT_FILES = ("state_dict.pt", "unet/*", "text_encoder*/*", "*/state_dict.pt", "*/unet/*", "*/text_encoder*/*")
_BASE_FILES = ("model_index.json", "scheduler/*", "tokenizer*/*", "text_encoder*/*")
#: The UNet's parts the reward drops after loading (it runs the down and mid blocks only).
_UNUSED = ("up_blocks.", "conv_norm_out.", "conv_out.")


def checkpoint_dir(root: Path, subfolder: str | None) -> Path:
    """The folder holding ``state_dict.pt``: ``root`` / ``subfolder``, or ``root`` itself."""
    folder = root / subfolder if subfolder else root
    if (folder / "state_dict.pt").is_file() and (folder / "unet").is_dir():
        return folder
    found = sorted(p.parent.name for p in root.glob("*/state_dict.pt"))
    hint = f"; sub-folders holding one: {', '.join(found)} (set kwargs.subfolder)" if found else ""
    raise ConfigError(f"'{folder}' holds no LRM checkpoint (state_dict.pt and unet/){hint}", field="model_path")


class LRM(PointwiseReward):
    """LRM: ``exp(logit_scale) * cos(visual features of (x_t, t), text features)`` on SD1.5 / SDXL latents.

    Inputs: ``latent`` ((4, H, W) or (1, 4, H, W), the pipeline's latent scaled by the VAE's ``scaling_factor``) and
    ``prompt``. Range ``[-exp(logit_scale), exp(logit_scale)]`` of the checkpoint. The backbone (SD1.5 or SDXL) is read
    from the checkpoint's UNet config. Options: :class:`Options`.
    """

    inputs = Inputs(("prompt", "latent"))
    default_model: ClassVar[str] = "casiatao/LRM"

    class Options(RewardOptions):
        subfolder: str | None = None
        """The checkpoint folder inside ``model_path`` (LPO's configs name the published ones ``lrm_sd15`` and
        ``lrm_sdxl``); null: ``model_path`` itself holds ``state_dict.pt`` and ``unet/``."""
        base_model_path: WeightPath | None = None
        """The SD pipeline directory or hub id (tokenizers, scheduler, text encoders the checkpoint lacks); default
        ``sd-legacy/stable-diffusion-v1-5`` for an SD1.5 UNet, ``stabilityai/stable-diffusion-xl-base-1.0`` for SDXL."""
        timestep: int = Field(1, ge=0, le=999)
        """The DDPM timestep the latent is scored at: 1, the last step of LPO's 20-step sampler (where the final
        latent is scored) and the timestep of LRM's validation."""
        add_noise: bool = False
        """Noise the latent to ``timestep`` first (``scheduler.add_noise``, as LRM's training and its image scorer
        do for clean latents); false: the latent is already ``x_t``, as LPO's sampler passes it."""
        noise_seed: int | None = 0
        """Seed of the noise (with ``add_noise``), drawn on the CPU per latent; null: torch's global generator."""
        guidance_scale: float = 7.5
        """Classifier-free guidance on the pooled mid-block features (7.5 in every published training config)."""
        multi_scale_cfg: bool = False
        """Guidance on the other scales too (false in every published config: they come from the prompt pass)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        from diffusers import DDPMScheduler, UNet2DConditionModel

        ckpt = checkpoint_dir(model_folder(str(model_path or self.default_model), _CKPT_FILES), self.options.subfolder)
        with loading(f"the LRM UNet '{ckpt / 'unet'}'"):
            unet = UNet2DConditionModel.from_pretrained(str(ckpt / "unet"), dtype=self.dtype)
        unet.up_blocks, unet.conv_norm_out, unet.conv_out = torch.nn.ModuleList(), None, None  # never run
        self.xl = unet.config.get("addition_embed_type") == "text_time"
        self.backbone = "sdxl" if self.xl else "sd15"
        self.unet = self.hold(unet.to(device).eval().requires_grad_(False), files=[str(ckpt)])
        base = model_folder(str(self.options.base_model_path or BASE_MODELS[self.backbone]), _BASE_FILES)
        with loading(f"the DDPM scheduler '{base / 'scheduler'}'", field="kwargs.base_model_path"):
            scheduler = DDPMScheduler.from_config(DDPMScheduler.load_config(str(base / "scheduler")))
        if self.options.timestep >= scheduler.config.num_train_timesteps:
            raise ConfigError(
                f"timestep {self.options.timestep} is past the schedule's {scheduler.config.num_train_timesteps}",
                field="kwargs.timestep",
            )
        self.alpha_bar = float(scheduler.alphas_cumprod[self.options.timestep])
        self._load_text(ckpt, base)
        self._load_heads(ckpt)
        self.channels = int(unet.config.in_channels)
        self.image_size = int(unet.config.sample_size) * 8  # sdxl_base_preference_model.py 71-74 (VAE factor 8)

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """What this reward reads: ``state_dict.pt``, the UNet (its up blocks not counted: dropped after loading),
        the text encoders of the checkpoint, else of the base pipeline; found locally without downloading."""
        source = str(model_path or cls.default_model)
        root = local_folder(source)
        if root is None:
            return [Checkpoint(source, missing=f"'{source}' is neither a local directory nor in the hub cache")]
        try:
            ckpt = checkpoint_dir(root, cls.configured(kwargs, "subfolder"))
        except ConfigError as exc:
            return [Checkpoint(source, missing=exc.message)]
        unet = (
            json.loads((ckpt / "unet" / "config.json").read_text()) if (ckpt / "unet" / "config.json").is_file() else {}
        )
        xl = unet.get("addition_embed_type") == "text_time"
        parts = [local_file(ckpt / "state_dict.pt"), replace(resolve_checkpoint(str(ckpt / "unet")), exclude=_UNUSED)]
        encoders = ("text_encoder", "text_encoder_2") if xl else ("text_encoder",)
        parts += [resolve_checkpoint(str(ckpt / e)) for e in encoders if (ckpt / e).is_dir()]
        frozen = [e for e in encoders if not (ckpt / e).is_dir()]
        if frozen:
            base_source = str(cls.configured(kwargs, "base_model_path") or BASE_MODELS["sdxl" if xl else "sd15"])
            base = local_folder(base_source)
            if base is None:
                return [*parts, Checkpoint(base_source, missing=f"the SD pipeline '{base_source}' is not here")]
            parts += [resolve_checkpoint(str(base / e)) for e in frozen]
        return parts

    def _load_text(self, ckpt: Path, base: Path) -> None:
        from transformers import CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

        parts = [("tokenizer", "text_encoder", CLIPTextModel)]
        if self.xl:
            parts.append(("tokenizer_2", "text_encoder_2", CLIPTextModelWithProjection))
        self.tokenizers, self.encoders = [], []
        for tok, enc, cls in parts:
            with loading(f"the tokenizer '{base / tok}'", field="kwargs.base_model_path"):
                self.tokenizers.append(CLIPTokenizer.from_pretrained(str(base / tok)))
            source = ckpt / enc if (ckpt / enc).is_dir() else base / enc  # fine-tuned unless frozen
            with loading(f"the text encoder '{source}'", field="kwargs.base_model_path"):
                model = cls.from_pretrained(str(source), dtype=self.dtype)
            self.encoders.append(self.hold(model.to(self.device).eval().requires_grad_(False), files=[str(source)]))

    def _load_heads(self, ckpt: Path) -> None:
        with loading(f"the LRM projections '{ckpt / 'state_dict.pt'}'"):
            state = torch.load(str(ckpt / "state_dict.pt"), map_location="cpu", weights_only=True)
        visual = state["visual_projection"]["weight"]
        self.taps = self._taps()
        wide = sum(int(block.resnets[-1].out_channels) for block in self.unet.down_blocks)
        mid = int(self.unet.config.block_out_channels[-1])
        if visual.shape[1] not in (wide + mid, mid):
            raise ConfigError(
                f"'{ckpt}': visual_projection takes {visual.shape[1]} features, the UNet pools {wide + mid} "
                f"(multi-scale) or {mid}",
                field="model_path",
            )
        self.multi_scale = visual.shape[1] == wide + mid
        head = torch.nn.Module()
        head.visual = torch.nn.Linear(visual.shape[1], visual.shape[0], bias=False)
        head.visual.weight.data = visual.float()
        if not self.xl:  # SD1.5: CLIP-L's text_projection, fine-tuned with the model
            text = state["text_projection"]["weight"]
            head.text = torch.nn.Linear(text.shape[1], text.shape[0], bias=False)
            head.text.weight.data = text.float()
        self.head = self.hold(head.to(device=self.device, dtype=self.dtype).requires_grad_(False), files=[str(ckpt)])
        self.logit_scale = float(torch.as_tensor(state["logit_scale"]).float())

    def _taps(self) -> list[int]:
        """Indices into the down blocks' residual outputs of each block's last resnet output: ``[2, 5, 8, 11]``
        for SD1.5 and ``[2, 5, 8]`` for SDXL (sd15_preference_model.py 116-120; sdxl 178-181)."""
        taps, count = [], 1  # conv_in's output first
        for block in self.unet.down_blocks:
            count += len(block.resnets)
            taps.append(count - 1)
            count += 1 if block.downsamplers is not None else 0
        return taps

    def _text(self, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(encoder_hidden_states, SDXL's pooled text embeds for the time embedding, text features) of ``prompts``."""
        ids = [
            tok(
                list(prompts),
                padding="max_length",
                max_length=tok.model_max_length,
                truncation=True,
                return_tensors="pt",
            ).input_ids.to(self.device)
            for tok in self.tokenizers
        ]
        if not self.xl:  # sd15_preference_model.py 94-107: last hidden state, pooled output projected
            out = self.encoders[0](ids[0], return_dict=False)
            return out[0], None, self.head.text(out[1])
        first = self.encoders[0](ids[0], output_hidden_states=True)  # sdxl_base_preference_model.py 125-146
        second = self.encoders[1](ids[1], output_hidden_states=True)
        hidden = torch.cat([first.hidden_states[-2], second.hidden_states[-2]], dim=-1)
        return hidden, second[0], second[0]

    def __call__(self, prompt: Sequence[str], latent: Sequence[Any], **_: Any) -> RewardOutput:
        if len(prompt) != len(latent):
            raise InputError(f"mismatched inputs: {len(prompt)} prompts, {len(latent)} latents", reward=self.name)
        latents = image_latents(latent, self.channels, "the UNet", self.name)
        score = torch.empty(len(latents))
        with torch.no_grad():
            unique = list(dict.fromkeys(prompt))
            hidden, pooled, text = self._text([*unique, ""])
            where = {p: i for i, p in enumerate(unique)}
            shapes: dict[tuple[int, ...], list[int]] = {}
            for i, x in enumerate(latents):
                shapes.setdefault(tuple(x.shape), []).append(i)
            for rows in shapes.values():
                pick = torch.tensor([where[prompt[i]] for i in rows], device=hidden.device)
                image = self._image(torch.stack([latents[i] for i in rows]), hidden, pooled, pick)
                feats = text[pick].float()
                cos = (image / image.norm(dim=-1, keepdim=True) * (feats / feats.norm(dim=-1, keepdim=True))).sum(-1)
                score[rows] = (torch.exp(torch.tensor(self.logit_scale)) * cos.cpu()).float()
        return RewardOutput(score)

    def _image(self, x0: torch.Tensor, hidden: torch.Tensor, pooled: torch.Tensor | None, pick: torch.Tensor) -> Any:
        """Image features (B, P) of latents (B, C, H, W): the prompt pass and the empty-prompt pass together."""
        x = x0
        if self.options.add_noise:  # DDPMScheduler.add_noise at `timestep` (lrm_15 sd15_preference_model.py 110-115)
            noise = torch.stack([seeded_noise(x0.shape[1:], self.options.noise_seed) for _ in range(x0.shape[0])])
            x = self.alpha_bar**0.5 * x0 + (1.0 - self.alpha_bar) ** 0.5 * noise
        b = x.shape[0]
        cfg = self.options.guidance_scale != 1.0
        x = x.to(device=self.device, dtype=self.dtype)
        states = hidden[pick]
        extra = pooled[pick] if pooled is not None else None
        if cfg:  # sd15_preference_model.py 109-112: [prompt; empty prompt] on the same latents
            x = torch.cat([x, x])
            states = torch.cat([states, hidden[-1:].expand(b, -1, -1)])
            extra = torch.cat([extra, pooled[-1:].expand(b, -1)]) if pooled is not None else None
        mid, res = self._trunk(x, states, extra)
        pool = [torch.nn.functional.adaptive_avg_pool2d(res[i], 1).flatten(1) for i in self.taps]
        mid = torch.nn.functional.adaptive_avg_pool2d(mid, 1).flatten(1)
        g = self.options.guidance_scale
        if cfg:
            mid = mid[b:] + g * (mid[:b] - mid[b:])
            pool = [p[b:] + g * (p[:b] - p[b:]) if self.options.multi_scale_cfg else p[:b] for p in pool]
        feats = torch.cat([*pool, mid], dim=-1) if self.multi_scale else mid
        return self.head.visual(feats).float()

    def _trunk(self, x: torch.Tensor, states: torch.Tensor, pooled: torch.Tensor | None) -> Any:
        """The UNet's forward up to its mid block (unet_2d_condition_reward.py 1141-1282 with use_up_blocks off):
        ``(mid output, down-block residuals)``."""
        unet = self.unet
        t = torch.full((x.shape[0],), self.options.timestep, dtype=torch.long, device=self.device)
        added = None
        if self.xl:  # sdxl_base_preference_model.py 154-172: original = target = the default size, crop (0, 0)
            size = self.image_size
            ids = torch.tensor([[size, size, 0, 0, size, size]], dtype=states.dtype, device=self.device)
            added = {"text_embeds": pooled, "time_ids": ids.repeat(x.shape[0], 1)}
        if unet.config.center_input_sample:
            x = 2 * x - 1.0
        emb = unet.time_embedding(unet.get_time_embed(sample=x, timestep=t), None)
        aug = unet.get_aug_embed(emb=emb, encoder_hidden_states=states, added_cond_kwargs=added or {})
        emb = emb + aug if aug is not None else emb
        if unet.time_embed_act is not None:
            emb = unet.time_embed_act(emb)
        states = unet.process_encoder_hidden_states(encoder_hidden_states=states, added_cond_kwargs=added or {})
        h = unet.conv_in(x)
        res: tuple[torch.Tensor, ...] = (h,)
        for block in unet.down_blocks:
            if getattr(block, "has_cross_attention", False):
                h, out = block(hidden_states=h, temb=emb, encoder_hidden_states=states)
            else:
                h, out = block(hidden_states=h, temb=emb)
            res += out
        if getattr(unet.mid_block, "has_cross_attention", False):
            h = unet.mid_block(h, emb, encoder_hidden_states=states)
        else:
            h = unet.mid_block(h, emb)
        return h, res
