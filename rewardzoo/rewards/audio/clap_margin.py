"""CLAP's retrieval margin (``clap_score`` with ``mode: retrieval_margin``): each sample's negative captions and the
composite score ``cosine_weight * cos(a, t) + margin_weight * (cos(a, t) - max_j cos(a, n_j))``.

The formula and the handling of negatives follow UniRL's ``CLAPRewardScorer`` (``unirl/reward/local/clap.py`` at
Tencent-Hunyuan/UniRL@0f5d2ae, the scorer of UniRL PR #475): raw cosines of the L2-normalised projected embeddings
(no logit scale), the hardest negative is the highest-cosine one; a sample's listed negatives are stripped, empty
ones and the sample's own prompt dropped, duplicates removed. Where the negatives come from when a sample lists
none (the other prompts of the call) is rewardzoo's addition: UniRL requires the list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...errors import InputError


def _listed(meta: Any, key: str, sample: int) -> list[Any] | None:
    """``metadata[key]`` of one sample (a JSON string or a mapping): the list it holds, None when it has no key."""
    data = json.loads(meta) if isinstance(meta, str) else meta
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InputError(
            f"metadata must be a mapping to hold '{key}' (the negative captions)", field="metadata", sample=sample
        )
    if key not in data or data[key] is None:
        return None
    value = data[key]
    if not isinstance(value, (list, tuple)):
        raise InputError(
            f"metadata['{key}'] must be a list of negative captions, got {type(value).__name__}",
            field="metadata",
            sample=sample,
        )
    return list(value)


def _cleaned(candidates: Sequence[Any], prompt: str, key: str, sample: int) -> list[str]:
    """UniRL's cleaning of listed negatives: stripped, empty ones and the prompt itself dropped, first of duplicates."""
    for c in candidates:
        if not isinstance(c, str):
            raise InputError(
                f"metadata['{key}'] must hold strings, got {type(c).__name__}", field="metadata", sample=sample
            )
    own = prompt.strip()
    return list(dict.fromkeys(s for s in (c.strip() for c in candidates) if s and s != own))


def negatives_for(
    prompts: Sequence[str],
    metadata: Sequence[Any] | None,
    negatives_key: str | None,
    retrieval_prompts: Sequence[str],
    batch_negatives: bool = False,
) -> list[list[str]]:
    """The negative captions of each sample, in this order of precedence:

    - ``retrieval_prompts`` (a fixed candidate set): every other entry of the set; a prompt outside the set is an
      InputError (UniRL requires the prompt to be one of them);
    - ``metadata[negatives_key]`` when the sample's metadata has the key: its cleaned list, which must keep at least
      one caption;
    - otherwise, with ``batch_negatives``, the other distinct prompts of the same call (rewardzoo's opt-in; UniRL has
      none, and such a score depends on the batch).

    A sample left with no negative is an InputError naming the field and the sample.
    """
    if retrieval_prompts:
        out = []
        for i, p in enumerate(prompts):
            if p.strip() not in retrieval_prompts:
                raise InputError(
                    "prompt is not one of kwargs.retrieval_prompts (its matched caption must be in the candidate set)",
                    field="prompt",
                    sample=i,
                )
            out.append([r for r in retrieval_prompts if r != p.strip()])
        return out
    if negatives_key is not None and (metadata is None or len(metadata) != len(prompts)):
        raise InputError(f"needs metadata (with '{negatives_key}' or without it) for every clip", field="metadata")
    distinct = list(dict.fromkeys(p.strip() for p in prompts))
    out = []
    for i, p in enumerate(prompts):
        listed = _listed(metadata[i], negatives_key, i) if negatives_key is not None and metadata else None
        if listed is not None:
            negatives = _cleaned(listed, p, negatives_key or "", i)
            if not negatives:
                raise InputError(
                    f"metadata['{negatives_key}'] holds no caption other than the prompt itself",
                    field="metadata",
                    sample=i,
                )
        elif not batch_negatives:
            raise InputError(
                "retrieval_margin needs negative captions: "
                + (f"the sample's metadata has no '{negatives_key}'" if negatives_key else "none were given")
                + "; list them per sample (kwargs.negatives_key), give kwargs.retrieval_prompts, or set "
                "kwargs.batch_negatives: true to take the call's other prompts",
                field="metadata" if negatives_key else "prompt",
                sample=i,
            )
        else:
            negatives = [q for q in distinct if q != p.strip()]
            if not negatives:
                where = f"metadata['{negatives_key}']" if negatives_key else "kwargs.negatives_key"
                raise InputError(
                    "retrieval_margin needs negative captions: the call has no other distinct prompt; give them "
                    f"in {where} or score several prompts in one call",
                    field="metadata" if negatives_key else "prompt",
                    sample=i,
                )
        out.append(negatives)
    return out


def margin_scores(matched: Any, negative_cos: Sequence[Any], cosine_weight: float, margin_weight: float) -> dict:
    """The composite score and its parts from the matched cosines ``(N,)`` and each sample's negative cosines.

    Returns ``score`` and UniRL's component names: ``matched_cosine``, ``mismatched_cosine`` (mean over the
    negatives), ``retrieval_margin`` (matched minus the hardest negative), ``retrieval_top1`` (1 when the matched
    caption beats every negative)."""
    import torch

    hardest = torch.stack([n.max() for n in negative_cos])
    mean = torch.stack([n.mean() for n in negative_cos])
    margin = matched - hardest
    return {
        "score": cosine_weight * matched + margin_weight * margin,
        "matched_cosine": matched,
        "mismatched_cosine": mean,
        "retrieval_margin": margin,
        "retrieval_top1": (matched > hardest).float(),
    }
