"""The config lint: each warning on a config built to trigger it, and silent on its counterpart; the CLI's exit
status and JSON; the card facts it reads."""

from __future__ import annotations

import json

import pytest
import yaml

from rewardzoo.cli import main
from rewardzoo.cli.lint import CODES, DOMINANCE, lint_config
from rewardzoo.errors import ConfigError, RegistryError
from rewardzoo.registry import builtin, info_from_card, read_card

GOLD = ["hpsv2"]  # an eval reward no config below trains on, so RZ004 stays out of the way


def codes(config, **kw) -> list[str]:
    return [w.code for w in lint_config(config, **kw)]


def cfg(*rewards, evals=GOLD, **top) -> dict:
    out = {"rewards": list(rewards), **top}
    if evals is not None:
        out["eval_rewards"] = list(evals)
    return out


def test_a_balanced_prompt_conditioned_config_with_a_gold_check_is_clean():
    assert lint_config(cfg({"name": "pickscore"}, {"name": "clip_score", "weight": 0.5})) == []


def test_no_prompt_reward_per_dataset():
    assert codes(cfg("laion_aesthetic", "jpeg_compressibility")) == ["RZ001"]
    assert "RZ001" not in codes(cfg("laion_aesthetic", "pickscore"))
    routed = cfg(
        {"name": "pickscore", "applicable_datasets": ["t2i"]},
        {"name": "laion_aesthetic", "applicable_datasets": ["t2i", "art"]},
    )
    found = [w for w in lint_config(routed) if w.code == "RZ001"]
    assert [(w.dataset, w.streams) for w in found] == [("art", ("laion_aesthetic",))]
    # a group wrapper reads through to its base; a reward whose card does not say makes the check abstain
    assert "RZ001" not in codes(cfg({"name": "g", "reward_model": "group_rank", "kwargs": {"base": "pickscore"}}))
    assert "RZ001" in codes(cfg({"name": "g", "reward_model": "group_rank", "kwargs": {"base": "laion_aesthetic"}}))
    assert "RZ001" not in codes(
        cfg("laion_aesthetic", {"name": "r", "reward_model": "remote", "kwargs": {"url": "http://127.0.0.1:1"}})
    )


def _spread(name: str, weight: float) -> float:
    lo, hi = builtin()[name].typical_range
    return abs(weight) * (hi - lo)


@pytest.mark.parametrize("weights", [(1.0, 1.0), (1.0, 0.2), (10.0, 1.0), (20.0, 1.0), (1.0, 0.0)])
def test_dominant_weight_against_the_shares_computed_here(weights):
    w_pick, w_aes = weights
    config = cfg({"name": "pickscore", "weight": w_pick}, {"name": "laion_aesthetic", "weight": w_aes})
    parts = [_spread("pickscore", w_pick), _spread("laion_aesthetic", w_aes)]
    dominant = w_aes != 0.0 and max(parts) >= DOMINANCE * sum(parts)
    found = [w for w in lint_config(config) if w.code == "RZ002"]
    assert bool(found) == dominant
    if found:
        top = ["pickscore", "laion_aesthetic"][parts.index(max(parts))]
        assert found[0].streams == (top,) and f"{max(parts) / sum(parts):.0%}" in found[0].reason


def test_dominant_weight_follows_dataset_weights_and_not_gdpo():
    pick, aes = _spread("pickscore", 1.0), _spread("laion_aesthetic", 1.0)
    assert aes >= DOMINANCE * (aes + pick)  # at equal weights (dataset a) laion_aesthetic dominates
    balanced = pick / aes  # on dataset b both spreads are equal
    per_dataset = cfg(
        {"name": "pickscore", "applicable_datasets": ["a", "b"]},
        {"name": "laion_aesthetic", "applicable_datasets": ["a", "b"], "weight": {"a": 1.0, "b": balanced}},
    )
    assert [w.dataset for w in lint_config(per_dataset) if w.code == "RZ002"] == ["a"]
    loud = cfg("pickscore", "laion_aesthetic")
    assert "RZ002" in codes(loud) and "RZ002" not in codes({**loud, "advantage": "gdpo"})
    assert "RZ002" not in codes(cfg("pickscore", "jpeg_compressibility"))  # no typical range: not judged


