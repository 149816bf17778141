"""The one CLIP backbone loader of rewardzoo: open_clip and transformers behind one small interface.

The example downloads OpenAI's CLIP weights (that is its point), so it does not run in the tests:

>>> bb = load_clip_backbone("ViT-B-32", pretrained="openai", device="cpu", dtype="float32")  # doctest: +SKIP
>>> img = bb.encode_images([pil_image])          # (1, D) float32, L2-normalised      # doctest: +SKIP
>>> txt = bb.encode_text(["a cat", "a dog"])     # (2, D) float32, L2-normalised      # doctest: +SKIP

``model_path`` forms (``backend="auto"`` picks the backend from them):

- an open_clip architecture name (``ViT-B-32``, ``ViT-L-14``; ``/`` is read as ``-``) with a
  ``pretrained`` tag or weights file (a tag trained with QuickGELU, such as ``openai``, builds the
  model with QuickGELU; with a weights file use the ``-quickgelu`` architecture names where needed);
  an architecture without ``pretrained`` is refused unless a ``checkpoint`` (HPSv2) is loaded on top;
- a local directory laid out like an open_clip hub repository (``open_clip_config.json`` plus
  ``open_clip_model.safetensors``) -> open_clip;
- a local directory with a transformers ``config.json`` of ``model_type: clip`` -> transformers
  ``CLIPModel`` (tokenizer and image-processor settings from ``processor_path``, default the same path);
- ``hf-hub:org/repo`` -> open_clip; a bare hub id ``org/repo`` -> open_clip when the repository holds an
  ``open_clip_config.json``, else transformers (``backend=`` forces one).

Loaded backbones are cached per process (a weak, thread-safe cache keyed by backend, weights,
checkpoint, processor, device and dtype), so two rewards that name the same backbone share one model
in memory; the cache lets a model go once no reward holds it.

Speed notes. Images go through :mod:`rewardzoo.shared.image_ops` (batched uint8 resize on the model's
device). open_clip's ``encode_text`` always runs all 77 positions; CLIP's text tower is causal and
pools at the end-of-text token, so :meth:`ClipBackbone.encode_text` runs the same submodules on the
first ``L`` positions only (``L`` = the longest tokenised prompt in the call, positional embedding and
causal mask cut to ``L``), which gives the same embeddings several times faster. Text embeddings are
computed once per unique prompt within a call.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint, open_clip_pretrained, resolve_checkpoint
from ...shared.device import torch_dtype
from ...shared.image_ops import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PreprocessConfig,
    preprocess_images,
    preprocess_pixels,
)
from ...shared.weights import cannot_wake, loading
from ..options import RewardOptions, WeightPath

BACKENDS = ("auto", "open_clip", "transformers")

_CACHE: weakref.WeakValueDictionary[Hashable, ClipBackbone] = weakref.WeakValueDictionary()
_CACHE_LOCK = threading.Lock()


class ClipBackbone:
    """A loaded CLIP model (open_clip or transformers) with its tokenizer and preprocessing.

    Public surface (stable; the video rewards build on it):

    - ``encode_image(pixels)``: preprocessed pixels (N, 3, S, S) -> (N, D) float32, L2-normalised;
    - ``encode_images(images, config=None)``: raw images (PIL/tensors/arrays, or one (N, C, H, W)
      tensor) -> preprocess + ``encode_image``;
    - ``encode_pixels(pixels, config=None, gradient_checkpointing=False)``: differentiable, float
      pixels (N, 3, H, W) in [0, 1] -> (N, D), preprocessing in float (no 8-bit rounding, autograd on);
    - ``encode_text(texts)``: list of strings -> (N, D) float32, L2-normalised (once per unique text);
    - ``preprocess(images, config=None)``: the batched tensor preprocessing on this device;
    - ``preprocess_config`` (a :class:`PreprocessConfig`), ``image_size``, ``mean``, ``std``,
      ``embed_dim``, ``logit_scale`` (``exp`` of the learned temperature), ``backend``, ``model``,
      ``device``, ``dtype``.
    """

    def __init__(
        self,
        backend: str,
        model: torch.nn.Module,
        tokenizer: Any,
        preprocess_config: PreprocessConfig,
        device: torch.device,
        dtype: torch.dtype,
        source: str,
    ) -> None:
        self.backend = backend
        self.model = model
        self.tokenizer = tokenizer
        self.preprocess_config = preprocess_config
        self.device = device
        self.dtype = dtype
        self.source = source
        self._tok_lock = threading.Lock()  # HF fast tokenizers are not safe to call from several threads
        self.embed_dim = int(self._embed_dim())

    # -- preprocessing constants -------------------------------------------------------------------
    @property
    def image_size(self) -> int:
        return self.preprocess_config.size

    @property
    def mean(self) -> tuple[float, float, float]:
        return self.preprocess_config.mean

    @property
    def std(self) -> tuple[float, float, float]:
        return self.preprocess_config.std

    @property
    def logit_scale(self) -> float:
        """``exp(logit_scale)`` of the model (CLIP's learned inverse temperature, 100 for OpenAI CLIP)."""
        return float(self.model.logit_scale.detach().float().exp())

    def __repr__(self) -> str:
        return (
            f"ClipBackbone(backend={self.backend!r}, source={self.source!r}, device={str(self.device)!r}, "
            f"dtype={self.dtype}, image_size={self.image_size}, embed_dim={self.embed_dim})"
        )

    # -- images ------------------------------------------------------------------------------------
    def preprocess(
        self, images: Sequence[Any] | torch.Tensor, config: PreprocessConfig | None = None, *, field: str = "image"
    ) -> torch.Tensor:
        """Raw images -> (N, 3, S, S) model input on this device/dtype (see :mod:`image_ops`)."""
        return preprocess_images(
            images, config or self.preprocess_config, device=self.device, dtype=self.dtype, field=field
        )

    @torch.no_grad()
    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """Preprocessed pixels (N, 3, S, S) -> L2-normalised float32 features (N, D)."""
        return self.image_features(pixels.to(self.device, self.dtype))

    def image_features(self, pixels: torch.Tensor, *, keep_float64: bool = False) -> torch.Tensor:
        """The image tower on preprocessed pixels (N, 3, S, S) -> L2-normalised float32 features (N, D)
        (float64 ones from a float64 tower when ``keep_float64``, for gradient checks).

        No ``no_grad`` here: :meth:`encode_image` runs it without gradients, :meth:`encode_pixels` with
        them (the weights themselves are frozen, ``requires_grad=False``, so only the input gets a gradient).
        """
        if self.backend == "open_clip":
            feats = self.model.encode_image(pixels)
        else:
            pooled = self.model.vision_model(pixel_values=pixels).pooler_output
            feats = self.model.visual_projection(pooled)
        if keep_float64 and feats.dtype == torch.float64:
            return F.normalize(feats, dim=-1)
        return F.normalize(feats.float(), dim=-1)

    def encode_pixels(
        self, pixels: torch.Tensor, config: PreprocessConfig | None = None, *, gradient_checkpointing: bool = False
    ) -> torch.Tensor:
        """Differentiable: float pixels (N, 3, H, W) in [0, 1] -> L2-normalised float32 features (N, D).

        Preprocessing in float on the pixels' device (:func:`~rewardzoo.shared.image_ops.preprocess_pixels`:
        antialiased resize, centre crop or letterbox, normalise; no 8-bit rounding), then the image tower
        with autograd on, in the backbone's dtype (``dtype: float64`` for gradient checks).
        ``gradient_checkpointing``: recompute each vision transformer block in
        the backward pass instead of keeping its activations (less memory, about one more forward).
        """
        x = preprocess_pixels(pixels.to(self.device), config or self.preprocess_config, dtype=self.dtype)
        with _checkpointed(self) if gradient_checkpointing else contextlib.nullcontext():
            return self.image_features(x, keep_float64=True)

    def vision_blocks(self) -> list[torch.nn.Module]:
        """The transformer blocks of the image tower (what gradient checkpointing recomputes)."""
        if self.backend == "open_clip":
            blocks = getattr(getattr(self.model.visual, "transformer", None), "resblocks", None)
        else:
            blocks = getattr(getattr(self.model.vision_model, "encoder", None), "layers", None)
        if blocks is None:
            raise ConfigError(
                f"gradient checkpointing: no transformer blocks found in the image tower of {self.source!r}",
                field="kwargs",
            )
        return list(blocks)

    def encode_images(
        self,
        images: Sequence[Any] | torch.Tensor,
        config: PreprocessConfig | None = None,
        *,
        field: str = "image",
        chunk_size: int | None = None,
    ) -> torch.Tensor:
        """Raw images -> L2-normalised float32 features (N, D); ``chunk_size`` bounds one forward pass."""
        n = len(images)
        step = chunk_size or n
        outs = [
            self.encode_image(self.preprocess(images[i : i + step], config, field=field)) for i in range(0, n, step)
        ]
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    # -- text --------------------------------------------------------------------------------------
    def encode_text(self, texts: Sequence[str], *, field: str = "prompt") -> torch.Tensor:
        """Strings -> L2-normalised float32 features (N, D), each unique string encoded once."""
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"expected a string, got {type(t).__name__}", field=field, sample=i)
        if not texts:
            return torch.empty((0, self.embed_dim), dtype=torch.float32, device=self.device)
        unique = list(dict.fromkeys(texts))
        feats = self._encode_unique_text(unique)
        if len(unique) == len(texts):
            return feats
        pos = {t: i for i, t in enumerate(unique)}
        return feats[torch.tensor([pos[t] for t in texts], device=feats.device)]

    @torch.no_grad()
    def _encode_unique_text(self, texts: list[str]) -> torch.Tensor:
        if self.backend == "open_clip":
            with self._tok_lock:
                tokens = self.tokenizer(texts)
            feats = self._open_clip_text(tokens.to(self.device))
        else:
            with self._tok_lock:
                enc = self.tokenizer(
                    texts,
                    padding=True,
                    truncation=True,
                    return_tensors="pt",
                    max_length=self.model.config.text_config.max_position_embeddings,
                )
            out = self.model.text_model(
                input_ids=enc["input_ids"].to(self.device), attention_mask=enc["attention_mask"].to(self.device)
            )
            feats = self.model.text_projection(out.pooler_output)
        return F.normalize(feats.float(), dim=-1)

    def _open_clip_text(self, tokens: torch.Tensor) -> torch.Tensor:
        """open_clip text features, running only the positions up to the last end-of-text token."""
        m = self.model
        pool = getattr(m, "text_pool_type", None)
        mask = getattr(m, "attn_mask", None)
        # The shortcut needs the classic CLIP text tower: causal mask and pooling at the EOT token.
        if not (hasattr(m, "token_embedding") and mask is not None and pool in ("argmax", "eos")):
            return m.encode_text(tokens)
        if pool == "argmax":
            eot = tokens.argmax(dim=-1)
        else:
            eot = (tokens == m.text_eos_id).int().argmax(dim=-1)
        length = int(eot.max()) + 1
        cast = m.transformer.get_cast_dtype()
        x = m.token_embedding(tokens[:, :length]).to(cast) + m.positional_embedding[:length].to(cast)
        x = m.transformer(x, attn_mask=mask[:length, :length])
        x = m.ln_final(x)
        x = x[torch.arange(x.shape[0], device=x.device), eot]
        proj = m.text_projection
        if proj is None:
            return x
        return proj(x) if isinstance(proj, torch.nn.Linear) else x @ proj

    def _embed_dim(self) -> int:
        if self.backend == "transformers":
            return self.model.config.projection_dim
        proj = getattr(self.model, "text_projection", None)
        if isinstance(proj, torch.nn.Linear):
            return proj.out_features
        if proj is not None:
            return proj.shape[1]
        return getattr(self.model, "embed_dim", None) or self.model.visual.output_dim


