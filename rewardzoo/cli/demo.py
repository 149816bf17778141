"""`rewardzoo demo`: score generated example media with every reward that needs no download.

The media (:func:`rewardzoo.jobs.demo.demo_samples`) are made on the fly: images, videos, audio clips and
edits, a few kB of arithmetic, nothing bundled.
"""

from __future__ import annotations

from ..catalog.resources import config_path
from ..core.resolve import load_config
from ..jobs.demo import demo_samples
from ..registry import info, missing_modules
from ..spec.config import RewardSpec
from .tables import format_table


def runnable_specs(specs: tuple[RewardSpec, ...]) -> tuple[list[RewardSpec], list[str]]:
    """Split specs into those whose extra is installed and notes for the skipped ones."""
    keep, skipped = [], []
    for spec in specs:
        entry = info(spec.reward_model)
        missing = missing_modules(entry.extra, entry.add_ons) if entry is not None else []
        if entry is None or not missing:
            keep.append(spec)
        elif set(missing) <= set(entry.add_ons):  # the extra is there; what its card installs beside it is not
            skipped.append(f"{spec.name} (needs {', '.join(missing)}: see 'rewardzoo card {entry.name}')")
        else:
            skipped.append(f"{spec.name} (pip install 'rewardzoo[{entry.extra}]')")
    return keep, skipped


def run_demo() -> str:
    """Score the demo media and return the printed report."""
    from ..core.processor import RewardProcessor

    specs, skipped = runnable_specs(load_config(config_path("demo")).rewards)
    labelled = demo_samples()
    result = RewardProcessor(specs)([s for _, s in labelled])
    sections = [
        "rewardzoo demo: generated media scored by every reward that needs no download (configs/demo.yaml).\n"
        "Higher is better in every column; the group rewards compare the three images by JPEG size."
    ]
    for dataset in ("image", "video", "audio", "edit"):
        rows = [i for i, (_, s) in enumerate(labelled) if s.dataset == dataset]
        names = [spec.name for spec in specs if spec.applies_to(dataset)]
        if not names:
            continue
        table = [["sample"] + names]
        for i in rows:
            table.append([labelled[i][0]] + [f"{result.rewards[n][i]:.4f}" for n in names])
        sections.append(f"{dataset}\n{format_table(table)}")
    if skipped:
        sections.append("skipped (extra not installed): " + ", ".join(skipped))
    return "\n\n".join(sections)
