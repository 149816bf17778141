"""A real clash, resolved: the ``image-reward`` package's own model code in a worker whose environment has
transformers 4 (built once per run from PyPI, ``system_site_packages`` for torch; ``REWARDZOO_TEST_ENVS=DIR``
keeps it across runs) scores exactly as rewardzoo's ``image_reward`` does here, with transformers 5; and a
plugin reward installed only in that environment is configured by its registry name."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from PIL import Image

import rewardzoo
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.environments.venvs import interpreter
from rewardzoo.rewards.references import IMAGE_REWARD

from .conftest import needs_linux

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]

#: What the image-reward package needs to import as published, with transformers 4: the table of reference
#: packages says why (rewardzoo.rewards.references.IMAGE_REWARD), written once there.
CLASH = list(IMAGE_REWARD.requirements)
PROMPTS = [
    "a photo of a red dog",
    "two cats on a table",
    " ".join(["a very detailed painting of a big red house"] * 5),
    "blue sky over the sea",
]


def _plugin_wheel(folder: Path) -> Path:
    """A wheel of a plugin package (entry point ``child_words`` in ``rewardzoo.rewards``), written by hand."""
    files = {
        "rz_child_plugin/__init__.py": (
            "from rewardzoo.rewards.base import Inputs, PointwiseReward\n\n\n"
            'class Words(PointwiseReward):\n    """Words in the prompt."""\n\n'
            "    inputs = Inputs(('prompt',))\n    score_range = (0.0, 1000.0)\n\n"
            "    def __call__(self, prompt):\n        return [float(len(p.split())) for p in prompt]\n"
        ),
        "rz_child_plugin-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: rz-child-plugin\nVersion: 0.1\n",
        "rz_child_plugin-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        "rz_child_plugin-0.1.dist-info/entry_points.txt": "[rewardzoo.rewards]\nchild_words = rz_child_plugin:Words\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("rz_child_plugin-0.1.dist-info/RECORD,,")
    path = folder / "rz_child_plugin-0.1-py3-none-any.whl"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as wheel:
            for name, text in files.items():
                wheel.writestr(name, text)
            wheel.writestr("rz_child_plugin-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """The transformers-4 environment (plus the plugin), built once per run (or reused from REWARDZOO_TEST_ENVS)."""
    keep = os.environ.get("REWARDZOO_TEST_ENVS")
    root = Path(keep) / "worker-envs" if keep else tmp_path_factory.getbasetemp() / "worker-envs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REWARDZOO_ENVS", str(root))
        env = {
            "requirements": [*CLASH, str(_plugin_wheel(root / "wheels"))],
            "system_site_packages": True,
            "start_timeout_s": 120,
        }
        spec = load_config({"rewards": [{"name": "x", "environment": env}]}).rewards[0].environment
        interpreter(spec)
        yield env


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from tests.verifiers.test_verifiers_image_reward import write_tiny_checkpoint

    path = tmp_path_factory.mktemp("imagereward")
    write_tiny_checkpoint(path)
    return path


def test_the_package_in_its_environment_scores_as_image_reward_here(environment, checkpoint):
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in PROMPTS]
    config = load_config(
        {
            "rewards": [
                {"name": "ours", "reward_model": "image_reward", "model_path": str(checkpoint), "device": "cpu"},
                {
                    "name": "package",
                    "reward_model": "tests.environments.package_image_reward:PackageImageReward",
                    "model_path": str(checkpoint),
                    "device": "cpu",
                    "environment": environment,
                },
            ]
        }
    )
    with RewardProcessor(config.rewards) as processor:
        result = processor([rewardzoo.Sample(image=img, prompt=p) for img, p in zip(images, PROMPTS)])
    assert transformers.__version__.startswith("5.")
    assert all(v.startswith("4.49") for v in result.extras["package"]["transformers"])  # really another stack
    np.testing.assert_allclose(result.rewards["package"], result.rewards["ours"], atol=1e-5, rtol=0)
    assert np.std(result.rewards["ours"]) > 1e-3


def test_a_plugin_installed_only_in_the_worker_environment(environment):
    from rewardzoo.registry import info

    assert importlib.util.find_spec("rz_child_plugin") is None and info("child_words") is None  # not here
    config = load_config(
        {"rewards": [{"name": "words", "reward_model": "child_words", "device": "cpu", "environment": environment}]}
    )
    prompts = ["one", "two words", "and three words"]
    with RewardProcessor(config.rewards) as processor:
        result = processor([rewardzoo.Sample(prompt=p) for p in prompts])
        reward = processor.rewards["words"]
        assert reward.info.implementation == "rz_child_plugin:Words"
        assert reward.info.source.startswith("plugin rz-child-plugin")  # the worker's registry found it
        assert reward.info.summary == "(no model card)" and reward.kind == "pointwise"
    np.testing.assert_array_equal(result.rewards["words"], [len(p.split()) for p in prompts])


def test_env_build_list_and_remove(environment, tmp_path, capsys):
    """``env build`` finds the environment built already (and says where), ``env list`` shows it, ``env remove``
    deletes one (a second, hand-made record here, so the built one stays for the other tests)."""
    import json

    import yaml

    from rewardzoo.cli import main
    from rewardzoo.environments.venvs import cache_root, environment_key

    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"rewards": [{"name": "a", "reward_model": "child_words", "environment": environment}]})
    )
    key = environment_key(load_config(config).rewards[0].environment)
    assert main(["env", "build", str(config)]) == 0
    out = capsys.readouterr()
    python = cache_root() / key / "bin" / "python"
    assert out.out.split("\t")[:2] == [key, str(python)] and "building" not in out.err  # reused, not rebuilt
    spare = cache_root() / "feedc0de00000000"
    spare.mkdir()
    (spare / "environment.json").write_text(
        json.dumps(
            {
                "key": spare.name,
                "requirements": ["six"],
                "system_site_packages": False,
                "python": "3.11.7",
                "rewardzoo": rewardzoo.__version__,
                "created": "2000-01-01",
            }
        )
    )
    assert main(["env", "list", "--json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {key, spare.name} and rows[key]["requirements"] == environment["requirements"]
    assert rows[key]["system_site_packages"] is True and rows[key]["path"] == str(cache_root() / key)
    assert main(["env", "list"]) == 0 and key in capsys.readouterr().out
    assert main(["env", "remove", "nokey"]) == 2 and "no built environment matches 'nokey'" in capsys.readouterr().err
    assert main(["env", "remove"]) == 2
    assert main(["env", "remove", "feedc0"]) == 0 and not spare.exists() and python.exists()
