"""`rewardzoo evaluate` on GenAI-Bench (image, video), GenAI-Bench-Edit and EditReward-Bench, each read from a small
file written in exactly the published layout and scored with the benchmark's own rule (compared with a direct
transcription of that rule, written here from the formula)."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rewardzoo.errors import InputError
from rewardzoo.rewards.base import Inputs, PointwiseReward
from tests.no_extras.test_core_evaluate import NEGATED, ORACLE, _evaluate

EDIT = {"name": "edit", "reward_model": "tests.no_extras.test_core_evaluate_layouts:EditGain"}
VIDEO = {"name": "vbright", "reward_model": "tests.no_extras.test_core_evaluate_layouts:VideoBrightness"}


class EditGain(PointwiseReward):
    """Mean pixel of the edit minus that of the source image (``condition_images[0]``), / 255."""

    inputs = Inputs(("image", "condition_images"))

    def __call__(self, image, condition_images, **_):
        def mean(img):
            return float(np.asarray(img, dtype=np.float64).mean() / 255)

        return [mean(img) - mean(cond[0]) for img, cond in zip(image, condition_images)]


class VideoBrightness(PointwiseReward):
    """Mean frame value of a video."""

    inputs = Inputs(("video",), frames="float")

    def __call__(self, video, **_):
        return [float(np.asarray(v, dtype=np.float64).mean()) for v in video]


def deutsch_acc23(human: np.ndarray, metric: np.ndarray, zero: bool) -> float:
    """Accuracy with tie calibration over the given pairs, by brute force over the thresholds: (concordant +
    tied in both) / pairs, maximised over eps in [0] (when ``zero``) + sorted(set(|metric|))."""
    candidates = sorted(set(np.abs(metric).tolist()) | ({0.0} if zero else set()))
    best = -1.0
    for eps in candidates:
        right = 0
        for h, m in zip(human, metric):
            tie = abs(m) <= eps
            right += int(tie and h == 0) + int((not tie) and h != 0 and np.sign(m) == h)
        best = max(best, right / len(human))
    return best


def _scores(folder: Path, name: str) -> np.ndarray:
    lines = (folder / "out" / "scores.jsonl").read_text().splitlines()
    return np.array([json.loads(x)["rewards"][name] for x in lines])


def _genai_image_set(root: Path, ratings: dict[str, dict[str, list[int]]], levels: dict[tuple[str, str], int]):
    entries = {}
    for idx, models in ratings.items():
        entries[idx] = {"id": int(idx), "prompt": f"prompt {idx}", "models": models}
        for model in models:
            (root / model).mkdir(exist_ok=True)
            img = np.full((8, 8, 3), levels[(idx, model)], np.uint8)
            Image.fromarray(img).save(root / model / f"{idx}.jpeg", quality=95)
    (root / "genai_image.json").write_text(json.dumps(entries))


def test_genai_bench_image_oracle_negation_and_t2v_metrics_rule(tmp_path):
    root = tmp_path / "GenAI-Image-527"
    root.mkdir()
    models = ("DALLE_3", "SDXL_Turbo", "Midjourney_6")
    ratings, levels = {}, {}
    for p in range(4):
        idx = f"{p:05d}"
        ratings[idx] = {m: [1 + (k + p) % 5, 2 + (k * p) % 4, 3] for k, m in enumerate(models)}
        for m in models:
            levels[(idx, m)] = int(20 + 40 * np.mean(ratings[idx][m]))  # brightness follows the mean rating
    _genai_image_set(root, ratings, levels)
    run = _evaluate(tmp_path, root, "genai_bench_image", [ORACLE, NEGATED])
    bright, dark = run.results
    assert run.data.name == "genai_bench_image" and bright.metric == "accuracy_with_ties"
    means = np.array([np.mean(ratings[i][m]) for i in ratings for m in ratings[i]])
    n_ties = sum(a == b for a, b in itertools.combinations(means, 2))
    assert bright.extra["n_items"] == 12 and bright.extra["n_pairs"] == 66 and bright.extra["n_human_ties"] == n_ties
    assert bright.interval.value == 1.0  # equal means give equal levels: tied in both
    assert dark.interval.value == pytest.approx(n_ties / 66)  # every untied pair discordant: only ties can count
    from rewardzoo.cli.evaluate import format_run

    assert f"human ties (scored by the tie rule): human_ties={n_ties}" in format_run(run)

    # a reward that disagrees with people: the result equals the brute-force rule on the scores it gave
    for (idx, m), v in list(levels.items())[::3]:
        Image.fromarray(np.full((8, 8, 3), 255 - v, np.uint8)).save(root / m / f"{idx}.jpeg", quality=95)
    run = _evaluate(tmp_path / "again", root / "genai_image.json", "genai_bench_image", [ORACLE])
    found, s = run.results[0], _scores(tmp_path / "again", "bright")
    i, j = np.triu_indices(s.size, 1)
    expected = deutsch_acc23(np.sign(means[i] - means[j]), s[i] - s[j], zero=True)
    assert found.interval.value == pytest.approx(expected) and 0.3 < expected < 1.0
    stats = pytest.importorskip("scipy.stats")
    assert found.extra["plcc"] == pytest.approx(stats.pearsonr(s, means).statistic)
    assert found.extra["krcc"] == pytest.approx(stats.kendalltau(s, means).statistic)  # tau-b


def test_genai_bench_bad_entries_name_the_file_and_entry(tmp_path):
    root = tmp_path / "g"
    root.mkdir()
    _genai_image_set(root, {"00000": {"DALLE_3": [3, 4]}, "00001": {"DALLE_3": [2]}}, {("00000", "DALLE_3"): 50,
                     ("00001", "DALLE_3"): 90})  # fmt: skip
    (root / "DALLE_3" / "00001.jpeg").unlink()
    with pytest.raises(InputError, match=r"genai_image.json entry '00001', field 'DALLE_3': media file .* cannot"):
        _evaluate(tmp_path, root, "genai_bench_image", [ORACLE])
    (root / "genai_image.json").write_text(json.dumps({"00000": {"prompt": "p", "models": {"DALLE_3": ["x"]}}}))
    with pytest.raises(InputError, match=r"entry '00000', field 'models': model 'DALLE_3'.*finite number"):
        _evaluate(tmp_path, root, "genai_bench_image", [ORACLE])


def test_genai_bench_video_layout(tmp_path):
    pytest.importorskip("av")
    from rewardzoo.shared.video import write_video

    root = tmp_path / "GenAI-Video-527"
    entries = {}
    for p in range(2):
        idx = f"{p:05d}"
        models = {"Floor33": [1, 2], "Gen2": [3, 3], "Pika_v1": [5, 4]}
        entries[idx] = {"prompt": f"p{p}", "models": models}
        for m, r in models.items():
            (root / m).mkdir(parents=True, exist_ok=True)
            write_video(root / m / f"{idx}.mp4", np.full((4, 16, 16, 3), 30 + 40 * np.mean(r) + p, np.uint8), fps=4)
    (root / "genai_video.json").write_text(json.dumps(entries))
    run = _evaluate(tmp_path, root, "genai_bench_video", [VIDEO])
    found = run.results[0]
    assert run.data.members[0]["video"].endswith("Floor33/00000.mp4")
    # means 1.5, 3, 4.5 in both prompts: 3 human ties (same mean across prompts), the +p offset a small diff
    assert found.extra["n_pairs"] == 15 and found.extra["n_human_ties"] == 3
    s = _scores(tmp_path, "vbright")
    means = np.array([1.5, 3, 4.5, 1.5, 3, 4.5])
    i, j = np.triu_indices(6, 1)
    assert found.interval.value == pytest.approx(deutsch_acc23(np.sign(means[i] - means[j]), s[i] - s[j], True))
    assert found.interval.value == 1.0  # the offset is the smallest |diff|: calibrated to a tie


def test_genai_bench_edit_layout_uses_editreward_rule_and_the_source(tmp_path):
    images = tmp_path / "GenAI-Bench" / "image_edition" / "images"
    images.mkdir(parents=True)
    rows = [(100, 180, 60, 4, 2), (100, 90, 200, 2, 4), (50, 120, 120, 3, 3), (200, 210, 190, 3, 3), (10, 90, 20, 4, 2)]
    entries = []
    for k, (src, l1, l2, s1, s2) in enumerate(rows):
        names = [f"{k}_src.png", f"{k}_a_out.png", f"{k}_b_out.png"]
        for name, level in zip(names, (src, l1, l2)):
            Image.fromarray(np.full((8, 8, 3), level, np.uint8)).save(images / name)
        paths = [f"GenAI-Bench/image_edition/images/{n}" for n in names]
        entries.append({"prompt": f"edit {k}", "choice_dist": None, "confidence": None, "path_src": paths[0],
                        "path1": paths[1], "path2": paths[2], "model1": "MagicBrush", "model2": "SDEdit",
                        "model1_dim1_score": s1, "model2_dim1_score": s2, "model1_overall_score": 0.5,
                        "model2_overall_score": 0.4})  # fmt: skip
    (tmp_path / "valid_set2_full.json").write_text(json.dumps(entries, indent=4))
    run = _evaluate(tmp_path, tmp_path / "valid_set2_full.json", "genai_bench_edit", [EDIT])
    found = run.results[0]
    s = _scores(tmp_path, "edit")
    src = np.array([r[0] for r in rows]) / 255
    assert s[0::2] == pytest.approx(np.array([r[1] for r in rows]) / 255 - src)  # the source reached the reward
    human = np.array([1, -1, 0, 0, 1])
    # |diff|*255: 120, 110, 0, 20, 70 -> eps 20 ties both human ties and keeps the rest right: 5/5
    assert found.metric == "accuracy_with_ties" and found.interval.value == 1.0
    assert found.interval.value == pytest.approx(deutsch_acc23(human, s[0::2] - s[1::2], zero=False))
    assert found.extra["n_human_ties"] == 2 and found.extra["accuracy_without_ties"] == 1.0
    entries[1]["model2_dim1_score"] = "high"
    (tmp_path / "valid_set2_full.json").write_text(json.dumps(entries))
    with pytest.raises(InputError, match=r"valid_set2_full.json entry 1, field 'model2_dim1_score'"):
        _evaluate(tmp_path, tmp_path / "valid_set2_full.json", "genai_bench_edit", [EDIT])


def _png(level: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), level, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def test_editreward_bench_parquet_layout(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    # (id, subset, source, candidate_1, candidate_2, ranking, comparison_type)
    rows = [
        ("s0", "2pair", 100, 200, 50, "A>B", None),
        ("s1", "2pair", 100, 60, 150, "B>A", None),
        ("s2", "2pair", 100, 120, 122, "A=B", None),
        ("g0_AvsB", "3pair", 90, 30, 140, "B>A", "AvsB"),  # A 30, B 140, C 220: C > B > A
        ("g0_AvsC", "3pair", 90, 30, 220, "C>A", "AvsC"),
        ("g0_BvsC", "3pair", 90, 140, 220, "B>C", "BvsC"),  # the human disagrees with brightness here
    ]
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "id": [r[0] for r in rows],
            "instruction": [f"edit {r[0]}" for r in rows],
            "dataset": [r[1] for r in rows],
            "source_image": pa.array([{"bytes": _png(r[2]), "path": None} for r in rows], struct),
            "candidate_1": pa.array([{"bytes": _png(r[3]), "path": "c1.png"} for r in rows], struct),
            "candidate_2": [_png(r[4]) for r in rows],  # bare bytes are read too
            "ranking": [r[5] for r in rows],
            "comparison_type": [r[6] for r in rows],
            "score_1": [1.0] * len(rows),
            "model_1": ["m"] * len(rows),
        }
    )
    pq.write_table(table, tmp_path / "train-00000-of-00001.parquet")
    run = _evaluate(tmp_path, tmp_path / "train-00000-of-00001.parquet", "editreward_bench", [ORACLE, NEGATED])
    bright, dark = run.results
    human = np.array([1, -1, 0, -1, -1, 1])
    s = _scores(tmp_path, "bright")
    expected = deutsch_acc23(human, s[0::2] - s[1::2], zero=True)
    # |diff|*255: 150, 90, 2, 110, 190, 80: eps 2 ties the human tie; the B>C pair is wrong -> 5/6
    assert bright.interval.value == pytest.approx(expected) == pytest.approx(5 / 6)
    cats = {c["category"]: c for c in bright.categories}
    assert cats["2pair"]["value"] == 1.0 and cats["3pair"]["value"] == pytest.approx(2 / 3)
    assert bright.extra["accuracy_without_ties"] == pytest.approx(4 / 5)  # 5 untied pairs, B>C wrong
    assert dark.interval.value == pytest.approx(deutsch_acc23(human, s[1::2] - s[0::2], zero=True))
    assert run.data.members[0]["condition_images"][0].endswith("-0-source_image.png")
    bad = table.set_column(6, "ranking", pa.array(["A>B", "B>A", "A=B", "A>C", "C>A", "B>C"]))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=r"bad.parquet row 3 \(id g0_AvsB\), field 'ranking': must rank A and B"):
        _evaluate(tmp_path, tmp_path / "bad.parquet", "editreward_bench", [ORACLE])
