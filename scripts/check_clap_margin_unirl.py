"""Cross-check ``clap_score`` ``mode: retrieval_margin`` against UniRL's own ``CLAPRewardScorer`` (not in the suite).

UniRL's scorer (``unirl/reward/local/clap.py`` at Tencent-Hunyuan/UniRL@0f5d2ae, the scorer of PR #475) is in no
fetchable snapshot; its file and the three framework modules it imports (``unirl/reward/base.py``,
``unirl/reward/local/base.py``, ``unirl/reward/local/device.py``) are stored by the code search. Save them,
unmodified, under ``--unirl DIR`` (``DIR/unirl/reward/...``). Their stored ``unirl/types/reward.py`` is from an older
commit that lacks what they import (``PromptSource``, ``DEFAULT_PROMPT_SOURCE``, ``PROMPT_SOURCES``,
``RewardRequest.original_prompt``), so this script supplies a stand-in for that one module: the request and
response containers, nothing that computes.

Both sides score the same tiny CLAP (``rewardzoo.testing.tiny_clap_dir``) on 10 s clips at 48 kHz (no crop, no pad on
either side) and short prompts (no truncation on either side): per-sample negatives from metadata, and a fixed
``retrieval_prompts`` set, at PR #475's weights 1.0 + 1.0 and at 0.5 + 2.0. Prints the largest differences.

Run: ``python scripts/check_clap_margin_unirl.py --unirl /tmp/unirl_ref``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

STAND_IN = '''"""Stand-in for unirl/types/reward.py: the containers CLAPRewardScorer reads (written by rewardzoo's check)."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional

PromptSource = Literal["original", "generation"]
PROMPT_SOURCES = ("original", "generation")
DEFAULT_PROMPT_SOURCE = "original"


@dataclass
class _Texts:
    texts: List[str]


@dataclass
class RewardRequest:
    original_prompt: Optional[_Texts] = None
    generation_prompt: Optional[_Texts] = None
    metadata: Optional[List[Optional[Dict[str, Any]]]] = None
    audio: Optional[List[Any]] = None
    audio_sample_rate: Optional[int] = None

    @property
    def batch_size(self) -> int:
        return len(self.audio or [])


@dataclass
class RewardResponse:
    rewards: List[float] = field(default_factory=list)
    component_rewards: Dict[str, List[float]] = field(default_factory=dict)
    successes: List[bool] = field(default_factory=list)
    errors: List[Optional[str]] = field(default_factory=list)
    compute_time: float = 0.0
'''

FILES = (
    "unirl/reward/base.py",
    "unirl/reward/local/base.py",
    "unirl/reward/local/device.py",
    "unirl/reward/local/clap.py",
)


def overlay(unirl: Path) -> Path:
    """A temporary package root with UniRL's four files as given and the stand-in types module."""
    root = Path(tempfile.mkdtemp(prefix="unirl-"))
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(unirl / rel, root / rel)
    (root / "unirl/types").mkdir(parents=True, exist_ok=True)
    (root / "unirl/types/reward.py").write_text(STAND_IN)
    return root  # no __init__.py anywhere: namespace packages, so UniRL's package __init__ files are not needed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unirl", required=True, type=Path, help="folder holding unirl/reward/... as stored")
    args = parser.parse_args()
    sys.path.insert(0, str(overlay(args.unirl)))
    import numpy as np
    import torch
    from unirl.reward.local.clap import CLAPRewardScorer, CLAPSpec  # type: ignore[import-not-found]
    from unirl.types.reward import RewardRequest, _Texts  # type: ignore[import-not-found]

    from rewardzoo.rewards.audio.clap import ClapScore
    from rewardzoo.testing import tiny_clap_dir

    model = str(tiny_clap_dir(tempfile.mkdtemp(prefix="tiny-clap-"), seed=0))
    rng = np.random.default_rng(0)
    t = np.arange(480000) / 48000
    clips = [
        (0.2 * np.sin(2 * np.pi * f * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
        for f in (220, 440, 660, 880, 1320)
    ]
    prompts = ["a dog barking", "rain on a roof", "a dog barking", "birds singing", "a car horn"]
    negatives = [
        ["bird song", " thunder ", "a dog barking", "", "bird song"],
        ["a dog barking", "birds singing", "wind"],
        ["rain on a roof", "a car horn", "thunder", "wind", "bird song", "a bell", "a crowd"],
        ["a dog barking", "a bell"],
        ["wind", "waves"],
    ]
    worst = 0.0
    for weights in ((1.0, 1.0), (0.5, 2.0)):
        for fixed in (False, True):
            spec = CLAPSpec(
                device="cpu",
                model_id=model,
                matched_cosine_weight=weights[0],
                retrieval_margin_weight=weights[1],
                negative_prompts_metadata_key=None if fixed else "negs",
                retrieval_prompts=sorted(set(prompts)) + ["thunder"] if fixed else [],
            )
            theirs = CLAPRewardScorer(config=spec, base_device="cpu").compute_rewards(
                RewardRequest(
                    original_prompt=_Texts(list(prompts)),
                    metadata=[{"negs": n} for n in negatives],
                    audio=[torch.from_numpy(c) for c in clips],
                    audio_sample_rate=48000,
                )
            )
            kwargs = {"retrieval_prompts": spec.retrieval_prompts} if fixed else {"negatives_key": "negs"}
            ours = ClapScore(
                model_path=model, mode="retrieval_margin", cosine_weight=weights[0], margin_weight=weights[1], **kwargs
            )(audio=clips, prompt=prompts, audio_sample_rate=[48000] * 5, metadata=[{"negs": n} for n in negatives])
            diffs = {"score": np.abs(np.asarray(theirs.rewards) - ours.rewards).max()}
            for name in ("matched_cosine", "mismatched_cosine", "retrieval_margin", "retrieval_top1"):
                diffs[name] = np.abs(np.asarray(theirs.component_rewards[name]) - ours.extras[name]).max()
            worst = max(worst, *diffs.values())
            label = "retrieval_prompts" if fixed else "metadata negatives"
            print(
                f"weights {weights}, {label}: max |UniRL - rewardzoo| "
                + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
            )
    print(f"largest difference {worst:.2e}")
    return 0 if worst < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
