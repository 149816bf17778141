"""TRL ``GRPOTrainer(reward_funcs=..., args=GRPOConfig(reward_weights=...))``.

:func:`trl_reward_funcs` gives one plain function per configured reward (TRL treats an ``nn.Module`` as
a sequence classifier, so these are functions with a ``__name__``). TRL calls each with keywords only —
``prompts``, ``completions``, ``completion_ids``, every dataset column, ``trainer_state``, ``log_metric``
and ``log_extra`` — and takes ``list[float | None]`` (None where the reward does not apply: TRL turns it
into NaN and leaves it out of that row's weighted sum)::

    funcs, weights = rewardzoo.integrations.trl_reward_funcs("rewards.yaml", tokenizer=tokenizer,
                                                             group_by="prompt")
    trainer = GRPOTrainer(model=..., reward_funcs=funcs, args=GRPOConfig(reward_weights=weights, ...))

Conversations (lists of ``{"role", "content"}`` messages) are rendered with the tokenizer's chat
template exactly as TRL renders them for its own reward models (``prompt + completion`` through
``apply_chat_template``; the prompt part is the rendered prompt with its generation prompt, the
completion the rest). Without a tokenizer, or for plain-text datasets, the text is used as it is
(message contents joined by newlines when no tokenizer is given). Multimodal content lists give their
text parts; TRL's ``images`` column becomes each sample's ``condition_images``. ``group_by="prompt"``
gives every sample of one prompt the same ``group_id`` (TRL samples ``num_generations`` completions per
prompt), so groupwise rewards see their groups, across ranks too when ``torch.distributed`` is
initialised. A reward's extras are logged through TRL's ``log_metric`` as ``NAME/KEY`` (their mean over
the samples the reward applied to).

A scheduled weight (``weight: {schedule: linear, ...}``) is read at ``trainer_state.global_step``: TRL's own
``reward_weights`` are fixed, so such a function gets weight 1 there and returns its scores times the weight
of that step (``result.weights``); every call passes TRL's global step to the processor.

``monitor=RewardMonitor(config)`` feeds a :class:`~rewardzoo.monitor.RewardMonitor`: once every function of a
step has scored (TRL calls them one after another, or gathers them), their results are combined and passed
to ``monitor.update`` at ``trainer_state.global_step``, and the metrics are logged through ``log_metric`` as
``monitor/KEY`` (alarms as ``monitor/alarm/NAME``). On several ranks each rank's monitor sees its own samples.

All functions built from one config share one loader, so each model is loaded once. With
``concurrent=True`` they are coroutine functions that TRL gathers, each scoring on its own thread (see
:func:`trl_reward_funcs`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..core.batching import DaemonPool
from ..core.distributed import DistributedRewardProcessor
from ..core.engine import RewardResult
from ..core.loader import RewardLoader
from ..errors import ConfigError, InputError
from ..rewards.base import is_text_extra
from ..spec.config import WeightSchedule
from ..spec.sample import Sample, field_names
from .common import ConfigSource, MonitorFeed, specs_of

_SAMPLE_FIELDS = set(field_names())
#: TRL's own keyword arguments (not dataset columns).
_TRL_RESERVED = {"prompts", "completions", "completion_ids", "trainer_state", "log_metric", "log_extra", "environments"}
GROUP_BY = ("prompt",)


def _is_conversation(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(m, Mapping) and "content" in m for m in value)
    )


def _content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a multimodal content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        )
    return str(content)


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if _is_conversation(value):
        return "\n".join(_content_text(m["content"]) for m in value)
    raise InputError(f"expected text or a list of chat messages, got {type(value).__name__}")


def render_pair(prompt: Any, completion: Any, tokenizer: Any = None) -> tuple[str, str]:
    """(prompt text, completion text) of one TRL pair, rendered as TRL renders it for reward models."""
    if tokenizer is None or not _is_conversation(prompt):
        return _plain(prompt), _plain(completion) if completion is not None else ""
    messages = list(prompt) + (
        list(completion) if _is_conversation(completion) else [{"role": "assistant", "content": _plain(completion)}]
    )
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    ends_with_user = prompt[-1].get("role") == "user"
    head = tokenizer.apply_chat_template(
        list(prompt), tokenize=False, add_generation_prompt=ends_with_user, continue_final_message=not ends_with_user
    )
    if full.startswith(head):
        return head, full[len(head) :]
    return full, ""  # a template that does not extend the prompt: score the whole rendering


def _group_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


def trl_samples(
    prompts: Sequence[Any] | None,
    completions: Sequence[Any] | None,
    columns: Mapping[str, Any],
    *,
    tokenizer: Any = None,
    group_by: str | None = None,
) -> list[Sample]:
    """Samples from TRL's keyword arguments; dataset columns that are not sample fields go into metadata."""
    n = len(completions if completions is not None else prompts or [])
    for key, values in columns.items():
        if key not in _TRL_RESERVED and isinstance(values, (list, tuple)) and len(values) != n:
            raise InputError(
                f"column '{key}' has {len(values)} values for {n} completions; TRL passes one per completion", field=key
            )
    samples = []
    for i in range(n):
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, values in columns.items():
            if key in _TRL_RESERVED or not isinstance(values, (list, tuple)):
                continue
            if key == "images":
                images = values[i]
                fields["condition_images"] = list(images) if isinstance(images, (list, tuple)) else [images]
                continue
            (fields if key in _SAMPLE_FIELDS else extra)[key] = values[i]
        try:
            if prompts is not None:
                completion = completions[i] if completions is not None else None
                fields["prompt"], text = render_pair(prompts[i], completion, tokenizer)
                if completions is not None:
                    fields["completion"] = text
                if group_by == "prompt" and fields.get("group_id") is None:
                    fields["group_id"] = _group_key(prompts[i])
            elif completions is not None:
                fields["completion"] = _plain(completions[i])
            if extra and fields.get("metadata") is None:
                fields["metadata"] = {
                    k: v for k, v in extra.items() if isinstance(v, (str, int, float, bool, type(None)))
                }
            samples.append(Sample(**fields))
        except InputError as exc:
            raise exc.located(sample=i) from None
    return samples


