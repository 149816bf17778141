"""The two backends of the VLM judges behind one surface, chosen in YAML with ``backend:``.

- ``backend: transformers`` (default): :class:`LocalVLM`, a :class:`~rewardzoo.rewards.models.vlm.backbone.VLMBackbone`
  loaded from ``model_path`` (shared with every other reward naming the same model, dtype and device);
  one left-padded batch per call.
- ``backend: openai``: :class:`~rewardzoo.rewards.models.vlm.endpoint.OpenAIVLM`, any OpenAI-compatible
  chat-completions server, configured by ``endpoint: {url, model, api_key_env, ...}``.

Both answer ``generate(queries, max_new_tokens=N) -> [text | Failure]`` (greedy; ``request=``: a reference's
chat-completions decoding fields, sent as they are by the endpoint, decoded as vLLM would locally) and
``answer_probs(queries, answers) -> [probabilities (K,) | Failure]``; the judge turns those into scores
with its parse rule and failure policy (:mod:`rewardzoo.rewards.models.vlm.judging`); ``io_bound`` says whether the
judge's calls wait on a server (the endpoint) and so may overlap with the other streams (``Reward.io_bound``). The local backend never
produces a Failure: an exception there is a bug or bad input and is raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError
from ....shared.options import choice, positive_int
from .backbone import PixelBounds, VLMBackbone, VLMQuery, load_vlm
from .judging import Failure

BACKENDS = ("transformers", "openai")


class LocalVLM:
    """A loaded backbone as a judge backend; ``pixels`` bounds images and frames (None: the processor's)."""

    kind = "transformers"
    io_bound = False

    def __init__(self, backbone: VLMBackbone, pixels: PixelBounds = PixelBounds()) -> None:
        self.backbone = backbone
        self.pixels = pixels

    @property
    def identity(self) -> tuple:
        return ("transformers", self.backbone.source, str(self.backbone.device), str(self.backbone.dtype))

    def generate(
        self, queries: Sequence[VLMQuery], *, max_new_tokens: int, request: Mapping[str, Any] | None = None
    ) -> list[str | Failure]:
        """Greedy answers; with ``request`` (a chat-completions body's decoding fields), decoded as vLLM
        decodes that request (:func:`served_sampling`), ``max_tokens`` in it taking ``max_new_tokens``' place."""
        if request is None:
            return list(self.backbone.generate(queries, max_new_tokens=max_new_tokens, pixels=self.pixels))
        sampling = served_sampling(self.backbone.model.generation_config, request)
        return list(
            self.backbone.generate(
                queries,
                max_new_tokens=int(request.get("max_tokens", max_new_tokens)),
                pixels=self.pixels,
                sampling=sampling,
            )
        )

    def answer_probs(
        self,
        queries: Sequence[VLMQuery],
        answers: Sequence[str],
        *,
        processed: bool = False,
        resized: bool = False,
        sampling: Mapping[str, Any] | None = None,
    ) -> list[np.ndarray | Failure]:
        """``processed``: from the scores ``generate(output_scores=True)`` reports (the checkpoint's
        generation-config processors applied); ``sampling`` (e.g. ``{"temperature": 0.7}``): from those of
        ``generate(do_sample=True, **sampling)``; ``resized``: the images are already at their final size (the
        processor does not resize them)."""
        logp = self.backbone.answer_logprobs(
            queries,
            answers,
            pixels=self.pixels,
            processed=processed,
            images_kwargs={"do_resize": False} if resized else None,
            sampling=sampling,
        )
        return list(logp.double().exp().numpy())

    def close(self) -> None:
        """Nothing to release: the backbone cache lets the model go once no reward holds it."""


def build_backend(
    owner: str,
    *,
    backend: str = "transformers",
    endpoint: Mapping[str, Any] | None = None,
    model_path: str | None,
    device: str,
    dtype: str | None,
    default_model: str | None = None,
    processor_path: str | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> Any:
    """The backend a reward's options ask for.

    ``backend: transformers``: :func:`~rewardzoo.rewards.models.vlm.backbone.load_vlm` of ``model_path`` (else
    ``default_model``) with ``processor_path``, ``attn_implementation``, ``trust_remote_code``; ``min_pixels``
    / ``max_pixels`` bound every image and video frame. ``backend: openai``: :class:`OpenAIVLM` from the
    ``endpoint`` mapping (its ``model`` defaults to ``model_path``, else ``default_model``). ConfigError
    naming the option on a bad value, or for an option of the other backend.
    """
    backend = choice(backend, "kwargs.backend", BACKENDS)
    local = {
        k: v
        for k, v in (
            ("processor_path", processor_path),
            ("attn_implementation", attn_implementation),
            ("min_pixels", min_pixels),
            ("max_pixels", max_pixels),
        )
        if v is not None
    }
    if trust_remote_code:
        local["trust_remote_code"] = trust_remote_code
    if backend == "openai":
        from .endpoint import OpenAIVLM

        if local:
            raise ConfigError(
                f"{owner}: {sorted(local)} apply to backend 'transformers' only; the endpoint server "
                "owns its model and processor",
                field="kwargs.backend",
            )
        return OpenAIVLM.from_options(
            endpoint if endpoint is not None else {}, owner=owner, default_model=model_path or default_model
        )
    if endpoint is not None:
        raise ConfigError(f"{owner}: 'endpoint' needs backend: openai", field="kwargs.endpoint")
    path = model_path or default_model
    if path is None:
        raise ConfigError(
            f"{owner}: set model_path (a hub id or a local directory of a Qwen-VL or LLaVA-OneVision checkpoint)",
            field="model_path",
        )
    lo = positive_int(min_pixels, "kwargs.min_pixels", allow_none=True)
    hi = positive_int(max_pixels, "kwargs.max_pixels", allow_none=True)
    if not isinstance(trust_remote_code, bool):
        raise ConfigError(
            f"{owner}: trust_remote_code must be true or false, got {trust_remote_code!r}",
            field="kwargs.trust_remote_code",
        )
    backbone = load_vlm(
        path,
        device=device,
        dtype=dtype,
        processor_path=processor_path,
        attn_implementation=attn_implementation,
        trust_remote_code=trust_remote_code,
    )
    if backbone.model_type == "llava_onevision" and (lo is not None or hi is not None):
        raise ConfigError(
            f"{owner}: min_pixels / max_pixels bound the Qwen-VL resize; LLaVA-OneVision ('{path}') "
            "tiles each image on its grid pinpoints instead",
            field="kwargs.max_pixels",
        )
    return LocalVLM(backbone, PixelBounds(min_pixels=lo, max_pixels=hi, video_min_pixels=lo, video_max_pixels=hi))


#: The sampling a vLLM server applies to a chat-completions request that leaves a field out (vLLM's defaults).
VLLM_DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}


def served_sampling(generation_config: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling settings vLLM (``--generation-config auto``, its default) gives ``request``: each of
    :data:`VLLM_DEFAULT_SAMPLING`'s fields from the request, else from the checkpoint's generation config
    where it sets one (``to_diff_dict()``, as vLLM reads it), else vLLM's default. Fields the request
    names that are not chat-completions fields (e.g. ``do_sample``) change nothing, as on the server.
    Off is spelled as transformers reads it: ``top_k`` 0 (None would mean its default 50), ``min_p`` None."""
    own = generation_config.to_diff_dict() if generation_config is not None else {}
    settings = {}
    for key, default in VLLM_DEFAULT_SAMPLING.items():
        value = request.get(key, own.get(key))
        settings[key] = default if value is None else value
    settings["top_k"] = max(int(settings["top_k"]), 0)  # vLLM's -1 is off too
    settings["min_p"] = float(settings["min_p"]) if settings["min_p"] else None
    return settings


def check_no_options(owner: str, options: Mapping[str, Any]) -> None:
    """ConfigError when kwargs are left that nothing read (a typo should not pass silently)."""
    if options:
        raise ConfigError(f"{owner}: unknown option(s) {sorted(options)}", field="kwargs")


__all__ = ["BACKENDS", "LocalVLM", "VLLM_DEFAULT_SAMPLING", "build_backend", "check_no_options", "served_sampling"]
