"""Stable Diffusion 3 / 3.5 (MMDiT) parts for latent rewards, read from a diffusers pipeline directory.

- :class:`SD3TextEncoders` — the pipeline's three text encoders (CLIP-L and CLIP-G with projection, T5 encoder) and
  tokenizers, and the SD3 text conditioning they make: the two CLIPs' penultimate hidden states side by side,
  zero-padded to T5's width, followed by T5's last hidden state (``encoder_hidden_states``), and the two CLIPs'
  projected pooled outputs side by side (``pooled_projections``);
- :func:`load_sd3_trunk` — the first ``num_layers`` blocks of the pipeline's ``SD3Transformer2DModel`` with its patch,
  timestep + pooled-text and context embedders (no final norm / projection), built on the meta device and filled
  with only those tensors from the safetensors files (half of SD3.5-Medium's transformer is never read for a
  12-block trunk), optionally with a PEFT LoRA adapter merged into it (:func:`merge_peft_lora`);
- :func:`flow_match_sigma` — the scheduler's discrete noise level nearest a wanted one, and its timestep.

Needs diffusers and transformers, imported inside the functions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...shared.weights import load_state_dict, loading

#: The pipeline sub-folders the text conditioning reads.
TEXT_PARTS = ("text_encoder", "text_encoder_2", "text_encoder_3", "tokenizer", "tokenizer_2", "tokenizer_3")
#: The transformer modules a trunk keeps besides its blocks.
TRUNK_EMBEDDERS = ("pos_embed", "time_text_embed", "context_embedder")
_CLIP_MAX_LENGTH = 77


class SD3TextEncoders:
    """CLIP-L, CLIP-G (``CLIPTextModelWithProjection``) and T5 (``T5EncoderModel``) of an SD3 pipeline directory,
    with their tokenizers; :meth:`encode` gives the SD3 text conditioning. ``modules`` are the three encoders."""

    def __init__(self, base: Path, *, device: str, dtype: Any) -> None:
        from transformers import AutoTokenizer, CLIPTextModelWithProjection, T5EncoderModel

        missing = [part for part in TEXT_PARTS if not (base / part).is_dir()]
        if missing:
            raise ConfigError(
                f"'{base}' is not an SD3 pipeline directory: no {', '.join(missing)}", field="kwargs.base_model_path"
            )
        self.tokenizers = []
        for part in ("tokenizer", "tokenizer_2", "tokenizer_3"):
            with loading(f"the SD3 {part} '{base / part}'", field="kwargs.base_model_path"):
                self.tokenizers.append(AutoTokenizer.from_pretrained(str(base / part)))
        self.encoders = []
        for part, cls in (
            ("text_encoder", CLIPTextModelWithProjection),
            ("text_encoder_2", CLIPTextModelWithProjection),
            ("text_encoder_3", T5EncoderModel),
        ):
            with loading(f"the SD3 {part} '{base / part}'", field="kwargs.base_model_path"):
                model = cls.from_pretrained(str(base / part), dtype=dtype)
            self.encoders.append(model.to(device).eval().requires_grad_(False))
        self.device = device

    @property
    def modules(self) -> list[Any]:
        return list(self.encoders)

    def encode(self, prompts: Sequence[str], max_sequence_length: int) -> tuple[Any, Any]:
        """``(encoder_hidden_states (B, 77 + max_sequence_length, D_t5), pooled_projections (B, D_l + D_g))``.

        Each CLIP reads its prompt padded to 77 tokens and gives its second-to-last hidden state and its projected
        pooled output; T5 reads the prompt padded (and truncated) to ``max_sequence_length`` tokens."""
        import torch

        hidden, pooled = [], []
        for tokenizer, encoder in zip(self.tokenizers[:2], self.encoders[:2]):
            ids = tokenizer(
                list(prompts), padding="max_length", max_length=_CLIP_MAX_LENGTH, truncation=True, return_tensors="pt"
            ).input_ids
            out = encoder(ids.to(self.device), output_hidden_states=True)
            pooled.append(out[0])
            hidden.append(out.hidden_states[-2].to(encoder.dtype))
        t5_ids = self.tokenizers[2](
            list(prompts),
            padding="max_length",
            max_length=max_sequence_length,
            truncation=True,
            add_special_tokens=True,
            return_tensors="pt",
        ).input_ids
        t5 = self.encoders[2](t5_ids.to(self.device))[0].to(self.encoders[2].dtype)
        clip = torch.cat(hidden, dim=-1)
        clip = torch.nn.functional.pad(clip, (0, t5.shape[-1] - clip.shape[-1]))
        return torch.cat([clip, t5], dim=-2), torch.cat(pooled, dim=-1)


def _trunk_class() -> Any:
    import torch
    from torch import nn

    class SD3Trunk(nn.Module):
        """The patch, timestep + pooled-text and context embedders and the first blocks of an SD3 transformer;
        :meth:`forward` returns ``(temb, image-token states, text-token states)``, the states taken after the
        blocks numbered in ``taps`` (1-based; 0 = the embedders' output)."""

        def __init__(self, transformer: Any, num_layers: int) -> None:
            super().__init__()
            for name in TRUNK_EMBEDDERS:
                setattr(self, name, getattr(transformer, name))
            self.transformer_blocks = nn.ModuleList(list(transformer.transformer_blocks)[:num_layers])
            self.inner_dim = int(transformer.inner_dim)

        def forward(
            self,
            latents: torch.Tensor,
            encoder_hidden_states: torch.Tensor,
            pooled_projections: torch.Tensor,
            timestep: torch.Tensor,
            visual_taps: Sequence[int],
            text_taps: Sequence[int],
        ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
            image = self.pos_embed(latents)
            temb = self.time_text_embed(timestep, pooled_projections)
            text = self.context_embedder(encoder_hidden_states)
            image_states = [image] if 0 in visual_taps else []
            text_states = [text] if 0 in text_taps else []
            for depth, block in enumerate(self.transformer_blocks, start=1):
                text, image = block(hidden_states=image, encoder_hidden_states=text, temb=temb)
                if depth in visual_taps:
                    image_states.append(image)
                if depth in text_taps:
                    text_states.append(text)
            return temb, image_states, text_states

    return SD3Trunk


def _transformer_files(folder: Path) -> list[Path]:
    index = folder / "diffusion_pytorch_model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / name for name in names]
    single = folder / "diffusion_pytorch_model.safetensors"
    if single.is_file():
        return [single]
    raise ConfigError(
        f"'{folder}' holds no diffusion_pytorch_model.safetensors (or its index)", field="kwargs.base_model_path"
    )


def _wanted(key: str, num_layers: int) -> bool:
    if key.startswith(TRUNK_EMBEDDERS):
        return True
    parts = key.split(".")
    return parts[0] == "transformer_blocks" and int(parts[1]) < num_layers


def load_sd3_trunk(
    transformer_dir: Path,
    num_layers: int,
    *,
    device: str,
    dtype: Any,
    lora: Mapping[str, Any] | None = None,
    lora_scaling: float | None = None,
    replace: Mapping[str, Any] | None = None,
) -> Any:
    """The first ``num_layers`` blocks of the SD3 transformer in ``transformer_dir`` (a pipeline's ``transformer/``)
    as an ``SD3Trunk`` on ``device`` in ``dtype``, reading only the tensors it keeps.

    ``lora``: a PEFT adapter's tensors (``…<module>.lora_A.weight`` / ``lora_B``), merged in float32 and cast to
    ``dtype`` weight by weight (``W + lora_scaling * B @ A``); ``replace``: trunk tensors (keys as the trunk names them) that
    replace the base ones (a fully fine-tuned backbone). Every kept tensor must be found and fit."""
    import torch
    from diffusers import SD3Transformer2DModel
    from safetensors import safe_open

    with loading(f"the SD3 transformer config '{transformer_dir}'", field="kwargs.base_model_path"):
        config = SD3Transformer2DModel.load_config(str(transformer_dir))
    depth = int(config.get("num_layers", 0))
    if not 0 < num_layers <= depth:
        raise ConfigError(
            f"the reward wants the first {num_layers} blocks, '{transformer_dir}' has {depth}",
            field="kwargs.base_model_path",
        )
    with torch.device("meta"):
        trunk = _trunk_class()(SD3Transformer2DModel.from_config(config), num_layers)
    expected = trunk.state_dict()
    state: dict[str, Any] = {}
    for path in _transformer_files(transformer_dir):
        with loading(f"the SD3 transformer weights '{path}'", field="kwargs.base_model_path"):
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for key in f.keys():  # noqa: SIM118 (a safetensors file handle, not a dict)
                    if _wanted(key, num_layers) and key in expected:
                        state[key] = f.get_tensor(key)
    state.update(replace or {})
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ConfigError(
            f"'{transformer_dir}' lacks {len(missing)} tensor(s) of the trunk, e.g. {missing[:3]}",
            field="kwargs.base_model_path",
        )
    for key, value in state.items():
        if tuple(value.shape) != tuple(expected[key].shape):
            raise ConfigError(
                f"'{key}' has shape {tuple(value.shape)}, the trunk wants {tuple(expected[key].shape)}",
                field="kwargs.base_model_path",
            )
    if lora:
        merge_peft_lora(state, lora, lora_scaling, where=str(transformer_dir), dtype=dtype)
    for key, value in state.items():
        state[key] = value.to(dtype)
    trunk.load_state_dict(state, strict=True, assign=True)
    return trunk.to(device).eval().requires_grad_(False)


def merge_peft_lora(
    state: dict[str, Any], lora: Mapping[str, Any], scaling: float | None, *, where: str, dtype: Any = None
) -> None:
    """Merge a PEFT LoRA adapter into ``state`` in place: ``W = W + scaling * (B @ A)`` in float32, cast to ``dtype``
    (default: ``W``'s) one weight at a time (never the whole trunk in float32), for each module the adapter names (its keys ``base_model.model.<module>.lora_A.weight`` / ``lora_B``, as ``save_pretrained``
    writes them). An adapter pair for a weight the state lacks, or half a pair, is a ConfigError."""
    pairs: dict[str, dict[str, Any]] = {}
    for key, value in lora.items():
        name = key.removeprefix("base_model.model.")
        module, sep, rest = name.rpartition(".lora_")
        if not sep or rest not in ("A.weight", "B.weight"):
            raise ConfigError(f"'{where}': unexpected tensor '{key}' in the LoRA adapter", field="model_path")
        pairs.setdefault(module, {})[rest[0]] = value
    if pairs and scaling is None:
        raise ConfigError(f"'{where}': a LoRA adapter without its scaling", field="model_path")
    factor = 0.0 if scaling is None else float(scaling)
    for module, pair in pairs.items():
        target = f"{module}.weight"
        if set(pair) != {"A", "B"} or target not in state:
            raise ConfigError(
                f"'{where}': the LoRA adapter's '{module}' fits no weight of the trunk (or lacks lora_A / lora_B)",
                field="model_path",
            )
        base = state[target].float()
        delta = pair["B"].float() @ pair["A"].float()
        if delta.shape != base.shape:
            raise ConfigError(
                f"'{where}': LoRA update of '{module}' has shape {tuple(delta.shape)}, its weight {tuple(base.shape)}",
                field="model_path",
            )
        state[target] = (base + factor * delta).to(state[target].dtype if dtype is None else dtype)


def read_peft_adapter(folder: Path) -> tuple[dict[str, Any], float]:
    """``(tensors, scaling)`` of the PEFT LoRA adapter in ``folder`` (``adapter_config.json`` +
    ``adapter_model.safetensors`` or ``.bin``): scaling ``lora_alpha / r`` (``/ sqrt(r)`` with rsLoRA). Per-module
    ranks or alphas, DoRA and LoRA biases are refused (none of them merges as one scaling)."""
    config_file = folder / "adapter_config.json"
    if not config_file.is_file():
        raise ConfigError(f"'{folder}' holds no adapter_config.json", field="model_path")
    config = json.loads(config_file.read_text())
    odd = [k for k in ("rank_pattern", "alpha_pattern") if config.get(k)]
    odd += [k for k in ("use_dora", "lora_bias") if config.get(k)]
    if odd:
        raise ConfigError(f"'{config_file}': {', '.join(odd)} are not supported", field="model_path")
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        if (folder / name).is_file():
            return load_state_dict(folder / name), scaling
    raise ConfigError(f"'{folder}' holds no adapter_model.safetensors", field="model_path")


def flow_match_sigma(scheduler_dir: Path, levels: Iterable[float]) -> list[tuple[float, float]]:
    """For each wanted noise level, ``(sigma, timestep)`` of the flow-matching scheduler in ``scheduler_dir`` (a
    fresh ``FlowMatchEulerDiscreteScheduler`` from its config: the training schedule of ``num_train_timesteps``
    shifted sigmas) at the sigma nearest it (the first on a tie)."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler

    with loading(f"the scheduler config '{scheduler_dir}'", field="kwargs.base_model_path"):
        scheduler = FlowMatchEulerDiscreteScheduler.from_config(
            FlowMatchEulerDiscreteScheduler.load_config(str(scheduler_dir))
        )
    sigmas, timesteps = scheduler.sigmas.float(), scheduler.timesteps.float()
    out = []
    for level in levels:
        index = int(torch.argmin((sigmas - torch.tensor(float(level))).abs()))
        out.append((float(sigmas[index]), float(timesteps[index])))
    return out