def trl_reward_funcs(
    config: ConfigSource,
    split: str = "train",
    loader: RewardLoader | None = None,
    *,
    tokenizer: Any = None,
    group_by: str | None = None,
    concurrent: bool = False,
    monitor: Any = None,
) -> tuple[list[Callable[..., Any]], list[float]]:
    """(reward functions, reward_weights) for TRL's GRPOTrainer, one function per configured reward.

    ``tokenizer``: renders conversational prompts with its chat template as TRL does (see the module
    docstring). ``group_by="prompt"``: samples of one prompt form a group, for groupwise rewards.
    Per-dataset weight mappings have no TRL equivalent (TRL weighs a function, not a row): configure one
    stream per dataset with ``applicable_datasets`` and a scalar weight instead.

    ``concurrent=True`` gives coroutine functions (``async def``) instead, which TRL runs together
    (``asyncio.gather`` on its event-loop thread) rather than one after another: each scores on its own
    worker thread, so the reward phase takes about as long as the slowest reward, not the sum. Scores,
    groups and logged extras are those of the plain functions; a reward that is not ``thread_safe`` is
    still never called on two threads at once (its instance lock). Across ranks, the functions whose
    calls run the group exchange share one thread, so they reach their collectives in the same order on
    every rank. TRL runs plain functions before it gathers coroutines: make every function concurrent.
    """
    if group_by is not None and group_by not in GROUP_BY:
        raise ConfigError(f"group_by must be one of {GROUP_BY} or None, got {group_by!r}", field="group_by")
    loader = loader or RewardLoader()
    exchange_lane = _Lane("rewardzoo-trl-exchange")  # shared by the functions that run the group exchange
    funcs, weights = [], []
    specs = specs_of(config, split)
    feed = MonitorFeed(monitor, [s.name for s in specs], split) if monitor is not None else None
    for spec in specs:
        if isinstance(spec.weight, Mapping):
            raise ConfigError(
                "TRL takes one weight per reward function; split per-dataset weights into one entry "
                "per dataset with applicable_datasets",
                entry=spec.name,
                field="weight",
            )
        # the distributed processor is the plain one until torch.distributed runs with several ranks
        processor = DistributedRewardProcessor([spec], loader)
        funcs.append(
            _trl_coroutine(processor, spec.name, tokenizer, group_by, exchange_lane, feed)
            if concurrent
            else _trl_function(processor, spec.name, tokenizer, group_by, feed)
        )
        # a scheduled weight is applied in the function
        weights.append(1.0 if isinstance(spec.weight, WeightSchedule) else float(spec.weight))
    return funcs, weights


