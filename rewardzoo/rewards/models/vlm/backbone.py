"""The one local vision-language backbone of rewardzoo: Qwen2-VL, Qwen2.5-VL, Qwen3-VL and LLaVA-OneVision through
transformers.

The example downloads a 7B checkpoint and needs a GPU (that is its point), so it does not run in the tests:

>>> bb = load_vlm("Qwen/Qwen2.5-VL-7B-Instruct", device="cuda:0", dtype="bfloat16")      # doctest: +SKIP
>>> q = VLMQuery.of('Does this figure show "a cat"? Please answer Yes or No.', image=pil)  # doctest: +SKIP
>>> bb.answer_logprobs([q], ["Yes", "No"])    # (1, 2) log P(first answer token)           # doctest: +SKIP
>>> bb.generate([q], max_new_tokens=64)       # ["Yes"]  (greedy)                          # doctest: +SKIP

What a reward does with it:

- a :class:`VLMQuery` is one user turn: its ``content`` (text, images and videos, in order) and an
  optional system prompt; :meth:`VLMBackbone.render` turns it into the model's own chat-template text
  with the generation prompt (``<|im_start|>assistant\\n`` for Qwen);
- :meth:`VLMBackbone.encode` builds one **left-padded** batch (the processor's tokenizer, image and video
  processors), so the last position of every row is its first answer position;
- :meth:`VLMBackbone.last_logits` / :meth:`answer_logprobs`: one forward pass, the log-softmax over the
  whole vocabulary at that position, for the first token of each given answer (VQAScore);
- :meth:`VLMBackbone.generate`: batched greedy decoding with a token limit (judges that write a verdict).
- :meth:`VLMBackbone.forward`: the raw model call on an encoded batch (hidden states for reward heads).

Media arrive as RGB PIL images and video frames already sampled by the video layer (``Inputs(frames=
"pil", num_frames=K)``); ``fps`` of a :class:`Video` is the rate those frames represent (Qwen2.5-VL and
Qwen3-VL place frames in time with it). Image and video sizes follow the processor's pixel bounds
(``min_pixels`` / ``max_pixels``, per query batch: :class:`PixelBounds`), as qwen-vl-utils does.

Loading: ``model_path`` is a hub id or a local directory holding a transformers checkpoint whose
``model_type`` is one of :data:`SUPPORTED_MODEL_TYPES`, with its processor files (or ``processor_path``),
or an original LLaVA-NeXT checkpoint (LLaVA-OneVision in that code's layout, mapped on load by
:mod:`~rewardzoo.rewards.models.vlm.llava_checkpoint`).
Loaded backbones are cached per process (weakly, keyed by :func:`backbone_key`: weights, processor,
device, dtype, attention implementation, remote code), so two rewards naming the same model share one
copy in memory. ``dtype=None`` means bfloat16 on CUDA and float32 elsewhere. A prompt longer than the
model's context is an :class:`~rewardzoo.errors.InputError` naming the sample (no silent truncation:
cutting would remove image tokens or the question).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ....errors import ConfigError, InputError
from ....shared.device import canonical_dtype, torch_dtype
from ....shared.weights import cannot_wake, loading

#: ``config.json`` model types this layer renders and batches (transformers 5.x ships all of them).
SUPPORTED_MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "llava_onevision")

_CACHE: weakref.WeakValueDictionary[Hashable, VLMBackbone] = weakref.WeakValueDictionary()
_CACHE_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------------ queries


@dataclass(frozen=True)
class Video:
    """One video of a query: its sampled frames (RGB PIL, equal sizes) and the rate they represent."""

    frames: tuple[Any, ...]
    fps: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames", tuple(self.frames))
        if not self.frames:
            raise InputError("the video has no frames", field="video")
        if not (isinstance(self.fps, (int, float)) and self.fps > 0):
            raise InputError(f"fps must be a positive number, got {self.fps!r}", field="video")


@dataclass(frozen=True)
class VLMQuery:
    """One user turn for a VLM: ``content`` parts in order (``str`` text, a PIL image, a :class:`Video`),
    an optional ``system`` prompt (None: the chat template's default, e.g. Qwen2-VL's "You are a helpful
    assistant.") and ``answer_prefix``, text placed after the generation prompt (the start of the answer).
    """

    content: tuple[Any, ...]
    system: str | None = None
    answer_prefix: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", tuple(self.content))

    @classmethod
    def of(
        cls,
        text: str,
        *,
        image: Any = None,
        images: Sequence[Any] = (),
        video: Video | None = None,
        system: str | None = None,
        media_first: bool = True,
    ) -> VLMQuery:
        """The common query: media (``image``, then ``images``, then ``video``) and one text, media first
        (the order of t2v_metrics, UnifiedReward and HPSv3) unless ``media_first=False``."""
        media: list[Any] = (
            ([image] if image is not None else []) + list(images) + ([video] if video is not None else [])
        )
        return cls(tuple(media + [text]) if media_first else tuple([text] + media), system=system)

    @property
    def images(self) -> list[Any]:
        return [p for p in self.content if not isinstance(p, (str, Video))]

    @property
    def videos(self) -> list[Video]:
        return [p for p in self.content if isinstance(p, Video)]

    def messages(self) -> list[dict[str, Any]]:
        """The query as chat messages in the transformers / OpenAI content-part layout (media as placeholders)."""
        parts: list[dict[str, Any]] = []
        for p in self.content:
            if isinstance(p, str):
                parts.append({"type": "text", "text": p})
            elif isinstance(p, Video):
                parts.append({"type": "video"})
            else:
                parts.append({"type": "image"})
        out = (
            [{"role": "system", "content": [{"type": "text", "text": self.system}]}] if self.system is not None else []
        )
        return out + [{"role": "user", "content": parts}]


@dataclass(frozen=True)
class PixelBounds:
    """Per-image (and per-frame) pixel bounds of the Qwen processors' smart resize (None: the processor's)."""

    min_pixels: int | None = None
    max_pixels: int | None = None
    video_min_pixels: int | None = None
    video_max_pixels: int | None = None

    def image_kwargs(self, processor: Any = None) -> dict[str, Any]:
        """``{"size": ...}`` for an image processor call ({} when both bounds are the processor's own)."""
        return _size_kwargs(self.min_pixels, self.max_pixels, processor)

    def video_kwargs(self, processor: Any = None) -> dict[str, Any]:
        """``{"size": ...}`` for a video processor call ({} when both bounds are the processor's own)."""
        return _size_kwargs(self.video_min_pixels, self.video_max_pixels, processor)


def _size_kwargs(lo: int | None, hi: int | None, processor: Any) -> dict[str, Any]:
    if lo is None and hi is None:
        return {}
    own = getattr(processor, "size", None) or {}
    get = own.get if isinstance(own, dict) else (lambda k: getattr(own, k, None))
    shortest = lo if lo is not None else get("shortest_edge")
    longest = hi if hi is not None else get("longest_edge")
    size = {"shortest_edge": shortest, "longest_edge": longest}
    if shortest is None or longest is None:
        raise ConfigError(
            f"the processor states no pixel bounds to complete {size}; give both min and max pixels",
            field="kwargs.max_pixels",
        )
    if shortest > longest:
        raise ConfigError(f"min_pixels {shortest} is above max_pixels {longest}", field="kwargs.min_pixels")
    return {"size": size}


# ----------------------------------------------------------------------------------------------- backbone


class VLMBackbone:
    """A loaded Qwen-VL or LLaVA-OneVision model with its processor; thread-safe (one lock around processor and
    model calls).

    Public surface (stable; the VLM rewards build on it): ``render``, ``encode``, ``forward``,
    ``last_logits``, ``answer_logprobs``, ``first_token_ids``, ``generate``, ``decode``; attributes
    ``model``, ``processor``, ``tokenizer``, ``model_type``, ``device``, ``dtype``, ``source``,
    ``max_length`` (the context length), ``lock``.
    """

    def __init__(
        self, model: torch.nn.Module, processor: Any, *, source: str, device: torch.device | str, dtype: torch.dtype
    ) -> None:
        self.model = model
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.source = source
        self.device = torch.device(device)
        self.dtype = dtype
        config = model.config
        self.model_type = getattr(config, "model_type", "")
        text_config = getattr(config, "text_config", config)
        self.max_length = int(getattr(text_config, "max_position_embeddings", 0) or 0) or None
        self.lock = threading.RLock()  # fast tokenizers and generate() are not safe to share between threads

    def __repr__(self) -> str:
        return (
            f"VLMBackbone(model_type={self.model_type!r}, source={self.source!r}, device={str(self.device)!r}, "
            f"dtype={self.dtype})"
        )

    # -- prompts ----------------------------------------------------------------------------------------
    def render(self, query: VLMQuery) -> str:
        """The chat-template text of one query, ending with the generation prompt (+ ``answer_prefix``)."""
        with self.lock:
            return render_query(self.processor, query)

    def encode(
        self,
        queries: Sequence[VLMQuery],
        *,
        pixels: PixelBounds = PixelBounds(),
        images_kwargs: Mapping[str, Any] | None = None,
        videos_kwargs: Mapping[str, Any] | None = None,
        field: str = "prompt",
    ) -> Any:
        """A left-padded batch (``BatchFeature`` on this device) of ``queries``: :func:`encode_queries` with
        this backbone's processor, context length and device, under its lock."""
        with self.lock:
            return encode_queries(
                self.processor,
                queries,
                device=self.device,
                max_length=self.max_length,
                pixels=pixels,
                images_kwargs=images_kwargs,
                videos_kwargs=videos_kwargs,
                field=field,
            )

    # -- forward passes -----------------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, batch: Any, **kwargs: Any) -> Any:
        """The model called on an encoded batch (``output_hidden_states=True`` etc. pass through)."""
        with self.lock:
            return self.model(**batch, **kwargs)

    @torch.no_grad()
    def last_logits(
        self,
        queries: Sequence[VLMQuery],
        *,
        pixels: PixelBounds = PixelBounds(),
        images_kwargs: Mapping[str, Any] | None = None,
    ) -> torch.Tensor:
        """float32 logits (B, V) at the first answer position of each query (one forward pass)."""
        batch = self.encode(queries, pixels=pixels, images_kwargs=images_kwargs)
        out = self.forward(batch, logits_to_keep=1, use_cache=False)
        return out.logits[:, -1, :].float()

    def first_token_ids(self, answers: Sequence[str]) -> list[int]:
        """The first token of each answer as the tokenizer encodes it after the generation prompt
        (``encode(answer, add_special_tokens=False)[0]``, the token t2v_metrics scores)."""
        ids = []
        with self.lock:
            for a in answers:
                tokens = self.tokenizer.encode(a, add_special_tokens=False)
                if not tokens:
                    raise ConfigError(f"the answer {a!r} encodes to no tokens", field="kwargs.answer")
                ids.append(int(tokens[0]))
        return ids

    @torch.no_grad()
    def first_scores(
        self,
        queries: Sequence[VLMQuery],
        *,
        pixels: PixelBounds = PixelBounds(),
        images_kwargs: Mapping[str, Any] | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> torch.Tensor:
        """float32 (B, V): the scores ``generate(max_new_tokens=1, do_sample=False, output_scores=True)``
        reports for the first answer token, i.e. the logits after the logits processors the checkpoint's
        generation config sets for greedy decoding (``repetition_penalty`` etc.; left padding is ignored by
        them), as t2v_metrics reads them. Equal to :meth:`last_logits` when the config sets none. With
        ``sampling`` (e.g. ``{"temperature": 0.7}``) the scores of ``generate(do_sample=True, **sampling)``
        instead: the logits divided by the temperature, then the sampling warpers of the checkpoint's generation
        config (its ``top_k``, transformers' default 50, ``top_p``, ...), masked tokens at -inf; the token
        drawn is discarded and torch's global random state is left as it was."""
        batch = self.encode(queries, pixels=pixels, images_kwargs=images_kwargs)
        decoding: dict[str, Any] = (
            {"do_sample": False, "temperature": 1.0, "top_p": None, "top_k": None}
            if sampling is None
            else {"do_sample": True, **sampling}
        )
        with self.lock, torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            out = self.model.generate(
                **batch,
                max_new_tokens=1,
                num_beams=1,
                **decoding,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return out.scores[0].float()

    def answer_logprobs(
        self,
        queries: Sequence[VLMQuery],
        answers: Sequence[str],
        *,
        pixels: PixelBounds = PixelBounds(),
        temperature: float = 1.0,
        processed: bool = False,
        images_kwargs: Mapping[str, Any] | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> torch.Tensor:
        """float32 (B, len(answers)): ``log softmax(logits / temperature)`` over the whole vocabulary at the
        first answer position, at the first token of each answer; ``processed``: of :meth:`first_scores`
        instead of the raw logits (``sampling``: its sampled form); ``images_kwargs`` as :meth:`encode` takes
        them."""
        ids = self.first_token_ids(answers)
        if processed or sampling is not None:
            logits = self.first_scores(queries, pixels=pixels, images_kwargs=images_kwargs, sampling=sampling)
        else:
            logits = self.last_logits(queries, pixels=pixels, images_kwargs=images_kwargs)
        return torch.log_softmax(logits / float(temperature), dim=-1)[:, ids].cpu()

    @torch.no_grad()
    def generate(
        self,
        queries: Sequence[VLMQuery],
        *,
        max_new_tokens: int,
        pixels: PixelBounds = PixelBounds(),
        sampling: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Greedy answers (special tokens dropped, whitespace stripped), at most ``max_new_tokens`` tokens each;
        with ``sampling`` (``temperature``, ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``), sampled
        with those settings instead (torch's global generator)."""
        batch = self.encode(queries, pixels=pixels)
        decoding: dict[str, Any] = (
            {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
            if sampling is None
            else {"do_sample": True, **sampling}
        )
        with self.lock:
            out = self.model.generate(
                **batch,
                max_new_tokens=int(max_new_tokens),
                num_beams=1,
                **decoding,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self.decode(out[:, batch["input_ids"].shape[1] :])

    def decode(self, token_ids: torch.Tensor | Iterable[Sequence[int]]) -> list[str]:
        """Generated token ids (B, T) -> texts, special tokens dropped and whitespace stripped."""
        with self.lock:
            texts = self.tokenizer.batch_decode(token_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [t.strip() for t in texts]


def render_query(processor: Any, query: VLMQuery) -> str:
    """The processor's chat-template text of one query, ending with the generation prompt (+ ``answer_prefix``)."""
    text = processor.apply_chat_template(query.messages(), tokenize=False, add_generation_prompt=True)
    return text + query.answer_prefix


def encode_queries(
    processor: Any,
    queries: Sequence[VLMQuery],
    *,
    device: str | torch.device = "cpu",
    max_length: int | None = None,
    pixels: PixelBounds = PixelBounds(),
    images_kwargs: Mapping[str, Any] | None = None,
    videos_kwargs: Mapping[str, Any] | None = None,
    field: str = "prompt",
) -> Any:
    """One **left-padded** batch (``BatchFeature`` on ``device``) of ``queries`` through a Qwen-VL processor.

    Images go to the image processor with ``pixels``' bounds, videos (their frames as given, no resampling)
    to the video processor with their ``fps`` as metadata and qwen-vl-utils' per-frame pixel cap;
    ``images_kwargs`` / ``videos_kwargs`` are added last (e.g. ``{"do_resize": False}`` for media resized by
    the caller). Not thread-safe (the tokenizer's padding side is switched for the call): hold a lock, as
    :meth:`VLMBackbone.encode` does. Raises InputError naming the sample when a prompt with its image and
    video tokens is longer than ``max_length``.
    """
    if not queries:
        raise InputError("no queries to encode", field=field)
    texts = [render_query(processor, q) for q in queries]
    images = [img for q in queries for img in q.images]
    videos = [v for q in queries for v in q.videos]
    kwargs: dict[str, Any] = {}
    if images:
        kwargs["images"] = images
        kwargs["images_kwargs"] = {**pixels.image_kwargs(processor.image_processor), **(images_kwargs or {})}
    if videos:
        vp = processor.video_processor
        kwargs["videos"] = [list(v.frames) for v in videos]
        kwargs["videos_kwargs"] = {
            **pixels.video_kwargs(vp),
            "do_sample_frames": False,
            "video_metadata": [_metadata(v) for v in videos],
        }
        if hasattr(vp, "cap_pixels_per_frame"):  # the per-frame pixel cap of qwen-vl-utils (the reference)
            kwargs["videos_kwargs"]["cap_pixels_per_frame"] = True
        kwargs["videos_kwargs"].update(videos_kwargs or {})
    tokenizer = processor.tokenizer
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        batch = processor(text=texts, padding=True, return_tensors="pt", **kwargs)
    finally:
        tokenizer.padding_side = padding_side
    if max_length is not None:
        lengths = batch["attention_mask"].sum(dim=1)
        too_long = torch.nonzero(lengths > max_length).flatten().tolist()
        if too_long:
            i = too_long[0]
            raise InputError(
                f"the prompt with its image/video tokens is {int(lengths[i])} tokens long, more than the "
                f"model's context of {max_length} ({len(too_long)} sample(s)); shorten the prompt or "
                "lower max_pixels / num_frames",
                field=field,
                sample=i,
            )
    return batch.to(device)


def _metadata(video: Video) -> dict[str, Any]:
    n = len(video.frames)
    return {
        "fps": float(video.fps),
        "total_num_frames": n,
        "duration": n / float(video.fps),
        "frames_indices": list(range(n)),
    }


# ----------------------------------------------------------------------------------------------- loading


def default_dtype(device: str | torch.device) -> str:
    """bfloat16 on CUDA, float32 elsewhere (the default of :func:`load_vlm` when ``dtype`` is None)."""
    return "bfloat16" if torch.device(device).type == "cuda" else "float32"


def backbone_key(
    model_path: str | os.PathLike,
    *,
    device: str | torch.device = "cpu",
    dtype: str | None = None,
    processor_path: str | os.PathLike | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
) -> tuple:
    """The identity two loads share a backbone by (absolute path for local directories)."""
    dtype_name = canonical_dtype(dtype) if dtype is not None else default_dtype(device)
    return (
        _source(model_path),
        _source(processor_path) if processor_path else None,
        str(torch.device(device)),
        dtype_name,
        attn_implementation,
        bool(trust_remote_code),
    )


def load_vlm(
    model_path: str | os.PathLike,
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
    processor_path: str | os.PathLike | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    cache: bool = True,
) -> VLMBackbone:
    """Load (or fetch from the process cache) a Qwen-VL backbone and its processor.

    ``model_path``: hub id or local directory (``config.json`` with a model type from
    :data:`SUPPORTED_MODEL_TYPES`, safetensors weights). ``processor_path``: where the tokenizer, chat
    template and image/video processor configs are (default ``model_path``). ``attn_implementation``:
    ``sdpa`` (transformers' default), ``eager`` or ``flash_attention_2``. ``trust_remote_code`` only when
    a config asks. Raises ConfigError naming ``model_path`` when the checkpoint cannot be loaded.
    """
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    key = backbone_key(
        model_path,
        device=device,
        dtype=dtype,
        processor_path=processor_path,
        attn_implementation=attn_implementation,
        trust_remote_code=trust_remote_code,
    )
    if not cache:
        return _load(key)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is None or cannot_wake(found):  # a fresh load, not weights that cannot wake
            found = _load(key)
            _CACHE[key] = found
        return found


def load_vlm_processor(path: str | os.PathLike, *, trust_remote_code: bool = False, field: str = "model_path") -> Any:
    """``AutoProcessor.from_pretrained(path)`` (tokenizer, chat template, image and video processors) with a
    ConfigError naming ``field`` when it cannot be loaded or has no chat template. For rewards that build
    their own model around a Qwen-VL (reward heads) and wrap it as ``VLMBackbone(model, processor, ...)``."""
    from transformers import AutoProcessor

    with loading(f"the processor (tokenizer, chat template, image/video processor) from '{path}'", field=field):
        processor = AutoProcessor.from_pretrained(_source(path), trust_remote_code=trust_remote_code)
    if (
        getattr(processor, "chat_template", None) is None
        and getattr(processor.tokenizer, "chat_template", None) is None
    ):
        raise ConfigError(f"the processor of '{path}' has no chat template", field=field)
    return processor


def _source(path: str | os.PathLike) -> str:
    text = os.fspath(path)
    expanded = os.path.expanduser(text)
    return os.path.abspath(expanded) if os.path.isdir(expanded) else text


def _load(key: tuple) -> VLMBackbone:
    from . import llava_checkpoint

    source, processor_source, device, dtype_name, attn, trust = key
    original = llava_checkpoint.read_config(source)
    if original is not None and llava_checkpoint.is_original(original):
        model, processor = llava_checkpoint.load_original(
            source, original, dtype=torch_dtype(dtype_name), attn_implementation=attn
        )
    else:
        model, processor = _load_transformers(source, dtype_name, attn, trust), None
    if processor_source or processor is None:
        processor = load_vlm_processor(
            processor_source or source,
            trust_remote_code=trust,
            field="kwargs.processor_path" if processor_source else "model_path",
        )
    model = model.to(device).eval().requires_grad_(False)
    return VLMBackbone(model, processor, source=source, device=device, dtype=torch_dtype(dtype_name))


def _load_transformers(source: str, dtype_name: str, attn: str | None, trust: bool) -> torch.nn.Module:
    """A checkpoint in transformers' layout whose model type is one of :data:`SUPPORTED_MODEL_TYPES`."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    with loading(f"the model config of '{source}'", verb="read"):
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"'{source}' is a '{model_type}' model; the VLM layer supports "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} and original LLaVA-NeXT (LLaVA-OneVision) "
            "checkpoints",
            field="model_path",
        )
    extra = {"attn_implementation": attn} if attn else {}
    with loading(f"the VLM '{source}'"):
        return AutoModelForImageTextToText.from_pretrained(
            source, dtype=torch_dtype(dtype_name), trust_remote_code=trust, **extra
        )


__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "Video",
    "VLMQuery",
    "PixelBounds",
    "VLMBackbone",
    "render_query",
    "encode_queries",
    "default_dtype",
    "backbone_key",
    "load_vlm",
    "load_vlm_processor",
]
