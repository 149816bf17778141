"""Speech reward benchmarks: batched rewardzoo calls against per-clip loops and reference libraries.

- asr_wer: one batched Whisper ``generate`` per call against a loop of one ``generate`` per clip, on
  the same tiny random Whisper (``rewardzoo.testing.tiny_whisper_dir``), 16 clips of 5 s at 16 kHz.
  A tiny model measures the batching overhead, not a real checkpoint's speed.
- speech_presence: the reward (Silero windows of all clips in one batch) against silero-vad's
  ``get_speech_timestamps`` called per clip, 16 clips of 5 s (espeak-ng speech when installed).
- si_sdr: the reward (input checks, float64) against torchmetrics'
  ``scale_invariant_signal_distortion_ratio`` on the same stacked clips, 16 clips of 10 s at 16 kHz.

Run: ``python benchmarks/bench_speech.py [--quick]``. Ratios > 1 mean rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
RATE = 16000


def speech_clips(n: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    """espeak-ng speech tiled to ``seconds`` (plus a little noise per clip), else a synthetic stand-in."""
    rng = np.random.default_rng(seed)
    base = None
    if shutil.which("espeak-ng"):
        from rewardzoo.shared.audio import prepare_audio

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "s.wav"
            text = "Benchmarking speech rewards with a batch of clips. Each clip is five seconds of synthetic speech."
            subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
            base = prepare_audio(str(path), target_rate=RATE)[0][0]
    if base is None:
        t = np.arange(int(seconds * RATE)) / RATE
        base = (0.3 * np.sin(2 * np.pi * 140 * t) * (1 + np.sin(2 * np.pi * 4 * t))).astype(np.float32)
    length = int(seconds * RATE)
    tiled = np.tile(base, length // base.size + 1)[:length]
    return [(tiled + 0.01 * rng.standard_normal(length)).astype(np.float32) for _ in range(n)]


def bench_asr(n: int, repeats: int) -> dict:
    from rewardzoo.rewards.audio.asr import ASRWordAccuracy
    from rewardzoo.testing import tiny_whisper_dir

    with tempfile.TemporaryDirectory() as tmp:
        reward = ASRWordAccuracy(model_path=str(tiny_whisper_dir(Path(tmp) / "w", seed=5)), max_new_tokens=16)
    clips = speech_clips(n, 5.0)
    prompts = ["each clip is five seconds of synthetic speech"] * n
    times, _ = interleaved(
        {
            "per-clip loop": lambda: [
                reward(audio=[c], audio_sample_rate=[RATE], prompt=[p]) for c, p in zip(clips, prompts)
            ],
            "batched": lambda: reward(audio=clips, audio_sample_rate=[RATE] * n, prompt=prompts),
        },
        repeats,
    )
    loop, batched = times["per-clip loop"], times["batched"]
    print(f"asr_wer, {n} clips of 5 s: loop {loop:.3f} s | batched {batched:.3f} s | {loop / batched:.2f}x")
    return figure(
        "speech.asr_wer.batched",
        f"asr_wer on {n} clips of 5 s at 16 kHz, tiny random Whisper (16 new tokens "
        f"max): one batched call vs a per-clip loop, median of {repeats} interleaved runs",
        measure("rewardzoo batched", n / batched, "clips/s"),
        baseline=measure("per-clip loop", n / loop, "clips/s"),
        ratio=loop / batched,
        ratio_label="x faster",
        rewards=["asr_wer", "asr_cer"],
        notes="a tiny model: measures batching, not a real checkpoint's speed",
    )


def bench_vad(n: int, repeats: int) -> dict:
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    from rewardzoo.rewards.audio.vad import SpeechPresence

    reward = SpeechPresence()
    model = load_silero_vad()
    clips = speech_clips(n, 5.0, seed=1)
    tensors = [torch.from_numpy(c) for c in clips]
    times, _ = interleaved(
        {
            "silero-vad per clip": lambda: [get_speech_timestamps(t, model, sampling_rate=RATE) for t in tensors],
            "rewardzoo": lambda: reward(audio=clips, audio_sample_rate=[RATE] * n),
        },
        repeats,
    )
    ref, ours = times["silero-vad per clip"], times["rewardzoo"]
    print(f"speech_presence, {n} clips of 5 s: silero-vad {ref:.3f} s | rewardzoo {ours:.3f} s | {ref / ours:.2f}x")
    return figure(
        "speech.speech_presence.batched",
        f"speech_presence on {n} clips of 5 s at 16 kHz: the reward (Silero "
        "windows of all clips batched) vs silero-vad `get_speech_timestamps` per clip, median of "
        f"{repeats} interleaved runs",
        measure("rewardzoo", n / ours, "clips/s"),
        baseline=measure("silero-vad per clip", n / ref, "clips/s"),
        ratio=ref / ours,
        ratio_label="x faster",
        rewards=["speech_presence"],
    )


def bench_si_sdr(n: int, repeats: int) -> dict:
    import torch
    from torchmetrics.functional.audio import scale_invariant_signal_distortion_ratio

    from rewardzoo.rewards.audio.reference import SISDR

    rng = np.random.default_rng(2)
    refs = [(0.3 * rng.standard_normal(10 * RATE)).astype(np.float32) for _ in range(n)]
    outs = [(r + 0.1 * rng.standard_normal(r.size)).astype(np.float32) for r in refs]
    reward = SISDR()
    preds, target = torch.from_numpy(np.stack(outs)).double(), torch.from_numpy(np.stack(refs)).double()
    times, _ = interleaved(
        {
            "torchmetrics": lambda: scale_invariant_signal_distortion_ratio(preds, target, zero_mean=True),
            "rewardzoo": lambda: reward(
                audio=outs, audio_sample_rate=[RATE] * n, condition_audio=refs, condition_audio_sample_rate=[RATE] * n
            ),
        },
        repeats,
    )
    ref, ours = times["torchmetrics"], times["rewardzoo"]
    print(
        f"si_sdr, {n} clips of 10 s: torchmetrics {ref * 1e3:.1f} ms | rewardzoo {ours * 1e3:.1f} ms | {ref / ours:.2f}x"
    )
    return figure(
        "speech.si_sdr.batch",
        f"SI-SDR on {n} clips of 10 s at 16 kHz, float64: the reward (input checks, "
        "centring, padding) vs torchmetrics `scale_invariant_signal_distortion_ratio` on the stacked "
        f"tensors, median of {repeats} interleaved runs",
        measure("rewardzoo", ours * 1e3, "ms"),
        baseline=measure("torchmetrics", ref * 1e3, "ms"),
        ratio=ref / ours,
        ratio_label="x faster",
        rewards=["si_sdr"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    repeats = 3 if args.quick else 5
    figs = [bench_asr(16, repeats), bench_vad(16, repeats), bench_si_sdr(16, repeats)]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
