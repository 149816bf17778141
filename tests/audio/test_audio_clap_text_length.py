"""CLAP ``text_max_length``: LAION's 77 by default; longer prompts are truncated to that many tokens."""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.audio.clap import TEXT_MAX_LENGTH, ClapScore

from .signals import tone


def test_default_is_laion_77(tiny_clap_dir):
    assert TEXT_MAX_LENGTH == 77
    assert ClapScore(model_path=tiny_clap_dir).text_max_length == 77


def test_truncates_to_max_length(tiny_clap_dir):
    # the tiny tokenizer is character-level: <s> + one token per letter + </s>
    short = ClapScore(model_path=tiny_clap_dir, text_max_length=10)
    roomy = ClapScore(model_path=tiny_clap_dir, text_max_length=40)
    clip = tone(48000, 2.0).astype(np.float32)
    long_prompt, kept = "abcdefghxyzuvw", "abcdefgh"  # 8 letters survive a 10-token limit
    cut = short(audio=[clip], prompt=[long_prompt], audio_sample_rate=[48000])
    ref = roomy(audio=[clip], prompt=[kept], audio_sample_rate=[48000])
    full = roomy(audio=[clip], prompt=[long_prompt], audio_sample_rate=[48000])
    np.testing.assert_allclose(cut, ref, atol=1e-6)
    assert short.processor.tokenizer([long_prompt], truncation=True, max_length=10)["input_ids"][0].__len__() == 10
    assert not np.allclose(full, ref, atol=1e-6)  # the truncated letters did matter


@pytest.mark.parametrize("bad", [0, -3, "77"])
def test_rejects_bad_values(tiny_clap_dir, bad):
    with pytest.raises(ConfigError):
        ClapScore(model_path=tiny_clap_dir, text_max_length=bad)
