"""The reward contract: what a reward declares, what it receives, what it must return.

A **pointwise** reward scores each input on its own. One call receives a non-empty chunk of at most
``batch_size`` inputs (tails and dataset gating make calls smaller: never assume a full batch).
A **groupwise** reward receives one complete group per call (all samples sharing a ``group_id``);
``batch_size`` does not shape that call.

Calls are keyword-only: the engine passes exactly the fields a reward's :class:`Inputs` declare,
each as a list with one entry per input (``audio`` also brings ``audio_sample_rate``,
``condition_audio`` brings ``condition_audio_sample_rate``), converted
to the form the declaration asks for. A call returns one finite score per input, in input order,
within the reward's declared ``score_range``: a :class:`RewardOutput`, a sequence of numbers, a
NumPy array or a 1-D tensor. Applicability is the engine's business; a reward never returns NaN for
"not applicable".

What a reward *is* (modality, score range, direction, extra, licence, formula) is written once, in
its model card; the registry reads the cards and the loader hands each instance its
:class:`RewardInfo` as ``reward.info``. The class keeps only what execution
needs: ``inputs``, ``thread_safe``, ``io_bound``, its kind (the base class; or, for a reward whose instances differ,
:data:`~rewardzoo.rewards.info.PER_INSTANCE` and :meth:`Reward.decide_kind`) and, for composites, the inner
rewards it is built from (:meth:`Reward.inner_rewards`); for the memory plan, the weight files an instance would load
(:meth:`Reward.weight_files`).
"""

from __future__ import annotations

import inspect
import math
import threading
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar, TypeVar

import numpy as np

from ..errors import RegistryError, RewardOutputError
from ..shared import foreign
from ..shared.checkpoints import Checkpoint, resolve_checkpoint
from ..shared.resources import Resources
from .info import KINDS, PER_INSTANCE, RewardInfo
from .options import AfterValidator, RewardOptions

_Held = TypeVar("_Held")

#: Fields a reward may declare in its :class:`Inputs`.
KNOWN_FIELDS = (
    "prompt",
    "completion",
    "image",
    "video",
    "audio",
    "condition_images",
    "condition_videos",
    "condition_audio",
    "latent",
    "metadata",
    "dataset",
    "group_id",
)
IMAGE_FORMS = ("pil", "float", "uint8", "native", "array")
FRAME_FORMS = ("pil", "float", "native", "array")
AUDIO_FORMS = ("numpy", "tensor")
_TEXT_FIELDS = ("prompt", "completion", "metadata", "dataset", "group_id")


