"""Text in an image read by a vision-language model: the ``engine: vlm`` of the ``ocr`` reward, as verl-omni a1139ba
reads it (``verl_omni/utils/reward_score/genrm_ocr.py`` ``compute_score_ocr``).

Each image is one request: the system turn ``You are a helpful assistant.``, then the image and the question
``DEFAULT_GRM_PROMPT`` (:data:`GENRM_OCR_QUESTION`), with verl-omni's sampling
``{"temperature": 0.7, "top_p": 0.8, "max_tokens": 4096}`` (its ``GENRM_OCR_*`` variables set ``temperature``,
``top_p``, ``max_tokens`` and ``seed``; here the option ``sampling``). Through an endpoint the fields are sent as
they are; locally the same request is sampled as vLLM samples it
(:func:`~rewardzoo.rewards.models.vlm.backend.served_sampling`; ``seed`` is an endpoint field only). The answer is the
transcription; an empty one is unparseable (the failure policy decides; verl-omni scores it as text that matches
nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ....errors import ConfigError
from .backbone import VLMQuery
from .common import VLMJudgeMixin
from .judging import Failure
from .options import TranscriberOptions

#: verl-omni's ``DEFAULT_SAMPLING_PARAMS``.
SAMPLING = {"temperature": 0.7, "top_p": 0.8, "max_tokens": 4096}
#: The fields ``sampling`` may set (verl-omni's environment overrides).
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed")


def check_sampling(sampling: Any, owner: str) -> dict[str, Any]:
    """verl-omni's defaults updated by ``sampling``; ConfigError naming ``kwargs.sampling`` on a bad key or value."""
    if sampling is None:
        return dict(SAMPLING)
    if not isinstance(sampling, Mapping):
        raise ConfigError(f"{owner}: sampling must be a mapping of {SAMPLING_KEYS}", field="kwargs.sampling")
    unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
    if unknown:
        raise ConfigError(f"{owner}: sampling takes {SAMPLING_KEYS}, got {unknown}", field="kwargs.sampling")
    out = {**SAMPLING, **sampling}
    for key, value in out.items():
        integer = key in ("max_tokens", "seed")
        ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
        if not ok or value < (1 if key == "max_tokens" else 0) or (key == "top_p" and value > 1):
            raise ConfigError(f"{owner}: sampling.{key} is out of range: {value!r}", field="kwargs.sampling")
    return out


class VLMTranscriber(VLMJudgeMixin):
    """Reads the text of images with a VLM on either backend (module docstring).

    ``transcribe(images) -> [text | Failure]``; ``resolve(outcomes)`` applies the failure policy. Built from
    :class:`TranscriberOptions`.
    """

    def __init__(self, name: str, model_path: str | None, device: str, dtype: str, options: TranscriberOptions) -> None:
        self.question, self.system = options.question, options.system
        self.request = check_sampling(options.sampling, name)
        self.setup_judge(name, options, model_path=model_path, device=device, dtype=dtype)

    def transcribe(self, images: Sequence[Any]) -> list[str | Failure]:
        """The text the model reads in each image (image first, then the question), or a Failure."""
        queries = [VLMQuery((self.media_part(im), self.question), system=self.system) for im in images]
        answers = self.backend.generate(queries, max_new_tokens=self.request["max_tokens"], request=self.request)
        return [
            a if isinstance(a, Failure) or a.strip() else Failure("unparseable", "the transcription is empty", a)
            for a in answers
        ]


__all__ = ["SAMPLING", "SAMPLING_KEYS", "TranscriberOptions", "VLMTranscriber", "check_sampling"]
