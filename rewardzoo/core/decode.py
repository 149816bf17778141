"""The ``decode:`` stage: a sample's ``latent`` decoded once per batch into the pixels its pixel rewards take.

Diffusion trainers hold latents; the pixel rewards of a call want pixels. With a config's ``decode:`` stage
(:class:`~rewardzoo.spec.config.DecodeSpec`), a sample that carries a ``latent`` and no ``image`` (a latent of 3
dimensions, ``(C, H, W)``) or no ``video`` (4 dimensions, ``(T, C, H, W)`` or ``(C, T, H, W)``) gets, for the
rewards that want that field, a :class:`DecodedLatent` in its place: a handle whose first read decodes every
latent of its batch that a pixel reward will read, in calls of ``batch_size`` latents of one shape, and keeps
the pixels for every reward of the call (the conversion cache then converts them once per form, as any
image). So the VAE runs once per batch; never when no reward of the call takes pixels (every reward takes the
latent, or the sample's dataset routes it to none); never for a sample that brings its own pixels.

The formula, as the diffusers pipelines write it (SD3, Flux: ``latents / scaling_factor + shift_factor``; Wan,
Qwen-Image: ``latents / (1 / latents_std) + latents_mean`` per channel)::

    pixels = clamp(vae.decode(latent.to(dtype) / scaling_factor + shift_factor).sample * 0.5 + 0.5, 0, 1)

An image becomes a float32 ``(3, H, W)`` tensor in [0, 1] on the CPU, a video ``(T, 3, H, W)``; exactly the
values diffusers' ``vae.decode`` gives for the same latents (bit-identical at float32) and what a reward would
get were those pixels given as the sample's ``image``.

**A sample with both pixels and a latent**: its own pixels win. They are what the trainer says the sample is
(it decoded them already, perhaps with a postprocess of its own); the latent is still what latent rewards read.

The VAE (diffusers' ``AutoencoderKL`` and the video VAEs it ships, :data:`VAE_CLASSES`) is read from
safetensors only (``use_safetensors=True``: a folder with pickled weights alone is refused), built once per
loader and decode stage (a train and an eval processor share it), held as a declared resource
(:class:`~rewardzoo.shared.resources.Resources`) and counted by ``rewardzoo plan``. Latents whose channels or
dimensions the VAE cannot take are an :class:`~rewardzoo.errors.InputError` naming the ``latent`` field and the
sample, raised before anything is decoded.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import ConfigError, InputError
from ..shared.resources import Resources
from ..spec.config import DecodeSpec, parse_decode
from ..spec.sample import Sample
from .decoded import DecodeBatch, DecodedLatent
from .fields import CONVERTERS

if TYPE_CHECKING:
    from ..rewards.base import Reward
    from ..spec.config import RewardSpec

__all__ = ["VAE_CLASSES", "DecodedLatent", "LatentDecoder", "decoder_for"]

#: diffusers VAE classes a decode stage loads, and whether ``decode`` takes 5-D ``(B, C, T, H, W)`` latents
#: (the video VAEs; an image is then one frame) or 4-D ``(B, C, H, W)`` ones (the frames of a video latent are
#: then decoded as a batch of images).
VAE_CLASSES: dict[str, bool] = {
    "AutoencoderKL": False,
    "AutoencoderKLWan": True,
    "AutoencoderKLHunyuanVideo": True,
    "AutoencoderKLQwenImage": True,
    "AutoencoderKLCogVideoX": True,
    "AutoencoderKLLTXVideo": True,
    "AutoencoderKLMochi": True,
}
#: The most latent tensors a decoder remembers the pixels of (see :class:`LatentDecoder`), oldest forgotten first.
MAX_REMEMBERED = 1024
#: Sample fields a decoded latent fills: 3 dimensions an image, 4 a video.
PIXEL_FIELDS = {3: "image", 4: "video"}


class LatentDecoder:
    """A decode stage's loaded VAE (:func:`decoder_for` builds and shares it): :meth:`attach` gives a batch's
    samples their pixels to come, :meth:`decode` decodes latents. ``resources`` declares the VAE and its files.

    A latent tensor attached again while it lives and is unchanged (its version) gets the same pixels: processors
    called one after the other on one batch (Flow-Factory's entries, each a processor; a train and an eval
    processor) decode it once. The pixels live as long as the latent does (at most :data:`MAX_REMEMBERED`)."""

    def __init__(self, spec: DecodeSpec) -> None:
        import torch

        from ..shared.device import check_device, resolve_device, torch_dtype

        self.spec = spec
        try:
            self.device = check_device(resolve_device(spec.device))
        except ValueError as exc:
            raise ConfigError(str(exc), field="decode.device") from None
        dtype = spec.dtype if spec.dtype != "auto" else "bfloat16" if self.device.startswith("cuda") else "float32"
        self.dtype_name = dtype
        self.dtype = torch_dtype(dtype)
        self.vae, self.class_name, folder = _load_vae(spec.vae, self.dtype)
        self.vae.to(self.device).eval().requires_grad_(False)
        self.video_vae = VAE_CLASSES[self.class_name]
        config = self.vae.config
        self.channels = int(config.get("latent_channels") or config.get("z_dim") or 0)
        self.scale, self.shift = _scale_and_shift(spec, config, self.channels, self.dtype, self.device)
        self.resources = Resources()
        self.resources.hold(self.vae, files=[folder])
        self._lock = threading.Lock()  # one decode at a time: a VAE call is memory-bound and holds its activations
        self._rolling = DecodeBatch(self)  # the batch per-sample calls join (attach(..., rolling=True))
        #: id(latent tensor) -> (a weak reference to it, its version then, its handle): the same tensor attached
        #: again (another processor over the same batch: Flow-Factory's entries, train and eval) shares its pixels
        self._seen: dict[int, tuple[Any, int, DecodedLatent]] = {}
        self._seen_lock = threading.Lock()
        self._torch = torch

    def __repr__(self) -> str:
        return f"LatentDecoder({self.class_name} from {self.spec.vae!r}, {self.device}, {self.dtype_name})"

    # ------------------------------------------------------------------------------------------ attach
    def attach(
        self,
        samples: Sequence[Sample],
        specs: Sequence[RewardSpec],
        rewards: Mapping[str, Reward],
        start: int = 0,
        *,
        rolling: bool = False,
    ) -> list[Sample]:
        """``samples`` with a :class:`DecodedLatent` as the ``image`` (or ``video``) of each sample that has a
        latent, lacks those pixels and is routed to a reward of ``specs`` that takes them; the others as they are.
        Nothing is decoded here; the latents are checked (InputError naming ``latent`` and the sample, numbered
        from ``start``). The handles of one call share one batch; with ``rolling``, the samples of several calls
        share it until its first read (per-sample calls gathered into batches: one decode for all that arrived)."""
        wants = [(spec, set(rewards[spec.name].inputs.fields)) for spec in specs]
        chosen: list[tuple[int, str]] = []
        for i, sample in enumerate(samples):
            if sample.latent is None:
                continue
            fld = PIXEL_FIELDS.get(getattr(sample.latent, "ndim", 0))
            if fld is None or getattr(sample, fld) is not None:
                continue
            if any(fld in fields and spec.applies_to(sample.dataset) for spec, fields in wants):
                chosen.append((i, fld))
        if not chosen:
            return list(samples)
        batch = self._rolling if rolling else DecodeBatch(self)
        out = list(samples)
        for i, fld in chosen:
            raw = out[i].latent
            handle = self._seen_handle(raw)
            if handle is None:
                try:
                    latent = self.check(raw)
                except InputError as exc:
                    raise exc.located(field="latent", sample=start + i) from None
                added = batch.add(latent)
                if added is None:  # the rolling batch was decoded meanwhile: the next one begins
                    batch = DecodeBatch(self)
                    added = batch.add(latent)
                handle = cast(DecodedLatent, added)  # a batch not decoded yet takes it
                if rolling:
                    self._rolling = batch
                self._remember(raw, handle)
            pixels: dict[str, Any] = {fld: handle}
            out[i] = replace(out[i], **pixels)
        return out

    def _seen_handle(self, raw: Any) -> DecodedLatent | None:
        """The handle a tensor was given by an earlier :meth:`attach`, while it lives and is unchanged."""
        with self._seen_lock:
            found = self._seen.get(id(raw))
        if found is None or found[0]() is not raw or getattr(raw, "_version", None) != found[1]:
            return None
        return found[2]

    def _remember(self, raw: Any, handle: DecodedLatent) -> None:
        if not isinstance(raw, self._torch.Tensor):
            return  # an array's memory may be reused for another latent: only tensors (and their versions) are kept
        key = id(raw)

        def forget(_: Any) -> None:
            with self._seen_lock:
                self._seen.pop(key, None)

        with self._seen_lock:
            self._seen[key] = (weakref.ref(raw, forget), raw._version, handle)
            while len(self._seen) > MAX_REMEMBERED:  # the oldest go first (a trainer keeping latents for long)
                self._seen.pop(next(iter(self._seen)))

    def check(self, latent: Any) -> Any:
        """``latent`` as a torch tensor the VAE can take (its axes ``(C, H, W)`` or ``(C, T, H, W)``); InputError
        naming what is wrong otherwise."""
        tensor = CONVERTERS["latent"](latent, None, None)  # floating point, 3 or 4 dimensions, finite
        shape = tuple(tensor.shape)
        if tensor.dtype not in (self._torch.float16, self._torch.bfloat16, self._torch.float32):
            raise InputError(f"latent dtype {tensor.dtype} is not float16, bfloat16 or float32")
        if tensor.dim() == 3:
            if shape[0] != self.channels:
                raise InputError(f"latent of shape {list(shape)} has {shape[0]} channels; {self._vae_words()}")
            return tensor
        layout = self.spec.layout
        if layout == "auto":
            first, second = shape[0] == self.channels, shape[1] == self.channels
            if first and second:
                raise InputError(
                    f"a video latent of shape {list(shape)} could be (T, C, H, W) or (C, T, H, W); "
                    "set the decode stage's layout"
                )
            layout = "CTHW" if first else "TCHW" if second else ""
        if layout == "TCHW" and shape[1] == self.channels:
            return tensor.transpose(0, 1)
        if layout == "CTHW" and shape[0] == self.channels:
            return tensor
        raise InputError(
            f"video latent of shape {list(shape)} has no {self.channels}-channel axis where layout "
            f"{self.spec.layout} puts it; {self._vae_words()}"
        )

    def _vae_words(self) -> str:
        return f"the decode stage's VAE ({self.class_name}, {self.spec.vae}) takes {self.channels}"

    # ------------------------------------------------------------------------------------------ decode
    def decode(self, latents: Sequence[Any]) -> list[Any]:
        """Pixels of checked latents (``(C, H, W)`` or ``(C, T, H, W)``, :meth:`check`): float32 CPU tensors in
        [0, 1], ``(3, H, W)`` and ``(T, 3, H, W)``; latents of one shape decoded ``batch_size`` at a time."""
        torch = self._torch
        out: list[Any] = [None] * len(latents)
        shapes: dict[tuple[int, ...], list[int]] = {}
        for i, latent in enumerate(latents):
            shapes.setdefault(tuple(latent.shape), []).append(i)
        size = self.spec.batch_size
        with self._lock, torch.no_grad():
            for members in shapes.values():
                for at in range(0, len(members), size):
                    chunk = members[at : at + size]
                    for i, pixels in zip(chunk, self._decode_chunk([latents[i] for i in chunk])):
                        out[i] = pixels
        return out

    def _decode_chunk(self, latents: list[Any]) -> list[Any]:
        torch = self._torch
        z = torch.stack(latents).to(self.device, self.dtype)  # (B, C, H, W) or (B, C, T, H, W)
        image = z.dim() == 4
        frames = 0
        if image and self.video_vae:
            z = z.unsqueeze(2)  # an image is one frame of a video VAE
        elif not image and not self.video_vae:
            frames = z.shape[2]  # the frames of a video latent, decoded by an image VAE as a batch of images
            z = z.permute(0, 2, 1, 3, 4).flatten(0, 1)
        shape = (1, -1) + (1,) * (z.dim() - 2)
        scale = self.scale if not isinstance(self.scale, torch.Tensor) else self.scale.view(shape)
        shift = self.shift if not isinstance(self.shift, torch.Tensor) else self.shift.view(shape)
        x = self.vae.decode(z / scale + shift).sample
        x = (x * 0.5 + 0.5).clamp(0, 1).float().cpu()
        if frames:
            x = x.unflatten(0, (-1, frames))  # (B, T, 3, H, W)
        elif x.dim() == 5:
            x = x.permute(0, 2, 1, 3, 4)  # (B, T, 3, H, W)
            if image:
                x = x[:, 0]
        return list(x.unbind(0))


# ---------------------------------------------------------------------------------------------- loading
_DECODERS: weakref.WeakKeyDictionary[Any, dict[DecodeSpec, LatentDecoder]] = weakref.WeakKeyDictionary()
_DECODERS_LOCK = threading.Lock()


def decoder_for(decode: DecodeSpec | Mapping[str, Any] | None, owner: Any = None) -> LatentDecoder | None:
    """The :class:`LatentDecoder` of a decode stage (None for none), built once per ``owner`` (a
    :class:`~rewardzoo.core.loader.RewardLoader`: the processors over one loader share the VAE)."""
    spec = parse_decode(decode)
    if spec is None:
        return None
    with _DECODERS_LOCK:
        cache = _DECODERS.setdefault(owner, {}) if owner is not None else {}
        found = cache.get(spec)
        if found is None:
            found = cache[spec] = LatentDecoder(spec)
        return found


def _load_vae(source: str, dtype: Any) -> tuple[Any, str, str]:
    """(the VAE module, its class name, the folder or id it was read from): a local diffusers folder, or a hub id
    ``org/repo`` or ``org/repo/subfolder``; safetensors only."""
    from ..shared.weights import loading

    folder, subfolder = source, None
    if not os.path.isdir(source):
        parts = source.strip("/").split("/")
        if len(parts) < 2 or source.startswith((".", "/", "~")):
            raise ConfigError(f"'{source}' is neither a local VAE folder nor a hub id", field="decode.vae")
        folder, subfolder = "/".join(parts[:2]), "/".join(parts[2:]) or None
    with loading(f"the decode stage's VAE config '{source}'", field="decode.vae"):
        if os.path.isdir(folder):
            config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
        else:
            from huggingface_hub import hf_hub_download

            config = json.loads(Path(hf_hub_download(folder, "config.json", subfolder=subfolder)).read_text("utf-8"))
    name = config.get("_class_name") if isinstance(config, dict) else None
    if name not in VAE_CLASSES:
        raise ConfigError(
            f"'{source}' holds a {name or 'model without _class_name'}, not one of the VAEs a decode stage "
            f"loads ({', '.join(VAE_CLASSES)})",
            field="decode.vae",
        )
    with loading(f"the decode stage's VAE '{source}' (safetensors only)", field="decode.vae"):
        import importlib

        vae = getattr(importlib.import_module("diffusers"), name).from_pretrained(
            folder, subfolder=subfolder, torch_dtype=dtype, use_safetensors=True
        )
    return vae, name, source


def _scale_and_shift(spec: DecodeSpec, config: Mapping[str, Any], channels: int, dtype: Any, device: str) -> Any:
    """(scale, shift): the configured numbers; else the VAE config's ``latents_mean`` / ``latents_std`` per
    channel (scale ``1 / std``, as the Wan pipeline), else its ``scaling_factor`` and ``shift_factor`` (0)."""
    import torch

    mean, std = config.get("latents_mean"), config.get("latents_std")
    if spec.scaling_factor is None and mean is not None and std is not None:
        scale = 1.0 / torch.tensor(std).to(device, dtype)
        shift = torch.tensor(mean).to(device, dtype) if spec.shift_factor is None else spec.shift_factor
        return scale, shift
    scale = spec.scaling_factor if spec.scaling_factor is not None else config.get("scaling_factor")
    if scale is None:
        raise ConfigError(
            f"the VAE config of '{spec.vae}' has no scaling_factor; give the decode stage's scaling_factor",
            field="decode.scaling_factor",
        )
    shift = spec.shift_factor if spec.shift_factor is not None else config.get("shift_factor") or 0.0
    return float(scale), float(shift)
