"""``rewardzoo evaluate --engine ray``: the set's members scored by the Ray engine give the local engine's scores
and the same agreement, groupwise rewards still seeing each pair whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'rewardzoo[ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'rewardzoo[ray]')")

from rewardzoo.cli import main
from tests.no_extras.test_core_evaluate import GROUPED, NEGATED, ORACLE, CenteredBrightness, _pairs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    yield
    ray.shutdown()


def test_evaluate_on_ray_equals_local(tmp_path, capsys):
    data = _pairs(tmp_path, n=12, ties=2, seed=1)
    config = tmp_path / "rewards.yaml"
    config.write_text(json.dumps({"rewards": [ORACLE, NEGATED, GROUPED]}))
    args = ["evaluate", str(config), "--data", str(data), "--format", "pairs", "--json", "-q", "--chunk-size", "4"]
    CenteredBrightness.sizes.clear()
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert set(CenteredBrightness.sizes) == {2}  # scored here, a pair at a time
    CenteredBrightness.sizes.clear()
    assert main([*args, "--out", str(tmp_path / "ray"), "--engine", "ray", "--actors", "2"]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert CenteredBrightness.sizes == []  # scored in the Ray actors, not in this process
    assert (tmp_path / "ray" / "scores.jsonl").read_bytes() == (tmp_path / "local" / "scores.jsonl").read_bytes()
    assert on_ray["rewards"] == local["rewards"] and on_ray["comparisons"] == local["comparisons"]
    assert [r["value"] for r in on_ray["rewards"]] == [1.0, 0.0, 1.0] and "group of two" in on_ray["rewards"][2]["note"]
