"""Inputs for the report tests: a synthetic scored manifest (with nulls, ties, datasets, groups, a constant and
an unapplied reward), a second score file of the same rows, and the demo's media scored with configs/demo.yaml."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

N_ROWS = 240
GROUP_SIZE = 6
#: Column name -> what it holds (names outside the registry are allowed without a config).
COLUMNS = ("jpeg_compressibility", "clip_score", "tied", "constant", "never")


@dataclass
class Synthetic:
    folder: Path
    manifest: Path
    scores: Path
    other: Path
    values: dict[str, np.ndarray]  # NaN where null
    other_values: dict[str, np.ndarray]
    datasets: np.ndarray
    groups: np.ndarray  # -1: no group_id


def write_scores(path: Path, columns: dict[str, np.ndarray], extra: list[dict] | None = None) -> Path:
    n = len(next(iter(columns.values())))
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            rewards = {k: (None if np.isnan(v[i]) else float(v[i])) for k, v in columns.items()}
            applied = [k for k, v in rewards.items() if v is not None]
            row = {
                "rewards": rewards,
                "total": sum(rewards[k] for k in applied) if applied else None,
                "applied": applied,
            }
            row.update((extra or [{}] * n)[i])
            fh.write(json.dumps(row) + "\n")
    return path


def write_manifest(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> Synthetic:
    folder = tmp_path_factory.mktemp("synthetic")
    rng = np.random.default_rng(7)
    for k in range(10):
        Image.fromarray((rng.random((48, 64, 3)) * 255 * (k + 1) / 10).astype(np.uint8)).save(folder / f"img{k}.png")
    datasets = np.array(["t2i" if i % 4 else "edit" for i in range(N_ROWS)], dtype=object)
    groups = np.array([i // GROUP_SIZE if i < N_ROWS - 12 else -1 for i in range(N_ROWS)])
    rows = []
    for i in range(N_ROWS):
        row = {"image": f"img{i % 10}.png", "prompt": f"prompt number {i} <b>&", "dataset": str(datasets[i])}
        if groups[i] >= 0:
            row["group_id"] = f"g{groups[i]}"
        rows.append(row)
    manifest = write_manifest(folder / "manifest.jsonl", rows)
    base = rng.normal(size=N_ROWS)
    values = {
        "jpeg_compressibility": -np.abs(base + 0.5 * rng.normal(size=N_ROWS)),
        "clip_score": np.where(
            datasets == "t2i", np.clip(1.2 + 0.3 * base + 0.2 * rng.normal(size=N_ROWS), 0, 2.5), np.nan
        ),
        "tied": np.round(rng.normal(size=N_ROWS), 1),
        "constant": np.full(N_ROWS, 0.25),
        "never": np.full(N_ROWS, np.nan),
    }
    values["clip_score"][::17] = np.nan
    # two groups whose members the reward cannot tell apart
    values["tied"][:GROUP_SIZE] = 0.3
    values["tied"][GROUP_SIZE : 2 * GROUP_SIZE] = -1.0
    scores = write_scores(folder / "scores.jsonl", values)
    other_values = {k: v + 0.1 + 0.3 * rng.normal(size=N_ROWS) for k, v in values.items()}
    other_values["tied"] = np.round(other_values["tied"], 1)
    other = write_scores(folder / "scores_b.jsonl", other_values)
    return Synthetic(folder, manifest, scores, other, values, other_values, datasets, groups)


@dataclass
class Demo:
    folder: Path
    manifest: Path
    scores: Path


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> Demo:
    from rewardzoo.cli import main
    from rewardzoo.report.demo import write_demo_manifest

    folder = tmp_path_factory.mktemp("demo")
    manifest = write_demo_manifest(folder)
    scores = folder / "scores.jsonl"
    assert main(["score", "demo", "-i", str(manifest), "-o", str(scores), "-q"]) == 0
    return Demo(folder, manifest, scores)
