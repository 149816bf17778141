"""The extras' module lists are derived from pyproject.toml (the one statement of them), the same from a
checkout's pyproject.toml and from an installation's metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from rewardzoo.catalog import extras
from rewardzoo.catalog.extras import canonical, distribution_of, extra_modules, import_name, requirements
from rewardzoo.registry import builtin, missing_modules

PROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
DECLARED = PROJECT["optional-dependencies"]


def _name(spec: str) -> str:
    return canonical(spec.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].split("!")[0])


def test_every_extra_of_pyproject_and_only_those_has_its_modules():
    found = extra_modules()
    assert list(found) == list(DECLARED)
    for extra, specs in DECLARED.items():
        for spec in specs:
            name = _name(spec)
            if name == "rewardzoo":  # a nested extra: everything it brings is brought
                for inner in spec.split("[")[1].split("]")[0].split(","):
                    assert set(found[inner.strip()]) <= set(found[extra])
            elif ";" in spec:  # holds on some platforms only (decord): not needed to count as installed
                assert import_name(name) not in found[extra], (extra, spec)
                assert name in requirements()[extra]
            else:
                assert import_name(name) in found[extra], (extra, spec)
                assert name in requirements()[extra]
    assert "rapidocr_onnxruntime" not in found["verifiers"] and "decord" not in found["vlm"]
    assert {"open_clip", "av", "transformers"} <= set(found["vlm"]) and "cv2" in found["iqa"]
    assert requirements()[None] == {_name(s) for s in PROJECT["dependencies"]} <= requirements()["image"]


def test_cards_name_declared_extras_and_missing_modules_read_the_derived_lists():
    assert {info.extra for info in builtin().values()} - {None} <= set(DECLARED)
    for extra in DECLARED:
        assert set(missing_modules(extra)) <= set(extra_modules()[extra])
    assert missing_modules(None) == [] and missing_modules("no-such-extra") == []


def test_import_names_map_back_to_their_distributions():
    for specs in DECLARED.values():
        for spec in specs:
            name = _name(spec)
            assert distribution_of(import_name(name)) == name
    assert import_name("open_clip_torch") == "open_clip" and import_name("opencv-python-headless") == "cv2"
    assert distribution_of("cv2.dnn") == "opencv-python-headless" and distribution_of("silero_vad") == "silero-vad"


def test_installed_metadata_gives_what_the_checkout_pyproject_gives(monkeypatch, tmp_path):
    """Without a pyproject.toml beside the package (an installed wheel), the metadata's requirement lines,
    written here the way a build writes them from this pyproject.toml, give the same lists."""
    lines = list(PROJECT["dependencies"])
    for extra, specs in DECLARED.items():
        for spec in specs:
            req, _, marker = spec.partition(";")
            lines.append(
                f'{req.strip()}; ({marker.strip()}) and extra == "{extra}"'
                if marker
                else f'{req.strip()}; extra == "{extra}"'
            )
    want_modules, want_reqs = extra_modules(), requirements()
    monkeypatch.setattr(extras, "_PYPROJECT", tmp_path / "pyproject.toml")
    monkeypatch.setattr("importlib.metadata.requires", lambda name: lines if name == "rewardzoo" else None)
    extras._closure.cache_clear()
    extras.extra_modules.cache_clear()
    try:
        # as sets: a build writes a nested extra's names sorted (rewardzoo[audio,image,...]), pyproject.toml as listed
        assert {k: set(v) for k, v in extra_modules().items()} == {k: set(v) for k, v in want_modules.items()}
        assert requirements() == want_reqs
    finally:
        extras._closure.cache_clear()
        extras.extra_modules.cache_clear()


@pytest.mark.parametrize("extra", ["image", "verifiers"])
def test_a_missing_module_counts_against_its_extra(monkeypatch, extra):
    import importlib.util

    module = extra_modules()[extra][-1]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    assert module in missing_modules(extra)


def test_add_ons_are_facts_of_the_rewards_that_need_them():
    """The OCR engine installs beside the verifiers extra (--no-deps) for ocr and video_ocr alone: nsfw_safety, in
    the same extra, does not wait for it (the quick start's demo skipped it when the add-on was the extra's)."""
    cards = builtin()
    assert {name for name, entry in cards.items() if entry.add_ons} == {"ocr", "video_ocr"}
    assert cards["ocr"].add_ons == ("rapidocr_onnxruntime",) and cards["nsfw_safety"].add_ons == ()
    assert missing_modules("verifiers", ("no_such_module_zz",))[-1] == "no_such_module_zz"
    assert "no_such_module_zz" not in missing_modules("verifiers")


def test_the_demo_names_a_missing_add_on_and_the_card_not_the_extra(monkeypatch):
    import dataclasses

    import rewardzoo.cli.demo as demo
    from rewardzoo.core.resolve import load_config

    entry = dataclasses.replace(builtin()["jpeg_compressibility"], add_ons=("no_such_module_zz",))
    monkeypatch.setattr(demo, "info", lambda name: entry if name == "jpeg_compressibility" else builtin()[name])
    specs = load_config({"rewards": [{"name": "jpeg_compressibility"}, {"name": "jpeg_incompressibility"}]}).rewards
    keep, skipped = demo.runnable_specs(specs)
    assert [s.name for s in keep] == ["jpeg_incompressibility"]
    assert skipped == ["jpeg_compressibility (needs no_such_module_zz: see 'rewardzoo card jpeg_compressibility')"]
