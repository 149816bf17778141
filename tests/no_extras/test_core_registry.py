"""Registry lookup, Python-path fallback, user registration, entry-point plugins and error messages."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rewardzoo import registry
from rewardzoo.errors import MissingExtraError, RegistryError
from rewardzoo.rewards.base import Inputs, PointwiseReward, RewardInfo
from rewardzoo.rewards.image.jpeg import JpegCompressibility

from .rewards import PromptLength


def test_registry_names_are_lowercase_and_resolve_case_insensitively():
    assert all(name == name.lower() for name in registry.entries())
    assert registry.resolve("JPEG_Compressibility") is JpegCompressibility


@pytest.mark.parametrize("target", ["tests.no_extras.rewards:PromptLength", "tests.no_extras.rewards.PromptLength"])
def test_python_path_fallback(target):
    assert registry.resolve(target) is PromptLength


def test_unknown_name_lists_close_matches():
    with pytest.raises(RegistryError, match="unknown reward 'clip_scor'.*did you mean 'clip_score'"):
        registry.resolve("clip_scor")


def test_path_to_missing_attribute_or_module():
    with pytest.raises(RegistryError, match="has no attribute 'Nope'"):
        registry.resolve("tests.no_extras.rewards:Nope")
    with pytest.raises(RegistryError, match="cannot import module 'no_such_pkg_zz.mod'"):
        registry.resolve("no_such_pkg_zz.mod:Thing")


def test_register_decorator_lowercases_and_refuses_builtin_names():
    @registry.register("My_Custom_Reward")
    class Custom(PointwiseReward):
        inputs = Inputs(("prompt",))

        def __call__(self, prompt, **_):
            return [0.0] * len(prompt)

    try:
        assert registry.resolve("my_custom_reward") is Custom
        assert registry.resolve("MY_CUSTOM_REWARD") is Custom
    finally:
        registry._USER.pop("my_custom_reward")
    with pytest.raises(RegistryError, match="built-in"):
        registry.register("clip_score")(Custom)


@pytest.mark.parametrize("module", ["needs_missing_dep", "not_installed_backend_xyz_rewards"])
def test_missing_extra_names_module_and_pip_command(tmp_path, monkeypatch, module):
    # the second module's name merely starts with the missing one's: still a missing dependency
    (tmp_path / f"{module}.py").write_text("import not_installed_backend_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = RewardInfo(
        name="fancy_reward",
        implementation=f"{module}:Thing",
        summary="test",
        modality="image",
        kind="pointwise",
        extra="image",
        higher_is_better=True,
        score_range=(0.0, 1.0),
        download=True,
    )
    monkeypatch.setitem(registry.builtin(), "fancy_reward", entry)
    with pytest.raises(MissingExtraError) as info:
        registry.resolve("fancy_reward")
    msg = str(info.value)
    assert "'fancy_reward'" in msg and "not_installed_backend_xyz" in msg and "pip install 'rewardzoo[image]'" in msg


def test_entry_point_plugins_are_found(tmp_path, monkeypatch):
    dist = tmp_path / "zoo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zoo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rewardzoo.rewards]\nPlugin_Len = tests.no_extras.rewards:PromptLength\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_PLUGINS", None)
    assert registry.resolve("plugin_len") is PromptLength
    assert registry.canonical_target("plugin_len") == "tests.no_extras.rewards:PromptLength"
    monkeypatch.setattr(registry, "_PLUGINS", None)


def test_list_rewards_rows_and_filter():
    rows = registry.list_rewards()
    assert [r["name"] for r in rows] == sorted(registry.entries())
    audio = registry.list_rewards("audio")
    assert audio and all(r["modality"] == "audio" for r in audio)
    assert {"name", "modality", "kind", "extra", "higher_is_better", "score_range", "installed"} <= set(rows[0])


def test_import_rewardzoo_and_list_rewards_do_not_import_heavy_backends():
    code = textwrap.dedent("""
        import sys, rewardzoo
        rows = rewardzoo.list_rewards()
        assert len(rows) > 5
        heavy = [m for m in ("torch", "open_clip", "transformers", "onnxruntime", "av", "decord", "soundfile",
                             "pydantic")  # pydantic: imported when a config or a reward's options are validated
                 if m in sys.modules]
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
