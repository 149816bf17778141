"""Groupwise rewards across ranks (torch.distributed) and rank-ordered model loading.

A trainer running on several processes gives each rank its own samples; a group's samples may sit on
different ranks. :class:`DistributedRewardProcessor` scores pointwise rewards locally and groupwise
rewards on complete groups, each group exactly once, in three ``all_gather_object`` rounds over the
process group (gloo on CPU, or whatever backend the trainer initialised):

1. **keys** — every rank sends, per groupwise reward, its group ids and member counts (or its error).
   All ranks derive the same plan: a group held by one rank is scored there; a *split* group is owned
   by the rank holding most of its members (ties alternate between those ranks).
2. **fields** (only when some group is split) — members of split groups send the reward's declared
   fields, converted, plus ``dataset`` and ``group_id``, to the owner (tensors moved to CPU).
3. **scores** — owners call the reward once per group and send the scores (and extras) of remote
   members back to the rank and position that own them; every rank also reports its error status.

Each round doubles as an error-status exchange: a rank that fails (bad input, a reward raising) still
joins the round with its error, so every rank raises at the same point — the failing rank its own
error, the others a :class:`RemoteRankError` naming the rank and the reward. A rank that dies outside
the processor is caught by the process group's own timeout (``init_process_group(timeout=...)``) or,
with gloo, by the closed connection.

Group ids are compared as explicit ``(type, value)`` pairs: ``7`` and ``"7"`` are different groups.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError, RemoteRankError, RewardExecutionError
from ..rewards.base import Reward
from .deadlines import guard
from .engine import ConversionCache, Outcome, ScoreTable, Scoring, build_fields, call_reward, score_specs
from .processor import RewardProcessor

if TYPE_CHECKING:
    from ..spec.config import RewardSpec
    from ..spec.sample import Sample
    from .loader import RewardLoader

#: One rank's share of a split group: (rank, member indices on that rank, their fields; None: this rank's own).
_Part = tuple[int, Sequence[int], "dict[str, list[Any]] | None"]


def _dist() -> Any:  # torch.distributed (the type check reads torch as Any)
    import torch.distributed as dist

    return dist


def is_distributed(group: Any = None) -> bool:
    """True when torch.distributed is initialised with more than one rank in ``group``."""
    try:
        dist = _dist()
    except ImportError:
        return False
    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1)


@dataclass
class _GroupPlan:
    key: tuple[str, Any]
    counts: dict[int, int]  # rank -> members on that rank
    owner: int

    @property
    def split(self) -> bool:
        return len(self.counts) > 1


def plan_groups(keys_per_rank: Sequence[Sequence[tuple[Any, int]]]) -> list[_GroupPlan]:
    """The same plan on every rank: groups in order of first appearance (rank 0 first), their owners."""
    groups: dict[Any, dict[int, int]] = {}
    for rank, keys in enumerate(keys_per_rank):
        for key, count in keys:
            groups.setdefault(key, {})[rank] = groups.get(key, {}).get(rank, 0) + count
    plans, split = [], 0
    for key, counts in groups.items():
        if len(counts) == 1:
            owner = next(iter(counts))
        else:
            most = max(counts.values())
            candidates = sorted(r for r, c in counts.items() if c == most)
            owner = candidates[split % len(candidates)]
            split += 1
        plans.append(_GroupPlan(key, counts, owner))
    return plans


def _portable(value: Any) -> Any:
    """Tensors to CPU (recursively through mappings, lists and tuples), so any rank can unpickle them."""
    if isinstance(value, Mapping):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_portable(v) for v in value)
    if hasattr(value, "detach") and getattr(value, "is_cuda", False):
        return value.detach().cpu()
    return value


def _error_info(exc: BaseException, rank: int) -> dict[str, Any]:
    return {"rank": rank, "type": type(exc).__name__, "message": str(exc), "reward": getattr(exc, "reward", None)}


class GroupExchange:
    """The cross-rank protocol of the module docstring over ``group`` (None = the default group)."""

    def __init__(self, group: Any = None) -> None:
        self.group = group

    @property
    def active(self) -> bool:
        return is_distributed(self.group)

    @property
    def rank(self) -> int:
        return int(_dist().get_rank(self.group))

    @property
    def world_size(self) -> int:
        return int(_dist().get_world_size(self.group))

    def _gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        try:
            _dist().all_gather_object(out, obj, group=self.group)
        except RuntimeError as exc:  # a peer crashed, or the process group's timeout expired
            raise RewardExecutionError(
                f"cross-rank reward exchange failed on rank {self.rank} (another rank "
                f"crashed or did not reach the exchange in time): {exc}"
            ) from exc
        return out

    def _round(self, payload: Any, error: BaseException | None) -> list[Any]:
        """One all_gather of ``payload`` (or this rank's error); raise if any rank failed."""
        me = self.rank
        sent = ("error", _error_info(error, me)) if error is not None else ("ok", payload)
        received = self._gather(sent)
        if error is not None:
            raise error
        for status, info in received:
            if status == "error":
                raise RemoteRankError(
                    f"rank {info['rank']} failed: {info['type']}: {info['message']}",
                    rank=info["rank"],
                    reward=info["reward"],
                )
        return [item for _, item in received]

    def score(
        self,
        processor: RewardProcessor,
        table: ScoreTable,
        cache: ConversionCache,
        run: Scoring = Scoring(),
    ) -> None:
        """Fill ``table`` for every spec of ``processor``: pointwise locally (except names in ``run.skip``,
        already handled by the caller), groupwise through the exchange.

        ``run.run_jobs(spec, reward, jobs)`` runs prepared calls (the owners' groups too); ``run.error``: a
        failure this rank already had (it still joins every round, then raises); ``run.finish()``: the
        caller's remaining work (e.g. waiting for its workers), run before the last round so that its errors
        reach the other ranks too.
        """
        groupwise = [s for s in processor.specs if processor.rewards[s.name].kind == "groupwise"]
        local: dict[str, dict[Any, list[int]]] = {}
        try:
            if run.error is None:
                local = score_specs(processor.specs, processor.rewards, table, cache, run, exchange_groups=True)
        except Exception as exc:
            run = replace(run, error=exc)
        if not groupwise:
            if run.error is not None:
                raise run.error
            if run.finish is not None:
                run.finish()
            return
        self._exchange(processor, groupwise, local, cache, table, run)

    def _exchange(
        self,
        processor: RewardProcessor,
        groupwise: list[RewardSpec],
        local: dict[str, dict[Any, list[int]]],
        cache: ConversionCache,
        table: ScoreTable,
        run: Scoring,
    ) -> None:
        me, error, run_jobs, finish = self.rank, run.error, run.run_jobs, run.finish
        keys = {s.name: [(k, len(m)) for k, m in local.get(s.name, {}).items()] for s in groupwise}
        everyone = self._round(keys, error)
        plans = {s.name: plan_groups([rank_keys[s.name] for rank_keys in everyone]) for s in groupwise}

        # round 2: members of split groups send their fields to the owner
        outgoing: dict[str, dict[Any, dict[str, Any]]] = {}
        try:
            for spec in groupwise:
                reward = processor.rewards[spec.name]
                for plan in plans[spec.name]:
                    if plan.split and me in plan.counts and plan.owner != me:
                        outgoing.setdefault(spec.name, {})[plan.key] = self._member_payload(
                            spec.name, reward, local[spec.name][plan.key], table.samples, cache
                        )
        except Exception as exc:
            error = exc
        received: list[Any] = [{} for _ in range(self.world_size)]
        if any(p.split for ps in plans.values() for p in ps):  # the same decision on every rank
            received = self._round(outgoing, error)

        # round 3: owners score their groups; scores of remote members go back to their ranks
        returned: dict[int, list[tuple[str, list[int], np.ndarray, dict[str, np.ndarray]]]] = {}
        try:
            for spec in groupwise if error is None else ():
                reward = processor.rewards[spec.name]
                jobs, layouts = [], []
                for plan in plans[spec.name]:
                    if plan.owner != me:
                        continue
                    parts = []  # (rank, member indices on that rank, their fields), in rank order
                    for rank in sorted(plan.counts):
                        if rank == me:
                            members = local[spec.name][plan.key]
                            parts.append((rank, members, None))
                        else:
                            payload = received[rank][spec.name][plan.key]
                            parts.append((rank, payload["index"], payload["fields"]))
                    layouts.append(parts)
                    size = [i for _, members, _ in parts for i in members]  # the group's members (its length)
                    jobs.append(guard(spec, reward, size, partial(self._call_group, spec.name, reward, parts, cache)))
                for parts, (scores, extras) in zip(layouts, run_jobs(spec, reward, jobs)):
                    offset = 0
                    for rank, members, _ in parts:
                        sl = slice(offset, offset + len(members))
                        offset += len(members)
                        part_extras = {k: v[sl] for k, v in extras.items()}
                        if rank == me:
                            table.put(spec.name, members, scores[sl], part_extras)
                        else:
                            returned.setdefault(rank, []).append((spec.name, list(members), scores[sl], part_extras))
            if error is None and finish is not None:
                finish()
        except Exception as exc:
            error = exc
        for sender in self._round(returned, error):
            for name, members, scores, extras in sender.get(me, []):
                table.put(name, members, scores, extras)

    @staticmethod
    def _member_payload(
        name: str, reward: Reward, members: list[int], samples: Sequence[Sample], cache: ConversionCache
    ) -> dict[str, Any]:
        """What travels for this rank's members of a split group: declared fields, dataset, group_id."""
        return {
            "index": list(members),
            "fields": _portable(build_fields(name, reward, members, cache)),
            "dataset": [samples[i].dataset for i in members],
            "group_id": [samples[i].group_id for i in members],
        }

    def _call_group(self, name: str, reward: Reward, parts: Sequence[_Part], cache: ConversionCache) -> Outcome:
        fields: dict[str, list[Any]] = {}
        labels: list[tuple[int, int]] = []
        for rank, members, remote in parts:
            part = build_fields(name, reward, members, cache) if remote is None else remote
            for key, values in part.items():
                fields.setdefault(key, []).extend(values)
            labels.extend((rank, i) for i in members)
        try:
            return call_reward(name, reward, fields, list(range(len(labels))))
        except InputError as exc:
            if exc.sample is None:
                raise
            rank, index = labels[exc.sample]
            if rank == self.rank:
                raise exc.located(indices=[i for _, i in labels]) from exc
            # another rank's sample: no local index to give, so the message names it
            raise exc.located(indices=(), suffix=f" (sample {index} of rank {rank})") from exc


class DistributedRewardProcessor(RewardProcessor):
    """A :class:`RewardProcessor` whose groupwise rewards see complete groups across ranks.

    Each rank calls it (or ``incremental()``'s runner ``finalize``) with its own samples, at the same
    point of the training loop; every rank must call it the same number of times (it runs collectives
    when the config has a groupwise reward). Without an initialised process group, or with one rank,
    it is the plain processor. ``group``: the process group (None = default; with NCCL, a gloo group
    from ``dist.new_group(backend="gloo")`` keeps the exchange off the GPU). ``rank_ordered_loading``:
    construct the models on rank 0 first, then on the other ranks (see :func:`rank_ordered`).
    """

    def __init__(
        self,
        specs: Sequence[RewardSpec | Mapping[str, Any] | str],
        loader: RewardLoader | None = None,
        *,
        group: Any = None,
        rank_ordered_loading: bool = False,
        advantage: str = "sum",
        decode: Any = None,
    ) -> None:
        self.exchange = GroupExchange(group)
        with rank_ordered(group) if rank_ordered_loading else contextlib.nullcontext():
            super().__init__(specs, loader, advantage=advantage, decode=decode)

    @property
    def collective(self) -> bool:
        """True while a multi-rank process group is initialised (then every rank must call together)."""
        return self.exchange.active

    @property
    def exchanges_groups(self) -> bool:
        """True when a call runs the cross-rank exchange (several ranks and a groupwise reward): then the
        calls of every processor doing so must come in the same order on every rank."""
        return self.collective and any(self.rewards[s.name].kind == "groupwise" for s in self.specs)

    def score_into(self, table: ScoreTable, cache: ConversionCache, run: Scoring = Scoring()) -> None:
        if not self.exchange.active:
            return super().score_into(table, cache, run)
        self.exchange.score(self, table, cache, run)


@contextlib.contextmanager
def rank_ordered(group: Any = None) -> Iterator[None]:
    """Run the block on rank 0 first, then on the other ranks together.

    Wrap model construction (``build_processors``, ``RewardProcessor(...)``) so that rank 0 downloads
    or pages in the weights once and the others then read them from the warm cache. If the block
    fails on rank 0, the other ranks raise :class:`RemoteRankError` instead of running it. Without an
    initialised multi-rank process group it simply runs the block. For several nodes, pass a group
    per node (each with its own first rank).
    """
    if not is_distributed(group):
        yield
        return
    dist = _dist()
    rank = dist.get_rank(group)
    first = dist.get_global_rank(group, 0) if group is not None else 0
    if rank == 0:
        status: list[Any] = [None]
        try:
            yield
        except BaseException as exc:
            status[0] = _error_info(exc, 0)
            raise
        finally:
            dist.broadcast_object_list(status, src=first, group=group)
    else:
        status = [None]
        dist.broadcast_object_list(status, src=first, group=group)
        if status[0] is not None:
            info = status[0]
            raise RemoteRankError(
                f"rank 0 failed while loading rewards: {info['type']}: {info['message']}", rank=0, reward=info["reward"]
            )
        yield