@dataclass(frozen=True)
class Inputs:
    """What a reward receives: its fields and the form its media arrive in. Read in one place
    (``rewardzoo.core.fields``); two rewards with equal needs for a field share its conversion.

    - ``fields``: the declared fields, from :data:`KNOWN_FIELDS`.
    - ``images``: ``image`` and each of ``condition_images`` as ``"pil"`` (RGB PIL), ``"float"``
      (tensor (3, H, W) in [0, 1]), ``"uint8"`` (tensor (3, H, W); float inputs quantised with
      ``round(x * 255)`` as the PIL path does, ~4x faster to resize on the CPU than floats) or ``"native"``
      (uint8 (3, H, W) where the source is 8-bit, a float tensor's own float32 values otherwise: for a reward that
      converts to float itself, a chunk at a time, so a batch of large images is never held as float32) or
      ``"array"`` (uint8 NumPy array (H, W, 3): what a worker entry sends on).
    - ``frames``: ``video`` and each of ``condition_videos`` as ``"pil"`` (list of RGB PIL frames),
      ``"float"`` (tensor (T, 3, H, W) in [0, 1]) or ``"native"`` (tensor (T, 3, H, W) as the source
      holds it: uint8 where it is 8-bit (files, PIL, uint8 arrays and tensors), float32 in [0, 1] where it
      is a float tensor; for a reward that uses a few of the frames it is given and converts only those:
      ``x.float() / 255`` of a uint8 frame is its ``"float"`` value) or ``"array"`` (uint8 NumPy array
      (T, H, W, 3), the decoded frames themselves: what a worker entry sends on); ``num_frames`` frames sampled
      uniformly (None = all) of every ``frame_step``-th frame (1 = every frame; a reward that keeps a fixed
      fraction of the frames, as VBench's dynamic degree does, so a file's other frames are never converted nor
      held); ``frame_rate``: ``video`` arrives with ``video_fps`` beside it, each video's frame rate
      (a file's own, else the sample's ``video_fps``, else None), for a reward that samples by time.
    - ``audio``: ``audio`` and ``condition_audio`` (one reference clip) as float32 (channels, time),
      ``"numpy"`` or ``"tensor"``, resampled to ``sample_rate`` (None = as given), mixed down when ``mono``.
    - ``latent``: the sample's latent (a floating tensor, (C, H, W) or 4 dimensions) as the trainer gave it, for
      rewards that score latents; a config's ``decode:`` stage turns it into ``image`` / ``video`` for the others
      (:mod:`rewardzoo.core.decode`).
    - limits, for rewards whose cost grows with the input (checked before the call, and for files
      before they are decoded; None = no limit; a config entry's ``limits:`` overrides them):
      ``max_seconds`` of audio (default an hour), ``max_frames`` a video may bring after sampling
      (default 10,000), ``max_pixels`` per image or frame (default 40 M, e.g. 6300x6300).
    """

    fields: tuple[str, ...] = ()
    images: str = "pil"
    frames: str = "pil"
    audio: str = "numpy"
    num_frames: int | None = None
    frame_step: int = 1
    frame_rate: bool = False
    sample_rate: int | None = None
    mono: bool = True
    max_seconds: float | None = 3600.0
    max_frames: int | None = 10_000
    max_pixels: int | None = 40_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        unknown = [f for f in self.fields if f not in KNOWN_FIELDS]
        if unknown or isinstance(self.fields, str):
            raise ValueError(f"unknown field(s) {unknown}; known: {', '.join(KNOWN_FIELDS)}")
        for name, value, forms in (
            ("images", self.images, IMAGE_FORMS),
            ("frames", self.frames, FRAME_FORMS),
            ("audio", self.audio, AUDIO_FORMS),
        ):
            if value not in forms:
                raise ValueError(f"Inputs.{name} must be one of {forms}, got {value!r}")
        if isinstance(self.frame_step, bool) or not isinstance(self.frame_step, int) or self.frame_step < 1:
            raise ValueError(f"Inputs.frame_step must be a positive integer, got {self.frame_step!r}")

    def with_limits(self, limits: Mapping[str, float | int | None]) -> Inputs:
        """These needs with a config entry's ``limits`` (``seconds``, ``frames``, ``pixels``) applied."""
        changes: dict[str, Any] = {f"max_{key}": value for key, value in limits.items()}
        return replace(self, **changes)

    @classmethod
    def tensors(cls, fields: Sequence[str], **settings: Any) -> Inputs:
        """Every medium as a float tensor (images, frames) or tensor (audio)."""
        return cls(tuple(fields), images="float", frames="float", audio="tensor", **settings)

    def with_fields(self, fields: Sequence[str]) -> Inputs:
        """The same media forms for other fields (composites add ``group_id`` to their base's)."""
        return replace(self, fields=tuple(dict.fromkeys(fields)))

    def conversion_key(self, fld: str) -> Hashable:
        """Equal keys mean identical converted values, so conversions can be shared between rewards."""
        if fld in _TEXT_FIELDS or fld == "latent":  # a latent is handed over as given
            return fld
        if fld in ("image", "condition_images"):
            return (fld, self.images, self.max_pixels)
        if fld in ("video", "condition_videos"):
            rate = self.frame_rate and fld == "video"
            return (fld, self.frames, self.num_frames, self.frame_step, self.max_frames, self.max_pixels, rate)
        if fld in ("audio", "condition_audio"):
            return (fld, self.audio, self.sample_rate, self.mono, self.max_seconds)
        return (fld, self)


