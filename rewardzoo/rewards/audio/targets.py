"""The text a speech clip should say: the sample's ``prompt``, or ``metadata[text_key]`` (``asr_wer``,
``speech_duration_ratio``, ``repetition``). Imports the standard library, rewardzoo.errors and the options types."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from ...errors import InputError
from ..options import Field

#: The type of a ``text_key`` option: a ``metadata`` key (a non-empty string) holding the target text.
TextKey = Annotated[str, Field(min_length=1)]


def text_fields(text_key: str | None) -> tuple[str, ...]:
    """The field that carries the target text: ``metadata`` with a ``text_key``, else ``prompt``."""
    return ("metadata",) if text_key else ("prompt",)


def target_texts(
    prompt: Sequence[Any] | None, metadata: Sequence[Any] | None, text_key: str | None, n: int
) -> list[str]:
    """One target text per clip; InputError naming the field and the sample otherwise."""
    if text_key is None:
        if prompt is None or len(prompt) != n:
            raise InputError("needs one target text per clip in prompt", field="prompt")
        out = []
        for i, text in enumerate(prompt):
            if not isinstance(text, str):
                raise InputError(f"target text must be a string, got {type(text).__name__}", field="prompt", sample=i)
            out.append(text)
        return out
    if metadata is None or len(metadata) != n:
        raise InputError(f"needs metadata with '{text_key}' for every clip", field="metadata")
    out = []
    for i, meta in enumerate(metadata):
        data = json.loads(meta) if isinstance(meta, str) else meta
        text = data.get(text_key) if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise InputError(f"metadata has no string '{text_key}' (the target text)", field="metadata", sample=i)
        out.append(text)
    return out
