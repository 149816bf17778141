"""The verl test environment: verl 0.9.1 and what verl-omni's reward loop needs, in a venv of its own (verl needs
``transformers>=5.5.3,<5.11``; the dev environment has a newer one, and a ``kernels`` package a newer transformers
leaves behind breaks verl's import, so it is built fresh, without the parent's packages). Built once per run by
rewardzoo's own environment builder (``REWARDZOO_TEST_ENVS=DIR`` keeps it across runs); a test that needs it
skips, saying why, when it cannot be built (no package index, say)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: torch pinned to the dev stack's; tensordict<=0.10 and ray[default] as verl-omni's reward loop needs.
VERL_REQUIREMENTS = (
    "verl==0.9.1",
    "transformers>=5.5.3,<5.11",
    "tensordict<=0.10",
    "ray[default]",
    "torch==2.14.1",
    "safetensors",
)


def verl_python(tmp_path_factory) -> str:
    """The verl environment's interpreter (built now when missing); skips the test when it cannot be built."""
    from rewardzoo.core.resolve import load_config
    from rewardzoo.environments.venvs import interpreter

    keep = os.environ.get("REWARDZOO_TEST_ENVS")
    root = Path(keep) / "verl-envs" if keep else tmp_path_factory.getbasetemp() / "verl-envs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REWARDZOO_ENVS", str(root))
        spec = (
            load_config({"rewards": [{"name": "x", "environment": {"requirements": list(VERL_REQUIREMENTS)}}]})
            .rewards[0]
            .environment
        )
        try:
            python = interpreter(spec)
        except Exception as exc:
            pytest.skip(f"the verl test environment could not be built: {str(exc)[-600:]}")
    return python


def run_in(python: str, script: str, payload: dict, timeout: float = 600) -> dict:
    """Run ``tests/integrations/<script>`` in ``python`` (the checkout on its path) with ``payload`` as JSON on
    stdin; its JSON answer (the last stdout line)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    }
    done = subprocess.run(
        [python, str(REPO / "tests" / "integrations" / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(REPO),
    )
    if done.returncode != 0:
        raise AssertionError(f"{script} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