@dataclass
class RewardOutput:
    """What a reward call returns: ``rewards`` (one finite score per input) and optional ``extras``
    (named per-input diagnostics, each the same length as ``rewards``: numbers, e.g. DNSMOS sub-scores,
    or text, e.g. an ASR transcript — a list of strings)."""

    rewards: Any
    extras: Mapping[str, Any] = field(default_factory=dict)


_RETIRED = ("required_fields", "use_tensor_inputs", "uint8_images", "sample_rate", "mono", "num_frames")


class Reward:
    """Common base of :class:`PointwiseReward` and :class:`GroupwiseReward`.

    Class declarations (what execution needs):

    - ``inputs``: an :class:`Inputs` (an instance may replace it in ``__init__``, e.g. with its
      configured ``num_frames``);
    - ``thread_safe``: may run on several threads at once (otherwise calls are serialised per instance);
    - ``io_bound``: its calls mostly wait on another process (a server it sends requests to), so the engine
      runs its stream on a thread of its own while the other streams of the same processor call score
      (an instance may set it in ``__init__``, e.g. by the backend it was configured with);
    - ``kind``: set by the base class, ``"pointwise"`` or ``"groupwise"``; a class whose instances are
      one or the other by what they are built on subclasses :class:`Reward` directly, declares
      ``kind = PER_INSTANCE`` (as its card does) and calls :meth:`decide_kind` in ``__init__``;
    - ``streams``: the names of the values one call reports per sample beside the score (each a numeric extra
      of that name), which an entry may weigh and normalise on their own (``streams:``,
      :mod:`rewardzoo.core.streams`); ``default_streams``: the stream settings an instance's preset implies
      (an entry's ``streams:`` replaces them), None for none.

    Everything else about a reward is in its model card and reaches the instance as ``self.info``
    (a :class:`RewardInfo`: modality, ``higher_is_better``, ``score_range``, ...).
    A reward without a card (a Python path, a class registered from user code) may declare
    ``higher_is_better`` and ``score_range`` as class attributes instead; the defaults are higher is
    better and any finite score.

    Construction: ``Reward(model_path=None, device="cpu", dtype="float32", **options)``; ``device`` is a
    resolved device string, ``dtype`` a dtype name. ``self.name`` is the registry name the loader builds it
    under (:meth:`named`) from the start of ``__init__``, else the class name. A subclass declares its options
    (the YAML ``kwargs:`` mapping) once, as a nested ``Options`` class (:class:`~rewardzoo.rewards.options.RewardOptions`),
    passes ``**options`` on to this constructor, which validates them into ``self.options``, and loads its
    weights in ``__init__``, declaring the models it keeps (:meth:`hold`); it never prepares or shards itself for a
    trainer. A trainer's own constructor call (a class named in its config, built with the trainer's keywords:
    Flow-Factory's ``Class(config=..., accelerator=...)``) is refused as that trainer's front door registered
    (:mod:`rewardzoo.shared.foreign`; Flow-Factory's shows the adapter entry to write).
    """

    inputs: Inputs = Inputs()  # an instance may replace it in __init__ (e.g. with its configured num_frames)
    thread_safe: bool = True  # an instance may set it in __init__ (e.g. by the backend it was built on)
    io_bound: bool = False
    kind: ClassVar[str] = ""
    #: The options (``kwargs:``) this reward takes, typed (:mod:`rewardzoo.rewards.options`); none by default.
    Options: ClassVar[type[RewardOptions]] = RewardOptions
    options: RewardOptions
    streams: ClassVar[tuple[str, ...]] = ()
    default_streams: Mapping[str, Mapping[str, Any]] | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Reward:
        # a trainer that builds the class its config names with keywords of its own (rewardzoo.shared.foreign):
        # refused with what its front door says, before a subclass's __init__ would fail with a bare TypeError
        if kwargs and not args and (refused := foreign.refusal(cls, kwargs)) is not None:
            raise refused
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        old = [name for name in _RETIRED if name in cls.__dict__]
        if old:
            raise TypeError(
                f"{cls.__qualname__}: {', '.join(old)} are declared with `inputs = Inputs(...)` "
                "(rewardzoo.rewards.base.Inputs)"
            )

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        self.model_path = model_path
        self.device = device
        self.dtype_name = dtype
        self.name: str = vars(self).get("name", type(self).__name__)  # set before __init__ by :meth:`named`
        self.options = type(self).Options.from_kwargs(options, type(self).__name__)

    @classmethod
    def named(cls, name: str, /, **kwargs: Any) -> Reward:
        """``cls(**kwargs)`` called ``name`` (its registry name) from the start of ``__init__``, so the errors
        it raises while it is built name the reward as configured (the loader builds every reward so)."""
        self = cls.__new__(cls)
        self.name = name
        cls.__init__(self, **kwargs)
        return self

    def decide_kind(self, kind: str) -> None:
        """Fix this instance's kind (one of :data:`~rewardzoo.rewards.info.KINDS`), once, in ``__init__``;
        only a class declaring ``kind = PER_INSTANCE`` may. The engine reads ``reward.kind`` as for any reward."""
        owner = type(self).__qualname__
        if type(self).kind != PER_INSTANCE:
            raise TypeError(
                f"{owner} is {type(self).kind or 'of no kind'} by its class; only a class declaring "
                f"kind = {PER_INSTANCE!r} decides its kind per instance"
            )
        if "kind" in vars(self):
            raise TypeError(f"{owner}: this instance's kind is decided already ({self.kind})")
        if kind not in KINDS:
            raise ValueError(f"{owner}: kind must be one of {KINDS}, got {kind!r}")
        vars(self)["kind"] = kind  # the instance's own, over the class's PER_INSTANCE

    @classmethod
    def inner_rewards(
        cls, kwargs: dict[str, Any], *, model_path: str | None, device: str, dtype: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """For composites: the rewards this one is built from, as reward entries to load.

        Given the configured ``kwargs`` (and the entry's model_path/device/dtype), return
        ``(kwargs left for the constructor, {constructor parameter: reward entry mapping})``. The
        loader builds each entry (sharing instances by model identity, like any config entry) and
        passes the built :class:`Reward` under that parameter. The default: no inner rewards.
        """
        return kwargs, {}

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The weight files an instance built with ``model_path`` and ``kwargs`` would load, found on this machine
        without loading, downloading or importing a backend for it (``rewardzoo plan``): one
        :class:`~rewardzoo.shared.checkpoints.Checkpoint` per part (a backbone, a head beside it), whose ``missing``
        says why a part is not here (a hub model never downloaded) and whose ``dtype`` says when a part is held at
        a dtype of its own. The default: ``model_path``, else the class's ``default_model`` (or ``default_repo``),
        as :func:`~rewardzoo.shared.checkpoints.resolve_checkpoint` finds it; an override names packaged files,
        library model names and second files."""
        source = model_path or getattr(cls, "default_model", None) or getattr(cls, "default_repo", None)
        if not isinstance(source, str):
            return [Checkpoint("", missing="no model_path, and no default known to the plan")]
        return [resolve_checkpoint(source)]

    @classmethod
    def configured(cls, kwargs: Mapping[str, Any], name: str) -> Any:
        """The value an instance built with ``kwargs`` gets for its option ``name``: the configured one, else the
        declared default (for :meth:`weight_files`)."""
        if name in kwargs:
            return kwargs[name]
        if name in cls.Options.model_fields:
            return cls.Options.default(name)
        return inspect.signature(cls.__init__).parameters[name].default

    @property
    def info(self) -> RewardInfo:
        """This reward's record: from its model card when built by the loader (``rewardzoo.load_reward``,
        a processor); for an instance constructed directly, what its class states
        (:meth:`RewardInfo.of_class`)."""
        found = self.__dict__.get("_info")
        if found is None:
            found = self.__dict__["_info"] = RewardInfo.of_class(type(self))
        return found

    @info.setter
    def info(self, value: RewardInfo) -> None:
        self.__dict__["_info"] = value

    @property
    def dtype(self) -> Any:
        """The torch dtype named by the spec (imports torch on first use)."""
        from ..shared.device import torch_dtype

        return torch_dtype(self.dtype_name)

    # ---- declared resources (rewardzoo.shared.resources) -------------------------------------------------------

    @property
    def resources(self) -> Resources:
        """What this reward holds (its torch modules, ONNX sessions, inner rewards and the files their weights were
        read from), as declared with :meth:`hold`: what residency, the differentiable path and the scale harness
        read. Empty for a model-free reward."""
        found = self.__dict__.get("_resources")
        if found is None:
            found = self.__dict__["_resources"] = Resources()
        return found

    def hold(self, obj: _Held, *, files: Any = None) -> _Held:
        """Declare ``obj`` held by this reward and return it (``self.model = self.hold(model)``): a torch module, an
        ONNX session, an inner reward or a helper object with a ``resources`` record of its own, wherever the
        reward keeps it. ``files``: where its weights were read from (default: this reward's ``model_path`` and its
        options typed :data:`~rewardzoo.rewards.options.WeightPath`; a transformers model adds its ``name_or_path``);
        a wake from ``offload: drop`` reads them back from there."""
        if files is None:
            options = vars(self).get("options")
            declared = options.weight_sources() if isinstance(options, RewardOptions) else []
            files = [getattr(self, "model_path", None), *declared]
        return self.resources.hold(obj, files=files)

    # Each reward declares the keyword fields it takes (its `inputs`); `*args: Any, **fields: Any` is the
    # signature mypy lets every such subclass narrow (the engine calls it with keywords only).
    def __call__(self, *args: Any, **fields: Any) -> RewardOutput | Sequence[float]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model_path={self.model_path!r}, device={self.device!r}, dtype={self.dtype_name!r})"
        )


def check_kind(reward: Reward) -> None:
    """RegistryError for a built instance of a per-instance class whose ``__init__`` did not
    :meth:`~Reward.decide_kind` (the engine would take it for pointwise)."""
    if reward.kind == PER_INSTANCE:
        raise RegistryError(
            f"{type(reward).__qualname__} declares kind {PER_INSTANCE!r} but its __init__ did not "
            f"decide one of {KINDS} (Reward.decide_kind)"
        )


def _inner_entry(value: Any) -> Any:
    if value is None or isinstance(value, (str, Mapping, Reward)):
        return value
    raise ValueError(f"must be a reward entry (a name or a mapping) or a built reward, got {type(value).__name__}")


#: The type of a composite's inner-reward option: a reward entry as configured (a name or a mapping), or the built
#: reward the loader hands the constructor (:meth:`Reward.inner_rewards`).
InnerReward = Annotated[Any, AfterValidator(_inner_entry)]


class PointwiseReward(Reward):
    """A reward that scores each input independently (see the module docstring for the contract)."""

    kind: ClassVar[str] = "pointwise"


class GroupwiseReward(Reward):
    """A reward whose score for a sample depends on the other samples of its group.

    Each call receives one complete group (local or gathered across ranks).
    """

    kind: ClassVar[str] = "groupwise"


_CALL_LOCKS: weakref.WeakKeyDictionary[Reward, threading.Lock] = weakref.WeakKeyDictionary()
_CALL_LOCKS_GUARD = threading.Lock()


def instance_lock(reward: Reward) -> threading.Lock:
    """The lock serialising calls of one (not thread-safe) reward instance across every thread."""
    with _CALL_LOCKS_GUARD:
        try:
            lock = _CALL_LOCKS.get(reward)
            if lock is None:
                lock = _CALL_LOCKS[reward] = threading.Lock()
        except TypeError:  # an unhashable or slotted reward class: keep the lock on the instance
            lock = reward.__dict__.setdefault("_rewardzoo_call_lock", threading.Lock())
        return lock


_BEFORE_CALL: weakref.WeakKeyDictionary[Reward, Any] = weakref.WeakKeyDictionary()


def before_call(reward: Reward, hook: Any) -> None:
    """Run ``hook(reward)`` before every :func:`invoke` of ``reward`` (the loader's: wake a sleeping reward). The
    hook must not hold the reward (it is the value of a weak-keyed table)."""
    _BEFORE_CALL[reward] = hook


def invoke(reward: Reward, fields: Mapping[str, Sequence[Any]]) -> Any:
    """Call ``reward(**fields)``; under its instance lock when its class is not ``thread_safe``.

    The one way rewards are called, by the engine and by composites calling their inner rewards, so a
    reward shared between streams and wrappers never runs twice at once unless it says it may. A reward the
    loader put to sleep is woken first (:func:`before_call`).
    """
    hook = _BEFORE_CALL.get(reward)
    if hook is not None:
        hook(reward)
    if reward.thread_safe:
        return reward(**fields)
    with instance_lock(reward):
        return reward(**fields)


#: Scores this far beyond a declared bound (relative to max(1, |bound|)) are float rounding and are
#: set to the bound; anything further is an error.
RANGE_TOLERANCE = 1e-5


def validate_scores(
    output: Any, n: int, reward: str, score_range: tuple[float, float] | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Check a reward's return value; give (float64 scores of shape (n,), extras).

    Raises :class:`RewardOutputError` naming the reward for a bare scalar, a wrong length or shape,
    non-numeric values, NaN or Inf, and for scores outside ``score_range`` (beyond rounding, see
    :data:`RANGE_TOLERANCE`).
    """
    extras: Mapping[str, Any] = {}
    if isinstance(output, RewardOutput):
        output, extras = output.rewards, output.extras
    scores = _as_vector(output, n, reward, "scores")
    bad = ~np.isfinite(scores)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise RewardOutputError(
            f"returned non-finite scores ({scores[idx[0]]}) for {len(idx)} of {n} input(s)",
            reward=reward,
            inputs=idx.tolist(),
        )
    if score_range is not None:
        scores = _within(scores, score_range, reward)
    return scores, {key: _as_extra(val, n, reward, key) for key, val in extras.items()}


def is_text_extra(values: Any) -> bool:
    """Whether validated extras are text (an object array of strings) rather than numbers."""
    return isinstance(values, np.ndarray) and values.dtype == object


def _as_extra(value: Any, n: int, reward: str, key: str) -> np.ndarray:
    """A numeric extra as float64 (n,), or a text extra (every item a string) as an object array (n,)."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        if len(value) != n:
            raise RewardOutputError(f"returned extras['{key}'] of {len(value)} texts for {n} inputs", reward=reward)
        out = np.empty(n, dtype=object)
        out[:] = list(value)
        return out
    return _as_vector(value, n, reward, f"extras['{key}']")


def _within(scores: np.ndarray, score_range: tuple[float, float], reward: str) -> np.ndarray:
    lo, hi = score_range
    slack_lo = RANGE_TOLERANCE * max(1.0, abs(lo)) if math.isfinite(lo) else 0.0
    slack_hi = RANGE_TOLERANCE * max(1.0, abs(hi)) if math.isfinite(hi) else 0.0
    outside = (scores < lo - slack_lo) | (scores > hi + slack_hi)
    if outside.any():
        idx = np.flatnonzero(outside)
        raise RewardOutputError(
            f"returned {scores[idx[0]]!r} for {len(idx)} of {len(scores)} input(s), outside its declared "
            f"score_range [{lo}, {hi}] (see its model card; check the reward's options)",
            reward=reward,
            inputs=idx.tolist(),
        )
    clipped: np.ndarray = np.clip(scores, lo, hi)
    return clipped


def _as_vector(value: Any, n: int, reward: str, what: str) -> np.ndarray:
    if value is None:
        raise RewardOutputError(f"returned None instead of {n} {what}", reward=reward)
    if hasattr(value, "detach"):  # torch tensor, without importing torch
        value = value.detach().float().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RewardOutputError(
            f"returned {what} that are not numbers ({type(value).__name__}): {exc}", reward=reward
        ) from None
    if arr.ndim == 0:
        raise RewardOutputError(f"returned a bare scalar instead of {n} {what}", reward=reward)
    if arr.shape != (n,):
        raise RewardOutputError(
            f"returned {what} of shape {tuple(arr.shape)} for {n} inputs (expected ({n},))", reward=reward
        )
    return arr
