"""What every VLM judge shares: its backend (local transformers or an OpenAI-compatible endpoint), its failure
policy, its queries built from the converted inputs, and its substitution counter.

Options every judge takes: :class:`JudgeOptions` (backend, endpoint, local model settings, failure policy); video
judges :class:`VideoJudgeOptions` (also ``num_frames`` and ``fps``). A judge's ``Options`` subclasses one of them.

A template's ``<image>`` marks where the image goes (:func:`place_media`); without one, media come first.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ....errors import ConfigError, InputError
from ....shared.media import to_pil_rgb
from ....shared.resources import Resources
from ...base import Reward
from .backbone import Video, VLMQuery
from .backend import LocalVLM, build_backend
from .judging import Failure, FailurePolicy
from .options import JudgeOptions, VideoJudgeOptions

#: Where a template places an image: LLaVA's ``DEFAULT_IMAGE_TOKEN`` (with the newline after it, which LLaVA's
#: prompts and the chat templates of LLaVA-OneVision and SGLang's ``chatml-llava`` emit with each image part).
IMAGE_SLOT = "<image>"


def place_media(text: str, media: Sequence[Any], owner: str) -> tuple[Any, ...]:
    """Query content of one text and its media parts: the media at the text's :data:`IMAGE_SLOT` marks, in
    order (each mark and one newline right after it replaced by the part), or all media first when the text has
    no mark. ConfigError naming ``owner`` when marks and media differ in number."""
    if IMAGE_SLOT not in text:
        return (*media, text)
    pieces = text.split(IMAGE_SLOT)
    if len(pieces) - 1 != len(media):
        raise ConfigError(
            f"{owner}: the template has {len(pieces) - 1} '{IMAGE_SLOT}' mark(s) for {len(media)} image(s) per sample",
            field="kwargs.template",
        )
    content: list[Any] = [pieces[0]] if pieces[0] else []
    for part, piece in zip(media, pieces[1:]):
        piece = piece[1:] if piece.startswith("\n") else piece
        content += [part, piece] if piece else [part]
    return tuple(content)


def fill(template: str, prompt: str) -> str:
    """``template`` with ``{prompt}`` replaced by ``prompt`` (no ``str.format``: braces in prompts are safe)."""
    return template.replace("{prompt}", prompt)


def check_template(template: Any, owner: str, field: str = "kwargs.template") -> str:
    """A template string holding ``{prompt}`` exactly once."""
    if not isinstance(template, str) or template.count("{prompt}") != 1:
        raise ConfigError(
            f"{owner}: the template must be a string with exactly one '{{prompt}}', got {str(template)[:80]!r}",
            field=field,
        )
    return template


def check_prompts(prompt: Sequence[Any], n: int) -> list[str]:
    """The prompts as strings (InputError naming the sample otherwise), one per input."""
    if len(prompt) != n:
        raise InputError(f"{len(prompt)} prompts for {n} inputs", field="prompt", sample=min(len(prompt), n))
    for i, p in enumerate(prompt):
        if not isinstance(p, str):
            raise InputError(f"expected a string, got {type(p).__name__}", field="prompt", sample=i)
    return list(prompt)


#: Every backend, failure and frame option, as a video judge takes them.
ALL_OPTIONS = tuple(VideoJudgeOptions.model_fields)


class VLMJudgeMixin:
    """Backend, failure policy and substitution counter of a VLM judge (mixed into a Reward or a pairwise judge).

    ``media``: ``"image"`` or ``"video"`` (the class's); video judges take ``num_frames`` (sampled uniformly by
    the video layer; default ``default_num_frames``) and ``fps`` (the rate the sampled frames stand for, given
    to the model's time positions; default ``default_fps``): their options are :class:`VideoJudgeOptions`, an
    image judge's :class:`JudgeOptions`.
    """

    media: str = "image"
    default_model: str | None = None
    default_num_frames: ClassVar[int | None] = 8
    default_fps: ClassVar[float] = 2.0

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Any]:
        """None for an endpoint judge (``backend: openai``: the server holds the model); else the reward's own."""
        if kwargs.get("backend") == "openai":
            return []
        return list(super().weight_files(model_path, kwargs))  # type: ignore[misc]

    def setup_judge(self, name: str, options: JudgeOptions, *, model_path: str | None, device: str, dtype: str) -> None:
        self.judge_name = name
        self.policy = FailurePolicy.from_option(options.on_failure, owner=name)
        self.backend = build_backend(
            name,
            model_path=model_path,
            device=device,
            dtype=dtype,
            default_model=self.default_model,
            **options.backend_kwargs(),
        )
        self.io_bound = self.backend.io_bound  # an endpoint judge overlaps with the local streams
        # what it holds: a Reward's own record; a pairwise judge or transcriber keeps one for the reward using it
        held = self.resources if isinstance(self, Reward) else vars(self).setdefault("resources", Resources())
        backbone = self.backend.backbone if isinstance(self.backend, LocalVLM) else None  # endpoints hold nothing
        if isinstance(getattr(backbone, "resources", None), Resources):  # a model loaded in this process
            held.hold(backbone)
        num_frames, fps = getattr(options, "num_frames", None), getattr(options, "fps", None)
        if self.media != "video" and (num_frames is not None or fps is not None):
            raise ConfigError(f"{name}: num_frames and fps apply to video judges only", field="kwargs.num_frames")
        self.num_frames = self.default_num_frames if num_frames is None else num_frames
        self.fps = self.default_fps if fps is None else fps
        self._count_lock = threading.Lock()
        self._substitutions = 0

    @property
    def substitutions(self) -> int:
        """Scores this judge substituted for failures since it was built (``on_failure: {substitute: ...}``)."""
        return self._substitutions

    def media_part(self, value: Any) -> Any:
        """One input (an image, or a video's frames for video judges; RGB PIL from the engine, anything the
        media conversion reads in direct calls) as a query part."""
        if self.media == "video":
            return Video(tuple(to_pil_rgb(f) for f in value), fps=self.fps)
        return to_pil_rgb(value)

    def resolve(self, outcomes: Sequence[float | Failure]):
        """Scores and extras (``substituted``, ``failure``) through the failure policy; counts substitutions."""
        name = self.info.name if isinstance(self, Reward) else self.judge_name  # the card's name for a reward
        scores, extras = self.policy.resolve(outcomes, reward=name)
        n = int(extras["substituted"].sum())
        if n:
            with self._count_lock:
                self._substitutions += n
        return scores, extras

    def queries_of(
        self, texts: Sequence[str], media: Sequence[Sequence[Any]], *, system: str | None = None
    ) -> list[VLMQuery]:
        """One query per input: its media parts (in order) at the text's ``<image>`` marks, or before the text
        when it has none (:func:`place_media`)."""
        return [
            VLMQuery(place_media(text, [self.media_part(m) for m in parts], self.judge_name), system=system)
            for text, parts in zip(texts, media)
        ]
