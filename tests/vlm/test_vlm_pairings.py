"""The reference pairings (each judge card's ``pairing:`` rows, :mod:`rewardzoo.catalog.pairings`): a default
model and a default template never come from different references, and each reward runs what its rows say.

- every ``default`` / ``preset:`` row names a ``reference`` row of the same reward and has that row's model and
  template (``reference="-"``: no reference pairing exists, the model and template are the user's);
- the ``default`` row's model and template are what the reward class really uses when built without options,
  and each ``preset: NAME`` row's what ``preset: NAME`` sets: read from the built reward (the endpoint
  backend's served model, which defaults to the class's default model; the template text it fills, matched
  against its module's ``TEMPLATES``), never from the table.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

import rewardzoo
from rewardzoo.catalog.pairings import USER_GIVEN, model_id, pairings
from rewardzoo.errors import ConfigError
from rewardzoo.registry import info
from rewardzoo.rewards.models.vlm import backend as backend_module

PAIRINGS = pairings()
ROWS = [(name, row) for name, rows in PAIRINGS.items() for row in rows]
RUN_ROWS = [(name, row) for name, row in ROWS if row.setting != "reference"]
#: No request is sent: building an endpoint judge reads its options only.
ENDPOINT = {"backend": "openai", "endpoint": {"url": "http://127.0.0.1:9/v1"}}


def _id(pair):
    return f"{pair[0]}/{pair[1].setting}"


def _class_of(name):
    module, _, attr = info(name).implementation.partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", sorted(PAIRINGS))
def test_each_reward_has_one_default_and_reference_rows_first(name):
    settings = [row.setting for row in PAIRINGS[name]]
    assert settings.count("default") == 1
    assert all(s == "reference" or s == "default" or s.startswith("preset: ") for s in settings)
    assert len(set(settings) - {"reference"}) == len(settings) - settings.count("reference")  # presets unique
    n_ref = settings.count("reference")
    assert settings[:n_ref] == ["reference"] * n_ref


def pairing_problems(name, rows):
    """What is wrong with a reward's rows: a default or preset row that names no single reference row, or
    whose model or template differs from that row's."""
    problems = []
    for row in rows:
        if row.setting == "reference":
            continue
        if row.reference == "-":  # the user names model and template: nothing to pair
            if (row.model, row.template) != (USER_GIVEN, USER_GIVEN):
                problems.append(f"{name}/{row.setting}: no reference, so model and template must be {USER_GIVEN!r}")
            continue
        refs = [r for r in rows if r.setting == "reference" and r.source == row.reference]
        if len(refs) != 1:
            problems.append(f"{name}/{row.setting}: reference {row.reference!r} is not one reference row")
        elif (model_id(row.model), row.template) != (model_id(refs[0].model), refs[0].template):
            problems.append(
                f"{name}/{row.setting}: {model_id(row.model)} + {row.template} is not the pairing of "
                f"{row.reference} ({model_id(refs[0].model)} + {refs[0].template})"
            )
    return problems


@pytest.mark.parametrize("name", sorted(PAIRINGS))
def test_a_default_or_preset_row_reproduces_one_reference_row(name):
    assert pairing_problems(name, PAIRINGS[name]) == []


def test_a_default_model_with_another_references_template_is_caught():
    rows = PAIRINGS["unified_reward"]
    default = next(r for r in rows if r.setting == "default")
    other = next(r for r in rows if r.setting == "reference" and r.source != default.reference)
    mixed = [r if r is not default else replace(default, template=other.template) for r in rows]
    assert pairing_problems("unified_reward", mixed) == [
        f"unified_reward/default: {model_id(default.model)} + {other.template} is not the pairing of "
        f"{default.reference} ({model_id(default.model)} + {default.template})"
    ]
    unknown = [r if r is not default else replace(default, reference="nobody") for r in rows]
    assert "is not one reference row" in pairing_problems("unified_reward", unknown)[0]


class _Unloaded:
    """What the local backend's ``load_vlm`` returns in :func:`_in_effect`: the id it was asked for, no weights."""

    model_type = "qwen2_5_vl"

    def __init__(self, path, **_):
        self.source = str(path)


def _in_effect(name, preset, monkeypatch):
    """(model id, template key) of the reward built as the row's setting says, read from the reward itself: on
    the endpoint backend (its served model defaults to the class's default model), or, for a preset that runs
    on the local backend only, on that backend with nothing loaded (the id ``load_vlm`` is asked for)."""
    cls = _class_of(name)
    templates = importlib.import_module(cls.__module__).TEMPLATES
    if hasattr(cls, "default_repo"):  # a reward model (hpsv3, videoalign): no endpoint, its weights on the hub
        assert preset is None, f"{name} has no presets"
        model, text = cls.default_repo, cls.template
    elif hasattr(cls, "default_base"):  # a reward model whose checkpoint names no hub id (edit_reward): its base
        assert preset is None, f"{name} has no presets"
        model, text = cls.default_base, cls.template
    else:
        kwargs = {"preset": preset} if preset else {}
        try:
            reward = rewardzoo.load_reward({"name": name, "kwargs": dict(ENDPOINT, **kwargs)})
        except ConfigError as exc:
            if exc.field != "kwargs.preset":
                raise
            monkeypatch.setattr(backend_module, "load_vlm", _Unloaded)
            reward = rewardzoo.load_reward({"name": name, "kwargs": kwargs})
        judge = getattr(reward, "judge", None) or reward  # a pairwise reward's judge holds the model and template
        text = judge.template if hasattr(judge, "template") else judge.question_template
        backend = judge.backend
        model = backend.model if backend.kind == "openai" else backend.backbone.source
    keys = [key for key, value in templates.items() if value == text]
    assert len(keys) == 1, f"{name}: the template in use is not one of {sorted(templates)}"
    return model, keys[0]


@pytest.mark.parametrize("pair", RUN_ROWS, ids=_id)
def test_the_reward_runs_what_its_row_says(pair, monkeypatch):
    name, row = pair
    if row.reference == "-":  # no default model, and the constructor requires a template
        cls = _class_of(name)
        assert cls.default_model is None
        assert cls.Options.default("template") is None
        return
    assert _in_effect(name, row.preset, monkeypatch) == (model_id(row.model), row.template)
