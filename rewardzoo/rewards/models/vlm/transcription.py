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
from typing import Any, ClassVar

from ....errors import ConfigError
from .backbone import VLMQuery
from .common import ALL_OPTIONS, VLMJudgeMixin
from .judging import Failure

#: The system turn verl-omni sends with the OCR question.
GENRM_OCR_SYSTEM = "You are a helpful assistant."
#: ``DEFAULT_GRM_PROMPT``: the transcription question.
GENRM_OCR_QUESTION = (
    "Please output only the text content from the image without any additional descriptions or formatting."
)

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

    ``transcribe(images) -> [text | Failure]``; ``resolve(outcomes)`` applies the failure policy. Options:
    ``question`` (default verl-omni's), ``system`` (default verl-omni's), ``sampling`` (module docstring), and the
    backend and failure options of :mod:`rewardzoo.rewards.models.vlm.common`.
    """

    judge_options: ClassVar[tuple[str, ...]] = tuple(o for o in ALL_OPTIONS if o not in ("num_frames", "fps"))

    def __init__(
        self,
        name: str,
        model_path: str | None,
        device: str,
        dtype: str,
        *,
        question: str = GENRM_OCR_QUESTION,
        system: str | None = GENRM_OCR_SYSTEM,
        sampling: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        judge_options = self.judge_options_of(options)
        for field, value in (("question", question), ("system", system)):
            if not isinstance(value, str) and not (field == "system" and value is None):
                raise ConfigError(f"{name}: {field} must be a string, got {value!r}", field=f"kwargs.{field}")
        self.question, self.system = question, system
        self.request = check_sampling(sampling, name)
        self.setup_judge(name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def transcribe(self, images: Sequence[Any]) -> list[str | Failure]:
        """The text the model reads in each image (image first, then the question), or a Failure."""
        queries = [VLMQuery((self.media_part(im), self.question), system=self.system) for im in images]
        answers = self.backend.generate(queries, max_new_tokens=self.request["max_tokens"], request=self.request)
        return [
            a if isinstance(a, Failure) or a.strip() else Failure("unparseable", "the transcription is empty", a)
            for a in answers
        ]


__all__ = ["SAMPLING", "SAMPLING_KEYS", "VLMTranscriber", "check_sampling"]
