"""The options of the VLM runtime's users, importable without it (no torch): every judge's backend and failure
options (:class:`JudgeOptions`), a video judge's frames (:class:`VideoJudgeOptions`) and a transcriber's question
(:class:`TranscriberOptions`, the ``ocr`` reward's ``engine: vlm``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from ....errors import ConfigError
from ...options import Field, PositiveInt, PositiveNumber, RewardOptions, WeightPath, model_validator

#: The system turn verl-omni sends with the OCR question.
GENRM_OCR_SYSTEM = "You are a helpful assistant."
#: ``DEFAULT_GRM_PROMPT``: the transcription question.
GENRM_OCR_QUESTION = (
    "Please output only the text content from the image without any additional descriptions or formatting."
)


class JudgeOptions(RewardOptions):
    """The backend and failure options every VLM judge takes (a judge's ``Options`` subclasses this one, or
    :class:`VideoJudgeOptions`); :func:`~rewardzoo.rewards.models.vlm.backend.build_backend` checks what needs the
    model (LLaVA-OneVision and pixel bounds) and the options of the other backend."""

    backend: Literal["transformers", "openai"] = "transformers"
    """``transformers``: the model runs here; ``openai``: an OpenAI-compatible server answers (``endpoint``)."""
    endpoint: dict[str, Any] | None = None
    """The server mapping of ``backend: openai`` (:mod:`rewardzoo.rewards.models.vlm.endpoint`)."""
    processor_path: WeightPath | None = None
    """Local backend: where the processor configs live (default ``model_path``)."""
    attn_implementation: str | None = None
    """Local backend: transformers' ``attn_implementation`` (``sdpa``, ``eager``, ``flash_attention_2``)."""
    trust_remote_code: bool = False
    """Local backend: let transformers run the checkpoint's own code (off unless a config asks)."""
    min_pixels: PositiveInt | None = None
    """Local backend, Qwen-VL: the fewest pixels an image or video frame is resized to."""
    max_pixels: PositiveInt | None = None
    """Local backend, Qwen-VL: the most pixels an image or video frame is resized to."""
    on_failure: Any = None
    """``error`` (the default: an unparseable answer is an error) or ``{substitute: VALUE}``
    (:mod:`rewardzoo.rewards.models.vlm.judging`)."""

    #: What :func:`~rewardzoo.rewards.models.vlm.backend.build_backend` reads; the rest is the judge's own.
    BACKEND_FIELDS: ClassVar[tuple[str, ...]] = (
        "backend",
        "endpoint",
        "processor_path",
        "attn_implementation",
        "trust_remote_code",
        "min_pixels",
        "max_pixels",
    )

    @model_validator(mode="before")
    @classmethod
    def _frames_for_video_only(cls, values: Any) -> Any:
        if "num_frames" not in cls.model_fields and "fps" not in cls.model_fields and isinstance(values, Mapping):
            for key in ("num_frames", "fps"):
                if key in values:
                    raise ConfigError("num_frames and fps apply to video judges only", field=f"kwargs.{key}")
        return values

    def backend_kwargs(self) -> dict[str, Any]:
        """The backend's share, as ``build_backend`` takes it."""
        return {name: getattr(self, name) for name in self.BACKEND_FIELDS}


class VideoJudgeOptions(JudgeOptions):
    """:class:`JudgeOptions` and the frames of a video judge."""

    num_frames: PositiveInt | None = None
    """Frames sampled uniformly by the video layer (default the judge's ``default_num_frames``)."""
    fps: PositiveNumber | None = None
    """The rate the sampled frames stand for, given to the model's time positions (default the judge's
    ``default_fps``)."""


class TranscriberOptions(JudgeOptions):
    """What a :class:`VLMTranscriber` is built from: its question, system turn and sampling, and the backend and
    failure options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`."""

    question: str = GENRM_OCR_QUESTION
    """The question sent with each image (default verl-omni's ``DEFAULT_GRM_PROMPT``)."""
    system: str | None = GENRM_OCR_SYSTEM
    """The system turn (default verl-omni's)."""
    sampling: dict[str, Any] | None = None
    """Sampling fields over verl-omni's (``temperature``, ``top_p``, ``max_tokens``, ``seed``; module docstring)."""


class RewardModelOptions(RewardOptions):
    """The options of a reward model on a Qwen-VL backbone (HPSv3, EditReward: a checkpoint of backbone and head)."""

    base_model: str | None = None
    """Config, tokenizer, chat template and image processor of the Qwen-VL it was trained on (its weights are not
    read; default the reward's)."""
    pixels: int = Field(256 * 28 * 28, ge=28 * 28)
    """Each image's size in pixels (``min = max``; at least one 28 x 28 patch)."""
    attn_implementation: str | None = None
    """transformers' ``attn_implementation`` (``sdpa``, ``eager``, ``flash_attention_2``)."""
