"""The OpenAI-compatible endpoint backend of the VLM judges (vLLM, SGLang, ``transformers serve``, hosted APIs).

Each :class:`~rewardzoo.rewards.models.vlm.backbone.VLMQuery` becomes one ``POST {url}/chat/completions``:

- messages: the optional system turn, then one user turn whose content parts follow the query's order;
  an image is an ``image_url`` part with a base64 data URL (``data:image/png;base64,...``, or JPEG with
  ``image_format: jpeg``); a video is sent as its sampled frames, one ``image_url`` part per frame (what
  Pref-GRPO sends to its UnifiedReward-Think server);
- greedy decoding: ``temperature: 0``, ``max_tokens`` the judge's token limit (or, when a judge reproduces a
  reference's request, that request's fields as the reference sends them, e.g. Pref-GRPO's
  ``{"do_sample": false, "max_tokens": 4096}``: no temperature, so the server's default sampling applies);
- yes/no probabilities: ``max_tokens: 1, logprobs: true, top_logprobs: K`` and each answer's probability
  read from the first token's ``top_logprobs`` (``exp(logprob)`` of the entry whose token equals the answer,
  0 when it is not among the K).

Transport is :class:`~rewardzoo.transport.http.HttpClient` (retries with backoff on connection errors, 408,
429 and 5xx; a per-request ``timeout_s``; ``max_concurrency`` requests in flight). The API key is read
from the environment variable named by ``api_key_env`` and never logged. A request that still fails, a
body that is not the chat-completions JSON, or a refusal becomes a :class:`~rewardzoo.rewards.models.vlm.judging.Failure`
for that sample; the judge's failure policy decides what happens next.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError, HttpError
from ....shared.options import choice, positive_int
from ....transport.http import HttpClient, RetryPolicy, bearer_headers
from .backbone import Video, VLMQuery
from .judging import Failure

#: Keys of the ``endpoint:`` mapping in a reward's kwargs.
ENDPOINT_KEYS = (
    "url",
    "model",
    "api_key_env",
    "max_concurrency",
    "retries",
    "backoff_s",
    "max_backoff_s",
    "timeout_s",
    "image_format",
    "jpeg_quality",
    "top_logprobs",
)


def image_data_url(image: Any, *, image_format: str = "png", jpeg_quality: int = 95) -> str:
    """A PIL image as a base64 data URL (PNG, or JPEG at ``jpeg_quality``)."""
    buffer = io.BytesIO()
    if image_format == "jpeg":
        image.convert("RGB").save(buffer, format="JPEG", quality=jpeg_quality)
    else:
        image.save(buffer, format="PNG")
    return f"data:image/{image_format};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


class OpenAIVLM:
    """A chat-completions server behind the judges' backend surface (``generate``, ``answer_probs``).

    ``url``: the API base, e.g. ``http://127.0.0.1:8000/v1``; ``model``: the served model name.
    """

    kind = "openai"
    io_bound = True  # the judge's calls wait on the server (see Reward.io_bound)

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        max_concurrency: int = 8,
        policy: RetryPolicy | None = None,
        image_format: str = "png",
        jpeg_quality: int = 95,
        top_logprobs: int = 20,
        owner: str = "vlm",
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(
                f"{owner}: endpoint.model must name the served model, got {model!r}", field="kwargs.endpoint.model"
            )
        self.url, self.model, self.owner = url, model, owner
        self.image_format = choice(image_format, "kwargs.endpoint.image_format", ("png", "jpeg"))
        self.jpeg_quality = positive_int(jpeg_quality, "kwargs.endpoint.jpeg_quality")
        self.top_logprobs = positive_int(top_logprobs, "kwargs.endpoint.top_logprobs")
        self.client = HttpClient(
            url,
            policy=policy,
            headers=bearer_headers(api_key_env, owner=owner),
            max_concurrency=max_concurrency,
            label=f"{owner} endpoint",
        )

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, owner: str, default_model: str | None = None) -> OpenAIVLM:
        """Build from a reward's ``endpoint:`` mapping (keys :data:`ENDPOINT_KEYS`; ``model`` defaults to the
        reward's ``model_path``, the name vLLM serves a hub id under)."""
        if not isinstance(options, Mapping) or "url" not in options:
            raise ConfigError(
                f"{owner}: backend 'openai' needs kwargs.endpoint with at least 'url' (e.g. "
                "{url: http://127.0.0.1:8000/v1, model: NAME, api_key_env: MY_KEY})",
                field="kwargs.endpoint",
            )
        unknown = sorted(set(options) - set(ENDPOINT_KEYS))
        if unknown:
            raise ConfigError(
                f"{owner}: unknown key(s) {unknown} in endpoint; allowed: {', '.join(ENDPOINT_KEYS)}",
                field="kwargs.endpoint",
            )
        policy = RetryPolicy.from_options(options, owner=owner)
        rest = {
            k: options[k]
            for k in ("api_key_env", "max_concurrency", "image_format", "jpeg_quality", "top_logprobs")
            if k in options
        }
        return cls(str(options["url"]), options.get("model", default_model), policy=policy, owner=owner, **rest)

    @property
    def identity(self) -> tuple:
        return ("openai", self.url, self.model)

    def close(self) -> None:
        self.client.close()

    # -- requests -------------------------------------------------------------------------------------
    def messages(self, query: VLMQuery) -> list[dict[str, Any]]:
        """The chat-completions messages of one query (media as data URLs, in the query's order)."""
        parts: list[dict[str, Any]] = []
        for p in query.content:
            if isinstance(p, str):
                parts.append({"type": "text", "text": p})
            else:
                frames = p.frames if isinstance(p, Video) else (p,)
                parts.extend(
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": image_data_url(f, image_format=self.image_format, jpeg_quality=self.jpeg_quality)
                        },
                    }
                    for f in frames
                )
        system = [{"role": "system", "content": query.system}] if query.system is not None else []
        return system + [{"role": "user", "content": parts}]

    def _complete(
        self, query: VLMQuery, extra: Mapping[str, Any], *, greedy: bool = True
    ) -> Mapping[str, Any] | Failure:
        payload = {
            "model": self.model,
            "messages": self.messages(query),
            **({"temperature": 0} if greedy else {}),
            **extra,
        }
        if query.answer_prefix:
            payload["messages"].append({"role": "assistant", "content": query.answer_prefix})
            payload["continue_final_message"] = True
            payload["add_generation_prompt"] = False
        try:
            body = self.client.post_json("chat/completions", payload)
        except HttpError as exc:
            return Failure("http", str(exc))
        try:
            choice0 = body["choices"][0]
            message = choice0["message"]
        except (KeyError, IndexError, TypeError):
            return Failure("http", f"the answer is not a chat completion: {str(body)[:200]}")
        if message.get("refusal") or choice0.get("finish_reason") == "content_filter":
            return Failure(
                "refusal", str(message.get("refusal") or "finish_reason content_filter"), message.get("content")
            )
        return choice0

    def generate(
        self, queries: Sequence[VLMQuery], *, max_new_tokens: int, request: Mapping[str, Any] | None = None
    ) -> list[str | Failure]:
        """Greedy answers (stripped), or a Failure per sample; ``max_concurrency`` requests in flight.
        ``request``: decoding fields sent as they are instead of ``temperature: 0, max_tokens`` (a reference's
        body; ``max_tokens`` is ``max_new_tokens`` unless it names one), so the server's defaults apply to
        what it leaves out."""
        fields = (
            {"max_tokens": int(max_new_tokens)} if request is None else {"max_tokens": int(max_new_tokens), **request}
        )

        def one(query: VLMQuery) -> str | Failure:
            out = self._complete(query, fields, greedy=request is None)
            if isinstance(out, Failure):
                return out
            content = out["message"].get("content")
            if not isinstance(content, str):
                return Failure("http", f"the answer has no text content: {str(out)[:200]}")
            return content.strip()

        return self.client.map(one, list(queries))

    def answer_probs(self, queries: Sequence[VLMQuery], answers: Sequence[str]) -> list[np.ndarray | Failure]:
        """Per query, the probability of each answer as the first answer token (``exp`` of its entry in
        ``top_logprobs``; 0 when not among them), or a Failure."""
        extra = {"max_tokens": 1, "logprobs": True, "top_logprobs": self.top_logprobs}

        def one(query: VLMQuery) -> np.ndarray | Failure:
            out = self._complete(query, extra)
            if isinstance(out, Failure):
                return out
            try:
                top = out["logprobs"]["content"][0]["top_logprobs"]
                table = {str(t["token"]): float(t["logprob"]) for t in top}
            except (KeyError, IndexError, TypeError, ValueError):
                return Failure(
                    "http",
                    "the answer has no logprobs.content[0].top_logprobs (does the server support "
                    f"logprobs?): {str(out)[:200]}",
                )
            return np.array([math.exp(table[a]) if a in table else 0.0 for a in answers], dtype=np.float64)

        return self.client.map(one, list(queries))


__all__ = ["ENDPOINT_KEYS", "image_data_url", "OpenAIVLM"]