def _score(
    processor: DistributedRewardProcessor,
    tokenizer: Any,
    group_by: str | None,
    prompts: Any,
    completions: Any,
    columns: Mapping[str, Any],
) -> RewardResult:
    step = getattr(columns.get("trainer_state"), "global_step", None)
    return processor(trl_samples(prompts, completions, columns, tokenizer=tokenizer, group_by=group_by), step=step)


def _answer(
    result: RewardResult, name: str, columns: Mapping[str, Any], feed: MonitorFeed | None, scheduled: bool = False
) -> list[float | None]:
    """TRL's return value for stream ``name``; its numeric extras (and, completing a step, the monitor's
    metrics) logged through ``log_metric`` first."""
    log_metric = columns.get("log_metric")
    if feed is not None:
        state = columns.get("trainer_state")
        metrics = feed.add(name, result, getattr(state, "global_step", None))
        if metrics and callable(log_metric):
            for key, value in metrics.items():
                log_metric(f"monitor/{key}", value)
    if callable(log_metric):
        for key, values in result.extras.get(name, {}).items():
            if is_text_extra(values):
                continue  # log_metric takes numbers
            finite = values[~np.isnan(values)]
            if finite.size:
                log_metric(f"{name}/{key}", float(finite.mean()))
    scores = result.rewards[name]
    if scheduled:
        scores = scores * result.weights[name]  # TRL's weight for this function is 1 (see trl_reward_funcs)
    return [None if np.isnan(v) else float(v) for v in scores]


def _named(func: Callable, name: str) -> Callable:
    func.__name__ = func.__qualname__ = name
    return func


def _trl_function(
    processor: DistributedRewardProcessor, name: str, tokenizer: Any, group_by: str | None, feed: MonitorFeed | None
) -> Callable[..., list[float | None]]:
    def reward_func(prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        result = _score(processor, tokenizer, group_by, prompts, completions, columns)
        return _answer(result, name, columns, feed, processor.specs[0].scheduled)

    return _named(reward_func, name)


class _Lane:
    """One daemon worker thread, started on first use; its calls run one at a time, in submission order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool: DaemonPool | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = DaemonPool(1, self.name)
        return asyncio.wrap_future(self._pool.submit(fn))


def _trl_coroutine(
    processor: DistributedRewardProcessor,
    name: str,
    tokenizer: Any,
    group_by: str | None,
    exchange_lane: _Lane,
    feed: MonitorFeed | None,
) -> Callable[..., Any]:
    own_lane = _Lane(f"rewardzoo-trl-{name}")

    async def reward_func(prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        # submitted before the first await: gather starts its coroutines in list order, so the exchange
        # lane receives the same sequence of calls on every rank
        lane = exchange_lane if processor.exchanges_groups else own_lane
        result = await lane.submit(partial(_score, processor, tokenizer, group_by, prompts, completions, columns))
        # on TRL's loop thread, as its logging expects
        return _answer(result, name, columns, feed, processor.specs[0].scheduled)

    return _named(reward_func, name)
