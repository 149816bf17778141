"""Audio test fixtures: synthetic signals, one DNSMOS instance per session, a tiny random-init CLAP."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="session")
def dnsmos():
    from rewardzoo.rewards.audio.dnsmos import DNSMOS

    return DNSMOS()


@pytest.fixture(scope="session")
def dnsmos_personalized():
    from rewardzoo.rewards.audio.dnsmos import DNSMOS

    return DNSMOS(personalized=True)


@pytest.fixture(scope="session")
def speechmos_run():
    """speechmos's own DNSMOS (librosa front end), the reference: x float (time,) at 16 kHz -> dict."""
    from speechmos import dnsmos as reference

    def run(x: np.ndarray, personalized: bool = False) -> dict:
        out = reference.run(np.asarray(x, dtype=np.float32), 16000,
                            model_type="dnsmos_personalized" if personalized else "dnsmos")
        return {"ovrl": out["ovrl_mos"], "sig": out["sig_mos"], "bak": out["bak_mos"], "p808": out["p808_mos"]}

    return run


@pytest.fixture(scope="session")
def tiny_clap_dir(tmp_path_factory):
    """A random-init ClapModel (tiny HTSAT + RoBERTa) and ClapProcessor saved like a hub checkpoint."""
    import torch
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor, RobertaTokenizer

    path = tmp_path_factory.mktemp("tiny_clap")
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault("\u0120" + ch, len(vocab))
    vocab.setdefault("\u0120", len(vocab))
    (path / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = RobertaTokenizer(vocab=vocab, merges=[])
    text = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=64, projection_dim=16)
    audio = dict(depths=[1, 1], num_attention_heads=[1, 2], patch_embeds_hidden_size=8, hidden_size=16,
                 projection_dim=16, window_size=8, spec_size=256, num_mel_bins=64, enable_fusion=False)
    torch.manual_seed(0)
    ClapModel(ClapConfig(text_config=text, audio_config=audio, projection_dim=16)).eval().save_pretrained(path)
    # rand_trunc + repeatpad: the unfused LAION checkpoints' settings (one mel view per clip)
    ClapProcessor(feature_extractor=ClapFeatureExtractor(truncation="rand_trunc", padding="repeatpad"),
                  tokenizer=tokenizer).save_pretrained(path)
    return str(path)
