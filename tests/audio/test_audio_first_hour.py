"""Issue 50 with the audio extra: the demo's speech reward loads without a dependency's warning, and
``rewardzoo list``'s weights column: ``yes`` once the files a reward loads by default are in the local
Hugging Face cache, ``no`` before, found without network as ``rewardzoo plan`` finds them. ``clap_score``'s default,
``laion/larger_clap_general``, stands in a cache folder of the test's own (a tiny safetensors file under the hub's
layout: the listing reads the cache, never the weights)."""

from __future__ import annotations

import json

import numpy as np

from rewardzoo.cli import main


def _weights(capsys) -> dict[str, str]:
    assert main(["list", "--family", "audio", "--weights", "--json"]) == 0
    return {r["name"]: r["weights"] for r in json.loads(capsys.readouterr().out)}


def test_the_weights_column_follows_the_cache(tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants
    from safetensors.numpy import save_file

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    before = _weights(capsys)
    assert before["clap_score"] == "no" and before["loudness"] == "not needed"

    repo = tmp_path / "models--laion--larger_clap_general"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    save_file({"w": np.zeros((2, 2), np.float32)}, str(repo / "snapshots" / commit / "model.safetensors"))
    assert _weights(capsys)["clap_score"] == "yes"

    assert main(["list", "--family", "audio", "--downloaded"]) == 0
    table = capsys.readouterr().out
    assert "clap_score" in table and "asr_wer" not in table  # whisper's files are not in this cache


def test_the_speech_reward_loads_without_a_warning():
    """silero-vad loads its TorchScript file with torch.jit.load, which torch deprecates with a FutureWarning that
    was the demo's first output line; the load silences that one warning, and the process's filters are as before."""
    import warnings

    from rewardzoo import load_reward

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_reward("speech_presence")
    # what Python shows by default (a DeprecationWarning raised inside a library stays hidden)
    hidden = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
    assert [str(w.message) for w in caught if not issubclass(w.category, hidden)] == []
    assert warnings.filters == before