def test_group_wrapper_over_a_near_constant_reward():
    wrapped = cfg("pickscore", {"name": "safe", "reward_model": "group_normalized", "kwargs": {"base": "nsfw_safety"}})
    found = [w for w in lint_config(wrapped) if w.code == "RZ003"]
    assert len(found) == 1 and found[0].streams == ("safe",) and "nsfw_safety" in found[0].reason
    mapping = cfg(
        "pickscore",
        {
            "name": "safe",
            "reward_model": "group_rank",
            "kwargs": {"base": {"reward_model": "nsfw_safety", "device": "cpu"}},
        },
    )
    assert "RZ003" in codes(mapping)
    guard = cfg("pickscore", {"name": "nsfw_safety", "weight": 0.1})
    assert "RZ003" not in codes(guard) and "RZ003" in codes({**guard, "advantage": "gdpo"})
    assert "RZ003" not in codes(cfg({"name": "g", "reward_model": "group_normalized", "kwargs": {"base": "pickscore"}}))


def test_no_gold_check():
    assert codes(cfg("pickscore", evals=None)) == ["RZ004"]  # eval_rewards falls back to rewards
    assert codes(cfg("pickscore", "clip_score", evals=["clip_score"])) == ["RZ004"]
    same_model = {"name": "eval_pick", "reward_model": "pickscore", "batch_size": 4, "dtype": "bfloat16"}
    assert codes(cfg("pickscore", evals=[same_model])) == ["RZ004"]  # how it runs does not make it another model
    through_wrapper = cfg(
        {"name": "g", "reward_model": "group_rank", "kwargs": {"base": "pickscore"}}, evals=["pickscore"]
    )
    assert codes(through_wrapper) == ["RZ004"]
    other_weights = {"name": "eval_pick", "reward_model": "pickscore", "model_path": "/weights/other"}
    assert codes(cfg("pickscore", evals=[other_weights])) == []
    assert codes(cfg("pickscore", evals=["pickscore", "image_reward"])) == []


def test_still_video_without_motion_or_diversity():
    still = cfg("video_clip_score", "video_subject_consistency", "video_temporal_flickering", evals=["videoalign"])
    found = [w for w in lint_config(still) if w.code == "RZ005"]
    assert len(found) == 1 and found[0].streams == ("video_subject_consistency", "video_temporal_flickering")
    assert "RZ005" not in codes({**still, "rewards": still["rewards"] + ["video_dynamic_degree"]})
    diverse = {"name": "d", "reward_model": "diversity_weighted", "kwargs": {"base": "video_clip_score"}}
    assert "RZ005" not in codes({**still, "rewards": still["rewards"] + [diverse]})
    routed = cfg(
        "video_clip_score",
        {"name": "video_temporal_flickering", "applicable_datasets": ["v"]},
        {"name": "video_dynamic_degree", "applicable_datasets": ["w"]},
        evals=["videoalign"],
    )
    assert [w.dataset for w in lint_config(routed) if w.code == "RZ005"] == ["v"]
    assert "RZ005" not in codes(cfg("video_clip_score", "video_aesthetic", evals=["videoalign"]))


def test_ignore_and_bad_options():
    config = cfg("laion_aesthetic", evals=None)
    assert codes(config) == ["RZ001", "RZ004"]
    assert codes(config, ignore=["RZ004"]) == ["RZ001"] and codes(config, ignore=["no-prompt-reward", "RZ004"]) == []
    with pytest.raises(ConfigError, match="unknown lint code"):
        lint_config(config, ignore=["RZ999"])
    with pytest.raises(ConfigError, match="dominance"):
        lint_config(config, dominance=0.0)
    with pytest.raises(ConfigError, match="base"):
        lint_config(cfg({"name": "g", "reward_model": "group_rank", "kwargs": {"base": 3}}))


