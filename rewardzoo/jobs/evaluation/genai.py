"""GenAI-Bench (Lin et al. 2024, "Evaluating and Improving Compositional Text-to-Visual Generation"), image and
video, read as t2v_metrics publishes and evaluates it.

Layout (``linzhiqiu/t2v_metrics``, ``dataset.py`` at commit ``a5f5545c5cae933b3514ddadb771fda4c9770f00``, classes
``GenAIBench_Image`` and ``GenAIBench_Video``; the files come from HF ``zhiqiulin/GenAI-Bench-527``): a folder
holding ``genai_image.json`` (``genai_video.json``), a JSON object ``{prompt_idx: {"prompt": ..., "models":
{model: [rating, ...]}, ...}}`` with the 1-5 alignment ratings of each generator's output, and the media beside
it as ``<model>/<prompt_idx>.jpeg`` (``.mp4``). ``--data`` is that JSON file or its folder.

Rule (``evaluate_scores`` -> ``correlation`` -> ``calc_metric(human, ours, "pairwise_acc_with_tie_optimization")``
in the same file, which runs ``tau_optimization.tau_optimization(..., TauSufficientStats.acc_23)`` of
``tau_optimization.py`` at commit ``60ce07b144b9bff24b8dac5317cb28586b1b2509``, Deutsch et al. 2023): the human
score of an item is the mean of its ratings; *every* pair of items is one pair ("no grouping"), a human tie when
the means are equal; the reward predicts a tie when ``|diff| <= eps`` and ``eps`` (0 included) maximises
``(C + T_both) / pairs``. Reported beside it, as t2v_metrics prints them: Pearson (ours a fraction, theirs x100)
and Kendall's tau-b. t2v_metrics averages a video's frame scores; here the reward reads the ``.mp4`` as a video
(a frame-averaging reward gives the same reading). Not read: ``genai_skills.json`` (a prompt has several skill
tags, so no one category per item).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ...errors import InputError
from ...shared.files import read_utf8, regular_file
from .sets import EvalSet, SetBuilder, set_error

SUFFIX = {"image": ".jpeg", "video": ".mp4"}


def _ratings(value, where: str, model: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise set_error(where, f"model '{model}' must map to a non-empty list of ratings, got {value!r}", "models")
    for r in value:
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
            raise set_error(where, f"model '{model}': a rating must be a finite number, got {r!r}", "models")
    return float(sum(float(r) for r in value) / len(value))


def read_genai_bench(path: Path, kind: str) -> EvalSet:
    """A GenAI-Bench ``genai_image.json`` / ``genai_video.json`` (``kind`` image / video; see the module)."""
    name = f"genai_{kind}.json"
    if path.is_dir():
        path = path / name
    path = regular_file(path, "data")
    builder = SetBuilder(f"genai_bench_{kind}", "rating_pairs_with_ties", path)
    try:
        entries = json.loads(read_utf8(path, "data"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(entries, dict):
        raise InputError(f"{path.name}: must be a JSON object {{prompt_idx: {{'prompt', 'models'}}}} ({name})")
    for idx, entry in entries.items():
        where = builder.where(f"entry '{idx}'")
        if not isinstance(entry, dict) or not isinstance(entry.get("models"), dict) or not entry["models"]:
            raise set_error(where, "must be an object with 'prompt' and a non-empty 'models' object")
        prompt = entry.get("prompt")
        if not isinstance(prompt, str):
            raise set_error(where, f"must be a string, got {type(prompt).__name__}", "prompt")
        for model, ratings in entry["models"].items():
            mos = _ratings(ratings, where, model)
            builder.rated(where, {"prompt": prompt}, model, f"{model}/{idx}{SUFFIX[kind]}", mos, None)
    return builder.build()


def read_genai_bench_image(path: Path, media_dir: Path) -> EvalSet:
    """GenAI-Bench image (see the module docstring)."""
    return read_genai_bench(path, "image")


def read_genai_bench_video(path: Path, media_dir: Path) -> EvalSet:
    """GenAI-Bench video (see the module docstring)."""
    return read_genai_bench(path, "video")