_CKPT_STATE = threading.local()  # the blocks this thread runs checkpointed
_CKPT_LOCK = threading.Lock()
_CKPT_USERS: dict[int, int] = {}  # id(block) -> number of checkpointed calls running with its wrapper installed


def _block_forward(block: torch.nn.Module, forward: Any):
    """A block's forward that recomputes itself in the backward pass while this thread runs it checkpointed
    (and autograd is on); otherwise the plain forward (numerically identical either way)."""
    from torch.utils.checkpoint import checkpoint

    def run(*args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled() and id(block) in getattr(_CKPT_STATE, "blocks", ()):
            return checkpoint(forward, *args, use_reentrant=False, **kwargs)
        return forward(*args, **kwargs)

    return run


@contextlib.contextmanager
def _checkpointed(backbone: ClipBackbone):
    """Run ``backbone``'s vision blocks with activation checkpointing on this thread, for the duration.

    The wrapper lives on the blocks only while some thread is inside this context (so a model copied or
    saved later is the plain model); other threads and no-grad calls meanwhile run the plain forward.
    """
    blocks = backbone.vision_blocks()
    with _CKPT_LOCK:
        for block in blocks:
            if _CKPT_USERS.get(id(block), 0) == 0:
                block.forward = _block_forward(block, block.forward)
            _CKPT_USERS[id(block)] = _CKPT_USERS.get(id(block), 0) + 1
    active: frozenset[int] = getattr(_CKPT_STATE, "blocks", frozenset())
    _CKPT_STATE.blocks = active | {id(b) for b in blocks}
    try:
        yield
    finally:
        _CKPT_STATE.blocks = active
        with _CKPT_LOCK:
            for block in blocks:
                _CKPT_USERS[id(block)] -= 1
                if _CKPT_USERS[id(block)] == 0:
                    del _CKPT_USERS[id(block)]
                    block.__dict__.pop("forward", None)  # back to the class's forward


def load_clip_backbone(
    model_path: str | os.PathLike | None,
    *,
    backend: str = "auto",
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    pretrained: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    processor_path: str | os.PathLike | None = None,
    cache: bool = True,
) -> ClipBackbone:
    """Load (or fetch from the process cache) a CLIP backbone; see the module docstring for the forms.

    ``pretrained``: open_clip tag or weights file for an architecture name (ignored for directories and
    hub ids). ``checkpoint``: a state dict (``.safetensors`` or ``.pt``/``.pth``, loaded with
    ``weights_only=True``) loaded strictly on top of the model, e.g. the HPSv2 checkpoint.
    ``processor_path``: transformers only, where the tokenizer and image-processor configs live.
    ``cache=False`` always loads a fresh copy (and does not register it).
    Configuration problems raise :class:`~rewardzoo.errors.ConfigError` naming ``model_path``.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}", field="kwargs.backend")
    if model_path is None:
        raise ConfigError("a CLIP model_path is required", field="model_path")
    dev = torch.device(device)
    dt = torch_dtype(dtype) if isinstance(dtype, str) else dtype
    model_path = os.fspath(model_path)
    resolved_backend, source = _resolve(model_path, backend)
    ckpt = None if checkpoint is None else os.fspath(checkpoint)
    ckpt = str(Path(ckpt).resolve()) if ckpt is not None and Path(ckpt).exists() else ckpt
    proc = os.fspath(processor_path) if processor_path is not None else None
    arch = resolved_backend == "open_clip" and not source.startswith("hf-hub:") and not Path(source).is_dir()
    if arch and pretrained is None and checkpoint is None:  # an architecture name alone means random weights
        raise ConfigError(
            f"open_clip architecture '{model_path}' needs `pretrained` (a tag such as 'openai' or a "
            "weights file); refusing to score with random weights",
            field="model_path",
        )
    key = (
        resolved_backend,
        source,
        pretrained if arch else None,
        ckpt,
        proc,
        str(dev),
        str(dt),
    )
    pretrained = pretrained if arch else None
    if not cache:
        return _load(resolved_backend, source, model_path, pretrained, ckpt, proc, dev, dt)
    with _CACHE_LOCK:
        backbone = _CACHE.get(key)
        if backbone is None or cannot_wake(backbone):  # a fresh load, not weights that cannot wake
            backbone = _load(resolved_backend, source, model_path, pretrained, ckpt, proc, dev, dt)
            _CACHE[key] = backbone
        return backbone


def clip_weight_files(
    model_path: str | os.PathLike,
    *,
    backend: str = "auto",
    pretrained: str | None = None,
    checkpoint: str | os.PathLike | None = None,
) -> list[Checkpoint]:
    """The local files :func:`load_clip_backbone` would load for these arguments, found without loading or
    downloading anything: ``checkpoint`` when given (loaded over the whole model); else an architecture name's
    ``pretrained`` file (:func:`~rewardzoo.shared.checkpoints.open_clip_pretrained`), or the weights of a directory
    or hub id (``hf-hub:`` ids too) in the local cache."""
    if checkpoint is not None:
        return [resolve_checkpoint(os.fspath(checkpoint))]
    text = os.fspath(model_path)
    if text.startswith("hf-hub:"):
        return [resolve_checkpoint(text.removeprefix("hf-hub:"))]
    arch = None if Path(text).expanduser().exists() or backend == "transformers" else _open_clip_arch(text)
    if arch is None:
        return [resolve_checkpoint(text)]
    if pretrained is None:
        return [Checkpoint(text, missing=f"open_clip architecture '{text}' without `pretrained` names no weights")]
    return [open_clip_pretrained(arch, pretrained)]


class ClipOptions(RewardOptions):
    """The options of a reward over one CLIP backbone (:func:`load_clip_backbone`)."""

    pretrained: WeightPath | None = "openai"
    """open_clip's weights tag or a weights file, for a ``model_path`` naming an architecture (ignored for
    directories and hub ids)."""
    backend: Literal["auto", "open_clip", "transformers"] = "auto"
    """Which library builds the model (``auto``: by the files ``model_path`` holds)."""
    processor_path: WeightPath | None = None
    """transformers only: where the tokenizer and image-processor configs live (default ``model_path``)."""


def clip_reward_files(cls: Any, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
    """``weight_files`` of a reward over a CLIP backbone (bind it with ``classmethod``): the backbone's file for the
    entry's ``model_path`` (else the class's ``default_model``), ``backend`` and ``pretrained``."""
    return clip_weight_files(
        model_path or cls.default_model,
        backend=cls.configured(kwargs, "backend"),
        pretrained=cls.configured(kwargs, "pretrained"),
    )


def cached_backbones() -> list[ClipBackbone]:
    """The backbones currently alive in the process cache (for tests and diagnostics)."""
    with _CACHE_LOCK:
        return list(_CACHE.values())


def _resolve(model_path: str, backend: str) -> tuple[str, str]:
    """(backend, source) where source is a local absolute path, 'hf-hub:id', a hub id or an arch name."""
    path = Path(model_path).expanduser()
    if path.is_dir():
        src = str(path.resolve())
        has_oc = (path / "open_clip_config.json").is_file()
        has_hf = _is_hf_clip_dir(path)
        if backend == "open_clip" or (backend == "auto" and has_oc):
            if not has_oc:
                raise ConfigError(
                    f"'{model_path}' has no open_clip_config.json (expected an open_clip hub-style "
                    "directory: open_clip_config.json + open_clip_model.safetensors)",
                    field="model_path",
                )
            return "open_clip", src
        if backend == "transformers" or has_hf:
            if not (path / "config.json").is_file():
                raise ConfigError(
                    f"'{model_path}' has no config.json (expected a transformers CLIPModel directory)",
                    field="model_path",
                )
            return "transformers", src
        raise ConfigError(
            f"'{model_path}' is neither an open_clip directory (open_clip_config.json) nor a "
            "transformers CLIP directory (config.json with model_type 'clip')",
            field="model_path",
        )
    if path.exists():
        raise ConfigError(
            f"'{model_path}' is a file; give an open_clip architecture name with `pretrained: "
            "<file>`, or a model directory",
            field="model_path",
        )
    if model_path.startswith("hf-hub:"):
        if backend == "transformers":
            raise ConfigError(
                "'hf-hub:' ids are open_clip repositories; drop the prefix for transformers", field="model_path"
            )
        return "open_clip", model_path
    if backend != "transformers" and (arch := _open_clip_arch(model_path)) is not None:
        return "open_clip", arch
    if "/" not in model_path or model_path.count("/") > 1 or model_path.startswith((".", "/", "~")):
        raise ConfigError(
            f"'{model_path}' is not a local directory, a hub id (org/name) or an open_clip "
            "architecture (see open_clip.list_models())",
            field="model_path",
        )
    if backend == "open_clip":
        return "open_clip", "hf-hub:" + model_path
    if backend == "transformers":
        return "transformers", model_path
    return (
        ("open_clip", "hf-hub:" + model_path) if _hub_has_open_clip_config(model_path) else ("transformers", model_path)
    )


def _is_hf_clip_dir(path: Path) -> bool:
    cfg = path / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text()).get("model_type") == "clip"
    except (OSError, ValueError):
        return False


def _open_clip_arch(name: str) -> str | None:
    import open_clip

    cleaned = name.replace("/", "-")
    return cleaned if cleaned in open_clip.list_models() else None


def _hub_has_open_clip_config(repo_id: str) -> bool:
    try:
        from huggingface_hub import hf_hub_download

        hf_hub_download(repo_id, "open_clip_config.json")
        return True
    except Exception:  # offline, missing file, missing repo: fall back to transformers, which reports clearly
        return False


def _load(
    backend: str,
    source: str,
    model_path: str,
    pretrained: str | None,
    checkpoint: str | None,
    processor_path: str | None,
    device: torch.device,
    dtype: torch.dtype,
) -> ClipBackbone:
    if backend == "open_clip":
        model, tokenizer, pp = _load_open_clip(source, model_path, pretrained)
    else:
        model, tokenizer, pp = _load_transformers(source, model_path, processor_path)
    if checkpoint is not None:
        _load_checkpoint(model, checkpoint)
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return ClipBackbone(backend, model, tokenizer, pp, device, dtype, source)


def _load_open_clip(source: str, model_path: str, pretrained: str | None):
    import open_clip

    name = f"local-dir:{source}" if Path(source).is_dir() else source
    tag_cfg = (
        open_clip.get_pretrained_cfg(name, pretrained)
        if pretrained and not Path(str(pretrained)).exists() and not name.startswith(("local-dir:", "hf-hub:"))
        else {}
    )
    with loading(f"open_clip model '{model_path}'{f' (pretrained {pretrained!r})' if pretrained else ''}"):
        # open_clip 3.x only warns when a tag was trained with QuickGELU (OpenAI weights) but the architecture
        # config says GELU; the model would then silently compute different features. Follow the tag.
        model = open_clip.create_model(
            name,
            pretrained=pretrained,
            device="cpu",
            precision="fp32",
            force_quick_gelu=bool(tag_cfg.get("quick_gelu", False)),
        )
        tokenizer = open_clip.get_tokenizer(name)
    cfg = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
    size = cfg.get("size", getattr(model.visual, "image_size", 224))
    if isinstance(size, (tuple, list)):
        if size[0] != size[1]:
            raise ConfigError(f"non-square image size {tuple(size)} is not supported", field="model_path")
        size = size[0]
    pp = PreprocessConfig(
        size=int(size),
        mean=tuple(cfg.get("mean", OPENAI_CLIP_MEAN)),
        std=tuple(cfg.get("std", OPENAI_CLIP_STD)),
        resize_mode=cfg.get("resize_mode", "shortest"),
        interpolation=cfg.get("interpolation", "bicubic"),
        fill=int(cfg.get("fill_color", 0)),
    )
    return model, tokenizer, pp


def _load_transformers(source: str, model_path: str, processor_path: str | None):
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel

    proc = processor_path or source
    with loading(f"transformers CLIPModel '{model_path}'"):
        model = CLIPModel.from_pretrained(source)
    with loading(
        f"the CLIP tokenizer/image processor from '{proc}'",
        field="kwargs.processor_path" if processor_path else "model_path",
    ):
        tokenizer = AutoTokenizer.from_pretrained(proc)
        improc = CLIPImageProcessor.from_pretrained(proc)
    crop = improc.crop_size if getattr(improc, "do_center_crop", True) else improc.size
    size = next(
        v
        for v in (
            _size_field(crop, "height"),
            _size_field(crop, "shortest_edge"),
            crop if isinstance(crop, int) else None,
        )
        if v
    )
    resample = int(getattr(improc, "resample", 3))
    pp = PreprocessConfig(
        size=int(size),
        mean=tuple(improc.image_mean),
        std=tuple(improc.image_std),
        resize_mode="shortest",
        interpolation="bilinear" if resample == 2 else "bicubic",
    )
    return model, tokenizer, pp


def _size_field(size: Any, name: str) -> int | None:
    """A field of a transformers size spec (a dict in 4.x, a SizeDict in 5.x)."""
    value = size.get(name) if isinstance(size, dict) else getattr(size, name, None)
    return int(value) if value else None


def _load_checkpoint(model: torch.nn.Module, checkpoint: str) -> None:
    from ...shared.weights import load_state_dict, strip_prefix

    try:
        state = strip_prefix(load_state_dict(checkpoint))
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(
            f"checkpoint '{checkpoint}' does not fit the CLIP architecture: {exc}", field="model_path"
        ) from None


def check_pairs(**fields: Sequence[Any]) -> int:
    """Check that every given field has the same number of entries; return it.

    Raises :class:`InputError` naming the shorter field and the first sample without a partner,
    e.g. ``check_pairs(image=images, prompt=prompts)``.
    """
    items = list(fields.items())
    n_first = len(items[0][1])
    for name, values in items[1:]:
        if len(values) != n_first:
            short = name if len(values) < n_first else items[0][0]
            counts = ", ".join(f"{len(v)} {k}" for k, v in items)
            raise InputError(
                f"mismatched input counts ({counts}): each image needs exactly one {name}",
                field=short,
                sample=min(len(values), n_first),
            )
    return n_first