def test_cli_exit_status_and_json(tmp_path, capsys):
    clean = tmp_path / "clean.yaml"
    clean.write_text(yaml.safe_dump(cfg("pickscore")))
    assert main(["lint", str(clean)]) == 0 and "no warnings" in capsys.readouterr().out
    dirty = tmp_path / "dirty.yaml"
    dirty.write_text(yaml.safe_dump(cfg("laion_aesthetic", evals=None)))
    assert main(["lint", str(dirty)]) == 1
    text = capsys.readouterr().out
    assert "RZ001 no-prompt-reward" in text and "fix:" in text and "2 warning(s)" in text
    assert main(["lint", str(dirty), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["code"], r["name"]) for r in rows] == [("RZ001", CODES["RZ001"]), ("RZ004", CODES["RZ004"])]
    assert all(r["reason"] and r["fix"] for r in rows) and rows[0]["streams"] == ["laion_aesthetic"]
    assert main(["lint", str(dirty), "--ignore", "RZ001", "--ignore", "no-gold-check"]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("rewards: [{name: pickscore, wieght: 2}]\n")
    assert main(["lint", str(bad)]) == 2 and "wieght" in capsys.readouterr().err


def test_card_lint_facts_are_validated(tmp_path):
    meta, _ = read_card("pickscore")
    assert builtin()["pickscore"].typical_range == tuple(meta["typical_range"])
    for value in ([1.0], [0.9, 0.1], ["a", "b"], [float("nan"), 1.0]):
        with pytest.raises(RegistryError, match="typical_range"):
            info_from_card({**meta, "typical_range": value}, tmp_path / "card.md")
    bounded, _ = read_card("nsfw_safety")
    with pytest.raises(RegistryError, match="inside score_range"):
        info_from_card({**bounded, "typical_range": [0.5, 2.0]}, tmp_path / "card.md")
    with pytest.raises(RegistryError, match="prefers_still_video"):
        info_from_card({**meta, "prefers_still_video": "yes"}, tmp_path / "card.md")


def test_cli_dominance_option(tmp_path, capsys):
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(cfg("pickscore", {"name": "clip_score", "weight": 0.5})))
    shares = [_spread("pickscore", 1.0), _spread("clip_score", 0.5)]
    low = min(shares) / sum(shares) * 0.5  # below the larger reward's share: it dominates at this setting
    assert main(["lint", str(path)]) == 0
    assert main(["lint", str(path), "--dominance", str(low)]) == 1 and "RZ002" in capsys.readouterr().out


#: How a card may say where its typical range comes from (a remembered value is none of these).
PROVENANCE = ("from the reference", "by construction", "from published training runs", "measured by")


def test_every_typical_range_says_where_it_comes_from():
    ranged = [name for name, info in builtin().items() if info.typical_range is not None]
    assert "pickscore" in ranged and "jpeg_compressibility" not in ranged
    for name in ranged:
        _, body = read_card(name)
        lines = [line for line in body.splitlines() if line.startswith("Typical range (`typical_range`")]
        assert len(lines) == 1, f"{name}: one 'Typical range' sentence"
        assert any(p in lines[0] for p in PROVENANCE), f"{name}: the typical range names no source"


def test_prompt_blind_pair_in_training_but_not_in_eval():
    def blind(config):
        return [w for w in lint_config(config) if w.code == "RZ006"]

    # the default mode of imagebind_score is audio_video (read from its typed options, not restated here)
    found = blind(cfg("clap_score", "imagebind_score", evals=["videoalign"]))
    assert [w.streams for w in found] == [("imagebind_score",)] and "mode: audio_video" in found[0].reason
    av = {"name": "sync", "reward_model": "imagebind_score", "kwargs": {"mode": "audio_video"}}
    assert len(blind(cfg("clap_score", av, evals=["videoalign"]))) == 1
    anchored = {"name": "ib", "reward_model": "imagebind_score", "kwargs": {"mode": "all"}}
    assert blind(cfg("clap_score", anchored, evals=["videoalign", av])) == []  # audio_video as an eval metric only
    assert blind(cfg("clap_score", dict(anchored, kwargs={"mode": "text_video"}), evals=["videoalign"])) == []


def test_a_card_with_a_bad_prompt_blind_when_is_refused(tmp_path):
    meta, _ = read_card("imagebind_score")
    assert builtin()["imagebind_score"].prompt_blind_when == {"mode": ("audio_video",)}
    with pytest.raises(RegistryError, match="prompt_blind_when"):
        info_from_card({**meta, "prompt_blind_when": {"mode": "audio_video"}}, tmp_path / "card.md")
