"""Groupwise rewards over a base reward: rank in group, pairwise win rate, group normalisation.

GRPO-style trainers compare the samples generated for one prompt; these wrappers score a sample
relative to its group (all inputs that share a ``group_id``). Each wraps a *base* reward named in
its kwargs::

    kwargs: {base: pickscore}                       # a registry name (or Python path / registered name)
    kwargs: {base: {reward_model: pickscore, model_path: ..., dtype: bfloat16, kwargs: {...},
                    device: cuda:1, batch_size: 8}}  # the fields of a reward entry

The wrapper declares the base as an inner reward (:meth:`GroupwiseOverBase.inner_rewards`); the
loader builds it like any config entry, so it is the same instance as any other spec of the same
model identity (a ``pickscore`` stream and a ``group_rank`` over ``pickscore`` load PickScore once),
and hands it to the constructor. It inherits the wrapper's device and dtype unless the mapping sets
them. ``batch_size`` in the mapping chunks the base calls (default: the whole call at once). Build a
wrapper through the loader (``rewardzoo.load_reward("group_rank", base="pickscore")``), not directly.

How the wrapper looks to the engine (set from the base on the instance):

- ``inputs`` = the base's :class:`~rewardzoo.rewards.base.Inputs` with ``group_id`` added (the class
  declares ``("group_id",)``), so media are converted exactly as for the base alone (and those
  conversions are shared with a stream of the base);
- ``thread_safe`` stays true with a base: the base is called through
  :func:`~rewardzoo.rewards.base.invoke`, under its process-wide instance lock when its class is not
  thread-safe, so it is never run twice at once, whichever stream or wrapper calls it. A user pairwise
  judge is taken as not thread-safe unless it says so.

Every wrapper orients the base first: ``s = base`` when the base's ``higher_is_better`` is true,
``s = -base`` otherwise, so a higher wrapper score always means a better sample. The base is
evaluated once per input (n evaluations for a group of n). A base that is itself groupwise is
allowed: it receives the whole call (one group, or several when called directly) in one call.
Each call also reports the oriented base score as the extra ``base_score``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import WithJsonSchema

from ...errors import ConfigError, InputError, RewardOutputError
from ...shared.imports import import_path
from ...shared.options import positive_int
from ..base import GroupwiseReward, InnerReward, Inputs, Reward, RewardOutput, invoke, validate_scores
from ..models.groups import PairwiseJudged, group_positions, win_counts
from ..options import (
    AfterValidator,
    Field,
    PositiveInt,
    PositiveNumber,
    RewardOptions,
    model_validator,
)

#: Keys a ``base:`` mapping may have (the model fields of a reward entry, plus the chunk size).
BASE_KEYS = ("reward_model", "model_path", "dtype", "device", "kwargs", "batch_size")


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """0-based ranks in ascending order; tied scores share the mean of the ranks they span."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts
    return (first + (counts - 1) / 2.0)[inverse.reshape(-1)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


class GroupwiseOverBase(GroupwiseReward):
    """Shared machinery: take the built base, evaluate it n times, group the scores.

    Subclasses implement :meth:`score_group` (oriented base scores of one group -> group scores).
    """

    inputs: Inputs = Inputs(("group_id",))
    base_required: ClassVar[bool] = True
    #: False for a wrapper whose judge is its own model, built in ``__init__`` from ``model_path``: no ``base``
    #: option, no inner rewards (the contract's default).
    has_base: ClassVar[bool] = True

    @classmethod
    def inner_rewards(
        cls, kwargs: dict[str, Any], *, model_path: str | None, device: str, dtype: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The ``base`` option as a reward entry (inheriting device and dtype); its ``batch_size``
        becomes the constructor's ``base_batch_size``."""
        if not cls.has_base:
            return super().inner_rewards(kwargs, model_path=model_path, device=device, dtype=dtype)
        base = kwargs.pop("base", None)
        if model_path is not None:
            raise ConfigError(
                f"{cls.__name__} has no weights of its own; set model_path inside 'base' "
                f"(base: {{reward_model: ..., model_path: {model_path!r}}})",
                field="model_path",
            )
        if base is None:  # the constructor says whether that is allowed
            return kwargs, {}
        if isinstance(base, str):
            entry: dict[str, Any] = {"reward_model": base}
        elif isinstance(base, Mapping):
            entry = dict(base)
            unknown = [k for k in entry if k not in BASE_KEYS]
            if unknown:
                raise ConfigError(
                    f"{cls.__name__}: unknown key(s) {unknown} in 'base'; allowed: {', '.join(BASE_KEYS)}",
                    field="kwargs.base",
                )
            if not isinstance(entry.get("reward_model"), str):
                raise ConfigError(
                    f"{cls.__name__}: 'base' mapping needs 'reward_model' (a registry name or Python path)",
                    field="kwargs.base.reward_model",
                )
        else:
            raise ConfigError(
                f"{cls.__name__}: 'base' must be a reward name or a mapping, got {type(base).__name__}",
                field="kwargs.base",
            )
        batch_size = entry.pop("batch_size", None)
        if batch_size is not None:
            kwargs["base_batch_size"] = positive_int(batch_size, "kwargs.base.batch_size")
        entry.setdefault("device", device)
        entry.setdefault("dtype", dtype)
        return kwargs, {"base": entry}

    class Options(RewardOptions):
        base: InnerReward = None
        """The base reward: a registry name or a mapping of entry fields (``reward_model``, ``model_path``,
        ``dtype``, ``device``, ``kwargs``, and ``batch_size``: inputs per base call)."""
        base_batch_size: PositiveInt | None = None
        """Inputs per base call (set from ``base.batch_size``); default: the whole call at once."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        cls = self.name
        base, base_batch_size = self.options.base, self.options.base_batch_size
        if base is not None and not isinstance(base, Reward):
            raise ConfigError(
                f"{cls}: 'base' must be a built reward; build the wrapper through the loader, e.g. "
                f"rewardzoo.load_reward('group_rank', base={base!r})",
                field="kwargs.base",
            )
        if base is None and self.base_required:
            raise ConfigError(
                f"{cls} needs kwargs 'base': a reward name or a mapping with reward_model", field="kwargs.base"
            )
        self.base = base
        self.base_batch_size = base_batch_size
        if base is None:
            return
        self.inputs = base.inputs.with_fields((*base.inputs.fields, "group_id"))
        self.io_bound = base.io_bound  # over a served base, the wrapper's calls wait on the server too
        if base.kind == "groupwise" and base_batch_size is not None:
            raise ConfigError(
                f"{cls}: base '{base.name}' is groupwise and takes whole groups; remove batch_size from 'base'",
                field="kwargs.base.batch_size",
            )

    # -- scoring --------------------------------------------------------------------------------
    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        group_id = fields.get("group_id")
        n = len(group_id) if group_id is not None else len(next(iter(fields.values()), ()))
        groups = group_positions(group_id, n)
        base = self.base_scores(fields, n)
        out = np.empty(n, dtype=np.float64)
        for idx in groups:
            out[idx] = self.score_group(base[idx])
        return RewardOutput(out, extras={"base_score": base})

    def score_group(self, scores: np.ndarray) -> np.ndarray:
        """Group scores from the oriented base scores of one group (same order)."""
        raise NotImplementedError

    def required_base(self) -> Reward:
        """The base reward; ConfigError for a wrapper built without one."""
        if self.base is None:
            raise ConfigError(
                f"{self.name} needs kwargs 'base': a reward name or a mapping with reward_model", field="kwargs.base"
            )
        return self.base

    def base_scores(self, fields: Mapping[str, Sequence[Any]], n: int) -> np.ndarray:
        """Oriented base scores, one base evaluation per input (chunked by the base batch_size)."""
        base = self.required_base()
        wanted = set(base.inputs.fields)
        if "audio" in wanted:
            wanted.add("audio_sample_rate")
        base_fields = {k: list(v) for k, v in fields.items() if k in wanted}
        step = self.base_batch_size or max(n, 1)
        scores = np.empty(n, dtype=np.float64)
        label = f"{self.name} -> base '{base.name}'"
        for start in range(0, n, step):
            stop = min(start + step, n)
            chunk = {k: v[start:stop] for k, v in base_fields.items()}
            try:
                output = invoke(base, chunk)
                scores[start:stop], _ = validate_scores(output, stop - start, label, base.info.score_range)
            except InputError as exc:
                raise exc.located(indices=range(start, stop), prefix=f"base reward '{base.name}': ") from exc
            except RewardOutputError as exc:
                raise exc.remapped(range(start, stop)) from exc
        return scores if base.info.higher_is_better else -scores


class GroupRank(GroupwiseOverBase):
    """Rank of each sample's base score within its group, scaled to [0, 1].

    ``score_i = rank_i / (n - 1)`` with ``rank_i`` the 0-based ascending rank of the (oriented)
    base score among the n samples of the group; tied scores get the average of the ranks they span
    (two samples tied for the top of a group of 4 both get 2.5 / 3). A group of one scores 0.5.
    Flow-Factory's ``pickscore_rank`` uses ``rank / n`` (best sample n-1/n); ours spans [0, 1]
    for every group size.

    Inputs: the base's fields + ``group_id``. Range [0, 1]; higher is better.
    """

    def score_group(self, scores: np.ndarray) -> np.ndarray:
        n = len(scores)
        if n == 1:
            return np.full(1, 0.5)
        return average_ranks(scores) / (n - 1)


class GroupNormalized(GroupwiseOverBase):
    """Group advantage of the base score: ``(s - mean_g) / (std_g + eps)``.

    ``std_g`` uses ``ddof``; options: :class:`Options`. A group of one (or ``n <= ddof``) has no
    spread and scores 0; a group of equal scores scores 0.

    Inputs: the base's fields + ``group_id``. Range (-inf, inf); higher is better.
    """

    class Options(GroupwiseOverBase.Options):
        ddof: int = Field(0, ge=0)
        """Delta degrees of freedom of ``std_g``: 0 (population std, flow_grpo) or 1 (sample std, DanceGRPO)."""
        eps: PositiveNumber = 1e-4
        """Added to ``std_g``: ``1e-4`` as flow_grpo; DanceGRPO uses ``1e-8``."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.ddof, self.eps = self.options.ddof, self.options.eps

    def score_group(self, scores: np.ndarray) -> np.ndarray:
        centred = scores - scores.mean()
        if len(scores) <= self.ddof:
            return np.zeros(len(scores))
        std = math.sqrt(float(np.dot(centred, centred)) / (len(scores) - self.ddof))
        return centred / (std + self.eps)


class PairwiseWinRate(GroupwiseOverBase, PairwiseJudged):
    """Pref-GRPO pairwise win rate: every pair of the group is judged; ``score_i = wins_i / (n - 1)``.

    A pair (i, j) has ``p = P(i beats j)``. ``mode: hard`` (default, Pref-GRPO's discrete wins):
    i gets 1 when p > 0.5, 0 when p < 0.5 and 0.5 on a tie (p == 0.5); ``mode: soft``: i gets p
    and j gets 1 - p (expected wins). A group of one scores 0.5.

    Judges:

    - ``judge: bradley_terry`` (default) over a ``base`` reward:
      ``p = sigmoid((s_i - s_j) / temperature)`` from n base evaluations (not n^2). In hard mode
      this is "the higher base score wins, equal scores tie" and ``temperature`` has no effect.
    - ``judge: "pkg.mod:obj"`` (or a callable, from Python): a user pairwise judge. A class is
      instantiated with ``judge_kwargs`` (plus ``device``/``dtype`` when its constructor takes them);
      a function is used as is. It is called once per unordered pair as
      ``judge(first, second) -> P(first beats second)``, each a dict of the sample's declared fields
      (converted; ``audio`` brings ``audio_sample_rate``). The fields are ``fields:`` in kwargs, else
      the judge's ``required_fields`` attribute; ``use_tensor_inputs`` likewise (default false).
      It must return a number in [0, 1] (bools count as 0/1); anything else is an error.
      A judge with a ``judge_pairs(pairs)`` method is called once per group instead, with the list of
      ``(first, second)`` pairs, and returns one such number per pair, or ``(numbers, extras)`` with
      per-pair numeric extras (e.g. ``substituted``), each reported per sample as the sum over its pairs.
      No ``base`` with a user judge.

    Inputs: the base's (or judge's) fields + ``group_id``. Range [0, 1]; higher is better. Options:
    :class:`Options`. The pairs of a user judge and the wins are the floor's
    (:class:`~rewardzoo.rewards.models.groups.PairwiseJudged`), which the VLM pairwise judges share.
    """

    base_required: ClassVar[bool] = False
    MODES: ClassVar[tuple[str, ...]] = ("hard", "soft")

    class Options(GroupwiseOverBase.Options):
        judge: Judge = "bradley_terry"
        """``bradley_terry`` (or ``bt``) over ``base``, or a user pairwise judge ``pkg.mod:obj`` (a callable
        from Python)."""
        judge_kwargs: dict[str, Any] | None = None
        """A user judge class's constructor arguments."""
        fields: list[str] | None = Field(None, strict=False)
        """The sample fields a user judge receives; default: its ``required_fields`` attribute."""
        use_tensor_inputs: bool | None = None
        """A user judge receives media as tensors; default: its ``use_tensor_inputs`` attribute, else false."""
        temperature: PositiveNumber = 1.0
        """Bradley-Terry: ``p = sigmoid((s_i - s_j) / temperature)`` (no effect in hard mode)."""
        mode: Literal["hard", "soft"] = "hard"
        """``hard``: Pref-GRPO's discrete wins (1, 0, or 0.5 on a tie); ``soft``: expected wins (``p``)."""

        @model_validator(mode="after")
        def _judge_and_base(self) -> PairwiseWinRate.Options:
            if _is_bradley_terry(self.judge):
                if self.base is None:
                    raise ConfigError(
                        "PairwiseWinRate: the Bradley-Terry judge needs kwargs 'base' (the reward whose "
                        "scores it compares); or set 'judge' to a pairwise judge 'pkg.mod:callable'",
                        field="kwargs.base",
                    )
                given = [
                    k for k in ("judge_kwargs", "fields", "use_tensor_inputs") if getattr(self, k) not in (None, {})
                ]
                if given:
                    raise ConfigError(
                        "PairwiseWinRate: judge_kwargs / fields / use_tensor_inputs apply to a user judge "
                        "only; the Bradley-Terry judge takes them from its base",
                        field=f"kwargs.{given[0]}",
                    )
            elif self.base is not None:
                raise ConfigError(
                    "PairwiseWinRate: give either 'base' (Bradley-Terry judge) or a user 'judge', not both",
                    field="kwargs.base",
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        opts = self.options
        self.mode, self.temperature = opts.mode, opts.temperature
        self.bradley_terry = _is_bradley_terry(opts.judge)
        if self.bradley_terry:
            self.judge = None
            return
        judge = opts.judge
        name = judge if isinstance(judge, str) else getattr(judge, "__qualname__", repr(judge))
        self.use_judge(
            _build_judge(judge, dict(opts.judge_kwargs or {}), device, dtype), name, opts.fields, opts.use_tensor_inputs
        )

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        if self.judge is None:
            return GroupwiseOverBase.__call__(self, **fields)
        return self.judge_groups(fields)

    def score_group(self, scores: np.ndarray) -> np.ndarray:
        n = len(scores)
        if n == 1:
            return np.full(1, 0.5)
        diff = scores[:, None] - scores[None, :]
        prob = _sigmoid(diff / self.temperature) if self.mode == "soft" else np.sign(diff) * 0.5 + 0.5
        return win_counts(prob, self.mode) / (n - 1)


def _is_bradley_terry(judge: Any) -> bool:
    return isinstance(judge, str) and judge.lower() in ("bradley_terry", "bt")


def _judge_form(value: Any) -> Any:
    if isinstance(value, str) or callable(value):
        return value
    raise ValueError(f"must be 'bradley_terry', a Python path 'pkg.mod:callable' or a callable, got {value!r}")


#: The type of :class:`PairwiseWinRate`'s ``judge`` option: a name or Python path, or (from Python) a callable.
Judge = Annotated[Any, AfterValidator(_judge_form), WithJsonSchema({"type": "string"})]


def _build_judge(judge: str | Callable, judge_kwargs: dict, device: str, dtype: str) -> Callable:
    """Resolve ``pkg.mod:obj`` (or take a callable); instantiate classes; check the result is callable."""
    obj: Any = judge
    if isinstance(judge, str):
        if ":" not in judge and "." not in judge:
            raise ConfigError(
                f"PairwiseWinRate: judge must be 'bradley_terry' or a Python path 'pkg.mod:callable', got {judge!r}",
                field="kwargs.judge",
            )
        obj = import_path(judge)
    if isinstance(obj, type):
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}
        extra = {k: v for k, v in (("device", device), ("dtype", dtype)) if k in params and k not in judge_kwargs}
        obj = obj(**judge_kwargs, **extra)
    elif judge_kwargs:
        raise ConfigError(
            "PairwiseWinRate: judge_kwargs need a judge class; the judge is not a class", field="kwargs.judge_kwargs"
        )
    if not callable(obj):
        raise ConfigError(f"PairwiseWinRate: judge {judge!r} is not callable", field="kwargs.judge")
    return obj
