"""scripts/scale_check.py's results file: rows merged by case and task, the goals checked, the figures valid.

The real-scale run itself is on demand (GBs, minutes per case); these check the bookkeeping around it without
torch, on hand-written rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from scale import common

GB = 10**9


def _row(**tasks):
    base = {"reward": "clip_score", "family": "image", "dtype": "float32", "layout": "x", "date": "2026-12-06"}
    return {**base, **tasks}


LOAD = {
    "load_s": 10.0,
    "load_peak_bytes": 4 * GB,
    "loaded_bytes": 2 * GB + 100,
    "state_bytes": 2 * GB,
    "plan_bytes": 2 * GB,
    "plan_from": "safetensors headers",
    "threads": 2,
    "finite": True,
    "in_range": True,
    "samples_per_call": 1,
    "s_per_sample": 2.0,
    "cpu_s_per_sample": 3.0,
    "activation_bytes_per_sample": 40e6,
}
DROP = {
    "weight_bytes": 2 * GB,
    "rss_awake_bytes": 3 * GB,
    "rss_asleep_bytes": 1 * GB + 10**8,
    "freed_fraction": 0.95,  # 1.9 GB of 2 GB
    "wake_s": 1.0,
    "tensors_bit_identical": True,
    "scores_bit_identical": True,
}


@pytest.mark.parametrize(
    "reference_peak, plan, expected",
    [
        (4 * GB, 2 * GB, {"load_peak_le_1.1x_reference": True, "plan_equals_loaded": True}),
        (3.5 * GB, 2 * GB + 1, {"load_peak_le_1.1x_reference": False, "plan_equals_loaded": False}),
    ],
)
def test_the_goals_of_a_row(reference_peak, plan, expected):
    row = _row(reference={"load_peak_bytes": reference_peak}, load={**LOAD, "plan_bytes": plan}, drop=DROP)
    got = common.checks(row)
    assert {k: got[k] for k in expected} == expected
    assert got["drop_frees_ge_90pct"] is True and got["drop_wakes_bit_identical"] is True
    assert common.checks(_row(drop={**DROP, "freed_fraction": 0.85}))["drop_frees_ge_90pct"] is False
    assert common.checks(_row(drop={**DROP, "scores_bit_identical": False}))["drop_wakes_bit_identical"] is False


def test_rows_merge_by_case_and_by_task(tmp_path):
    path = tmp_path / "scale.json"
    common.write_rows({"a": _row(load=LOAD, drop=DROP), "b": _row(load=LOAD)}, path)
    common.write_rows({"a": _row(drop={**DROP, "wake_s": 2.0}, date="2026-12-07")}, path)  # a partial rerun of a
    record = json.loads(path.read_text())
    assert set(record["rows"]) == {"a", "b"}
    assert record["rows"]["a"]["load"] == LOAD and record["rows"]["a"]["drop"]["wake_s"] == 2.0
    assert record["script"] == "scale_check.py" and record["date"] == "2026-12-07"
    ids = [f["id"] for f in record["figures"]]
    assert len(ids) == len(set(ids)) and "scale.a.drop.wake" in ids and "scale.b.plan" in ids
    wake = next(f for f in record["figures"] if f["id"] == "scale.a.drop.wake")
    assert wake["ratio"] == 2.0 / 10.0 and wake["rewards"] == ["clip_score"]
    forward = next(f for f in record["figures"] if f["id"] == "scale.a.forward.time")
    assert forward["value"]["value"] == 3.0  # process CPU seconds, not the wall clock


@pytest.mark.parametrize("call_peak, working_set, ok", [(250e6, 100e6, True), (260e6, 100e6, False), (140e6, 0, True)])
def test_the_media_rule_of_a_row(call_peak, working_set, ok, tmp_path):
    """Issue 47 item 2: one call's peak within 1.5x the media's decoded size (100 MB) + the model's working set."""
    load = {**LOAD, "call_peak_bytes": call_peak, "working_set_bytes": working_set}
    row = _row(load=load, media_bytes=100e6)
    assert common.checks(row)["media_peak_le_1.5x_decoded_plus_working_set"] is ok
    assert "media_peak_le_1.5x_decoded_plus_working_set" not in common.checks(_row(load=load))
    path = common.write_rows({"a": row}, tmp_path / "scale.json")
    media = next(f for f in json.loads(path.read_text())["figures"] if f["id"] == "scale.a.media")
    assert media["ratio"] == pytest.approx(call_peak / (150e6 + working_set), abs=1e-4)  # (rounded to 4 places)


def test_a_model_free_row_checks_its_wake_scores():
    drop = {**DROP, "weight_bytes": 0, "freed_fraction": None, "scores_bit_identical": False}
    got = common.checks(_row(drop=drop))
    assert "drop_frees_ge_90pct" not in got and got["drop_wakes_bit_identical"] is False
