"""verl's reward loop: ``compute_score`` for ``reward.custom_reward_function``.

verl (0.9.x, ``verl/experimental/reward_loop``) calls the function once per sample, concurrently, by keyword
(``data_source``, ``solution_str``, ``ground_truth``, ``extra_info``) with the config's ``reward_kwargs``
merged in, awaits it (it is a coroutine function), and takes the ``"score"`` of the dict it returns (the other
keys become ``reward_extra_info``)::

    reward:
      custom_reward_function:
        path: pkg://rewardzoo.integrations.verl
        name: compute_score
        reward_kwargs:
          rewards: rewards.yaml         # a rewardzoo config, or a list of entries as under its rewards:
          split: train                  # or eval
          fields: {prompt: extra_info.prompt}   # rewardzoo field <- solution_str | ground_truth |
                                                # data_source | extra_info.KEY
          max_wait_ms: 5                # how long a call waits for others to share its batch
          group_size: 8                 # groupwise rewards: samples per prompt (actor_rollout_ref.rollout.n)

The answer is ``{"score": total, <reward>: score, ...}``: the config's weighted total and each reward's score
(NaN where a reward does not apply to the sample's dataset), plus ``weight/<reward>`` when the step is known.
Per-sample calls are gathered into batches (:mod:`rewardzoo.integrations.gather`): calls that arrive together
share one model forward per reward, up to the entry's ``batch_size``. Every error is raised to verl with the
reward, field and sample named; no sample silently scores 0.

Fields, by default: ``completion`` <- ``solution_str`` (verl decodes it without special tokens), ``prompt`` <-
``extra_info.prompt``, ``dataset`` <- ``data_source``, ``group_id`` <- ``extra_info.uid`` and the trainer
step <- ``extra_info.global_steps``, each when present; ``metadata`` is ``extra_info``'s plain values plus
``ground_truth``. A source named in ``fields`` must be present on every sample. verl's naive reward manager
passes the dataset row's ``extra_info`` (not the batch's ``uid`` or ``meta_info["global_steps"]``): for a
groupwise reward, map ``group_id`` to a per-prompt key of the row (``extra_info.index``), and for a scheduled
weight (``weight: {schedule: ...}``) put the step in ``extra_info`` (a scheduled weight without a step is an
error that says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, InputError
from ..spec.sample import Sample, field_names
from .gather import GROUP_TIMEOUT_S, MAX_WAIT_S, plain_value, score_dict, scorer_for

#: rewardzoo field <- verl source, used when the source is present (``fields`` overrides each).
DEFAULT_FIELDS = {
    "completion": "solution_str",
    "prompt": "extra_info.prompt",
    "dataset": "data_source",
    "group_id": "extra_info.uid",
    "step": "extra_info.global_steps",
}
_TARGETS = set(field_names()) | {"step"}


def read_source(source: str, arguments: Mapping[str, Any]) -> tuple[bool, Any]:
    """(found, value) of ``source`` (a keyword name, or ``extra_info.KEY``) in a call's keyword arguments."""
    head, _, key = source.partition(".")
    if head not in arguments:
        return False, None
    value = arguments[head]
    if key:
        if not isinstance(value, Mapping) or key not in value or value[key] is None:
            return False, None
        value = value[key]
    return value is not None, value


def sample_from_call(
    arguments: Mapping[str, Any],
    fields: Mapping[str, str] | None,
    defaults: Mapping[str, str],
    metadata_sources: tuple[str, ...],
) -> tuple[Sample, int | None]:
    """The rewardzoo sample (and trainer step) of one per-sample call; ``fields`` maps rewardzoo fields to
    sources (a source named there must be present); ``metadata`` gathers the plain values of ``metadata_sources``
    (mappings flattened: ``extra_info``'s keys) unless ``fields`` names a source for it."""
    given = dict(fields or {})
    for target, source in given.items():
        if target not in _TARGETS:
            raise ConfigError(
                f"unknown rewardzoo field '{target}'; fields map one of {sorted(_TARGETS)} to a source",
                field=f"fields.{target}",
            )
        if not isinstance(source, str) or not source:
            raise ConfigError("a source is a keyword name or extra_info.KEY", field=f"fields.{target}")
    values: dict[str, Any] = {}
    for target, source in {**defaults, **given}.items():
        found, value = read_source(source, arguments)
        if found:
            values[target] = value
        elif target in given:
            raise InputError(f"the call has no '{source}' (fields.{target})", field=target)
    if "metadata" not in values:
        meta: dict[str, Any] = {}
        for source in metadata_sources:
            found, value = read_source(source, arguments)
            items = value.items() if isinstance(value, Mapping) else [(source, value)] if found else []
            meta.update({str(k): v for k, v in items if isinstance(v, (str, int, float, bool))})
        values["metadata"] = meta or None
    step = values.pop("step", None)
    if isinstance(values.get("group_id"), float) and values["group_id"].is_integer():
        values["group_id"] = int(values["group_id"])
    return Sample(**values), step


async def compute_score(
    data_source: Any = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    rewards: Any = None,
    split: str = "train",
    fields: Mapping[str, str] | None = None,
    max_wait_ms: float = MAX_WAIT_S * 1000,
    group_size: int | None = None,
    group_timeout_s: float = GROUP_TIMEOUT_S,
    **_: Any,
) -> dict[str, float]:
    """One sample's ``{"score": total, <reward>: score, ...}`` for verl's reward loop (see the module docstring).
    Keywords verl adds for its own reward models (``reward_router_address``, ...) are accepted and unused."""
    scorer = scorer_for(rewards, split, max_wait_ms=max_wait_ms, group_size=group_size, group_timeout_s=group_timeout_s)
    arguments = {
        "data_source": data_source,
        "solution_str": solution_str,
        "ground_truth": ground_truth,
        "extra_info": extra_info,
    }
    sample, step = sample_from_call(arguments, plain_value(fields), DEFAULT_FIELDS, ("extra_info", "ground_truth"))
    return score_dict(await scorer.score(sample, step))
