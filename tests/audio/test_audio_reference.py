"""condition_audio (Sample, manifest, conversion, processor) and the reference-based rewards si_sdr, pesq, stoi."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from torchmetrics.functional.audio import scale_invariant_signal_distortion_ratio

from rewardzoo import RewardProcessor, load_config
from rewardzoo.core.fields import convert_field
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.jobs.manifest import read_manifest
from rewardzoo.registry import example_config
from rewardzoo.rewards.audio.reference import PESQ, SISDR, STOI, si_sdr
from rewardzoo.rewards.base import KNOWN_FIELDS, Inputs
from rewardzoo.shared.audio import prepare_audio, resample
from rewardzoo.spec.sample import Sample

from .signals import noise, speech_like

pesq_pkg = pytest.importorskip("pesq")
pystoi_stoi = pytest.importorskip("pystoi").stoi

RATE = 16000


def _pair(seconds: float = 2.0, rate: int = RATE, amp: float = 0.05, seed: int = 0):
    clean = speech_like(rate, seconds, seed=seed).astype(np.float32)
    return (clean + noise(rate, seconds, amp=amp, seed=seed + 1)).astype(np.float32), clean


def _call(reward, outs, refs, rate=RATE, ref_rate=None):
    return reward(
        audio=outs,
        audio_sample_rate=[rate] * len(outs),
        condition_audio=refs,
        condition_audio_sample_rate=[ref_rate or rate] * len(refs),
    )


# ------------------------------------------------------------------------------------------------ the field
def test_condition_audio_is_a_known_field_of_sample_and_inputs():
    assert "condition_audio" in KNOWN_FIELDS
    s = Sample.from_dict({"audio": "a.wav", "condition_audio": "b.wav"})
    assert s.condition_audio == "b.wav" and s.condition_audio_sample_rate is None
    Inputs(("audio", "condition_audio"))
    a, b = Inputs(("condition_audio",), sample_rate=8000), Inputs(("condition_audio",), sample_rate=16000)
    assert a.conversion_key("condition_audio") != b.conversion_key("condition_audio")


def test_manifest_resolves_condition_audio_relative_to_the_manifest(tmp_path):
    (tmp_path / "clips").mkdir()
    out, ref = _pair(1.0)
    sf.write(tmp_path / "clips" / "out.wav", out, RATE)
    sf.write(tmp_path / "clips" / "ref.wav", ref, RATE)
    (tmp_path / "m.jsonl").write_text(json.dumps({"audio": "clips/out.wav", "condition_audio": "clips/ref.wav"}) + "\n")
    samples, _ = read_manifest(tmp_path / "m.jsonl")
    assert samples[0].condition_audio == str(tmp_path / "clips" / "ref.wav")
    result = RewardProcessor(load_config(example_config("si_sdr")).rewards)(samples)
    direct = _call(SISDR(), [out], [ref]).rewards[0]
    assert result.rewards["si_sdr"][0] == pytest.approx(direct, abs=1e-3)  # the wav files are 16-bit PCM


def test_conversion_resamples_condition_audio_like_audio():
    _, ref = _pair(1.0, rate=44100)
    sample = Sample(audio=ref, audio_sample_rate=44100, condition_audio=ref, condition_audio_sample_rate=44100)
    wants = Inputs(("audio", "condition_audio"), sample_rate=RATE)
    got, rate = convert_field("condition_audio", sample.condition_audio, sample, wants)
    want, _ = convert_field("audio", sample.audio, sample, wants)
    assert rate == RATE and np.array_equal(got, want)
    with pytest.raises(InputError, match="condition_audio_sample_rate"):
        convert_field("condition_audio", ref, Sample(condition_audio=ref), wants)


def test_processor_passes_condition_audio_and_its_rate(tmp_path):
    out, ref = _pair(2.0)
    ref44 = resample(ref[None], RATE, 44100)[0]
    proc = RewardProcessor(load_config(example_config("si_sdr")).rewards)
    res = proc(
        [
            Sample(audio=out, audio_sample_rate=RATE, condition_audio=ref44, condition_audio_sample_rate=44100),
            Sample(
                audio=out,
                audio_sample_rate=RATE,
                condition_audio=torch.from_numpy(ref),
                condition_audio_sample_rate=RATE,
            ),
        ]
    )
    assert res.rewards["si_sdr"][1] == pytest.approx(_call(SISDR(), [out], [ref]).rewards[0], abs=1e-5)
    assert abs(res.rewards["si_sdr"][0] - res.rewards["si_sdr"][1]) < 0.5  # through 44.1 kHz and back


def test_missing_condition_audio_names_reward_field_and_sample():
    out, ref = _pair(1.0)
    proc = RewardProcessor(load_config(example_config("si_sdr")).rewards)
    with pytest.raises(InputError) as exc:
        proc(
            [
                Sample(audio=out, audio_sample_rate=RATE, condition_audio=ref, condition_audio_sample_rate=RATE),
                Sample(audio=out, audio_sample_rate=RATE),
            ]
        )
    assert (exc.value.reward, exc.value.field, exc.value.sample) == ("si_sdr", "condition_audio", 1)
    with pytest.raises(InputError) as exc:
        SISDR()(
            audio=[out, out],
            audio_sample_rate=[RATE] * 2,
            condition_audio=[ref, None],
            condition_audio_sample_rate=[RATE] * 2,
        )
    assert (exc.value.field, exc.value.sample) == ("condition_audio", 1)


# ------------------------------------------------------------------------------------------------ SI-SDR
@pytest.mark.parametrize("seed", range(4))
def test_si_sdr_matches_torchmetrics(seed):
    rng = np.random.default_rng(seed)
    target = torch.from_numpy(rng.standard_normal((3, 4000)))
    preds = 0.7 * target + torch.from_numpy(rng.standard_normal((3, 4000))) * (0.1 + seed) + 0.2
    for zero_mean in (True, False):
        want = scale_invariant_signal_distortion_ratio(preds, target, zero_mean=zero_mean)
        assert torch.allclose(si_sdr(preds, target, zero_mean=zero_mean), want, atol=1e-9)


def test_si_sdr_reward_batches_clips_of_different_lengths_exactly():
    pairs = [_pair(s, amp=a, seed=k) for k, (s, a) in enumerate([(1.0, 0.01), (2.5, 0.1), (0.7, 0.3)])]
    outs, refs = [p[0] for p in pairs], [p[1] for p in pairs]
    got = _call(SISDR(), outs, refs).rewards
    want = [
        float(
            scale_invariant_signal_distortion_ratio(
                torch.from_numpy(o).double(), torch.from_numpy(r).double(), zero_mean=True
            )
        )
        for o, r in zip(outs, refs)
    ]
    assert np.allclose(got, want, atol=1e-6)
    assert got[0] > got[1] > got[2]
    assert _call(SISDR(), [2.0 * refs[0]], [refs[0]]).rewards[0] > 140  # scale-invariant: a gain is no error


def test_length_mismatch_is_an_error_unless_trimmed():
    out, ref = _pair(2.0)
    with pytest.raises(InputError, match="align: trim") as exc:
        _call(SISDR(), [out, out[:-100]], [ref, ref])
    assert (exc.value.field, exc.value.sample) == ("audio", 1)
    got = _call(SISDR(align="trim"), [out[:-100]], [ref]).rewards[0]
    assert got == pytest.approx(_call(SISDR(), [out[:-100]], [ref[:-100]]).rewards[0])
    with pytest.raises(ConfigError):
        SISDR(align="pad")


@pytest.mark.parametrize("cls", [SISDR, PESQ, STOI])
def test_bad_input_is_a_typed_error_naming_field_and_sample(cls):
    reward = cls()
    out, ref = _pair(1.0)
    nan = out.copy()
    nan[10] = np.nan
    inf = out.copy()
    inf[5] = np.inf
    cases = [
        ([out, nan], [ref, ref], "audio"),
        ([out, inf], [ref, ref], "audio"),
        ([out, out], [ref, np.zeros_like(ref)], "condition_audio"),
        ([out, np.zeros_like(out)], [ref, ref], "audio"),
    ] + ([([out, out[:40]], [ref, ref[:40]], "audio")] if cls.min_seconds else [])  # SI-SDR has no minimum
    for outs, refs, fld in cases:
        with pytest.raises(InputError) as exc:
            _call(reward, outs, refs)
        assert (exc.value.field, exc.value.sample) == (fld, 1)
    with pytest.raises(InputError) as exc:
        reward(audio=[out], audio_sample_rate=[0], condition_audio=[ref], condition_audio_sample_rate=[RATE])
    assert (exc.value.field, exc.value.sample) == ("audio", 0)
    with pytest.raises(InputError) as exc:
        reward(audio=[out], audio_sample_rate=[RATE], condition_audio=[ref], condition_audio_sample_rate=[0])
    assert (exc.value.field, exc.value.sample) == ("condition_audio", 0)


# ------------------------------------------------------------------------------------------------ PESQ, STOI
@pytest.mark.parametrize("mode,rate", [("wb", 16000), ("nb", 8000)])
def test_pesq_matches_the_pesq_package_after_resampling(mode, rate):
    pairs = [_pair(2.0, rate=22050, amp=a, seed=k) for k, a in enumerate((0.01, 0.2))]
    got = _call(PESQ(mode=mode), [p[0] for p in pairs], [p[1] for p in pairs], rate=22050).rewards
    for (out, ref), score in zip(pairs, got):
        o, r = (prepare_audio(x, 22050, target_rate=rate)[0][0].astype(np.float64) for x in (out, ref))
        assert score == pytest.approx(pesq_pkg.pesq(rate, r, o, mode), abs=1e-9)
    assert got[0] > got[1] and 0.999 <= got.min() <= got.max() <= 5.0
    with pytest.raises(ConfigError):
        PESQ(mode="swb")


@pytest.mark.parametrize("extended", [False, True])
def test_stoi_matches_pystoi_at_its_10_khz_rate(extended):
    pairs = [_pair(2.0, amp=a, seed=k) for k, a in enumerate((0.01, 0.5))]
    got = _call(STOI(extended=extended), [p[0] for p in pairs], [p[1] for p in pairs]).rewards
    for (out, ref), score in zip(pairs, got):
        o, r = (prepare_audio(x, RATE, target_rate=10000)[0][0].astype(np.float64) for x in (out, ref))
        assert score == pytest.approx(pystoi_stoi(r, o, 10000, extended=extended), abs=1e-9)
    assert got[0] > got[1]


def test_stoi_refuses_too_little_active_signal():
    out, ref = _pair(2.0)
    ref = ref.copy()
    ref[4000:] = 1e-4 * ref[4000:]  # 0.25 s of signal, the rest 80 dB down: dropped as silent frames
    with pytest.raises(InputError, match="30 frames") as exc:
        _call(STOI(), [out], [ref])
    assert exc.value.sample == 0


def test_demo_samples_carry_a_reference_and_keep_their_media():
    from rewardzoo.jobs.demo import demo_samples

    audio = [s for _, s in demo_samples() if s.dataset == "audio"]
    assert audio and all(
        s.condition_audio is not None and s.condition_audio_sample_rate == s.audio_sample_rate for s in audio
    )
    np.testing.assert_array_equal(audio[0].condition_audio, audio[0].audio)  # the clean tone is the reference
