"""Audio benchmarks: rewardzoo against the reference implementations, side by side in one run.

- DNSMOS first call: a fresh Python process per side (import, model load, first 10 s clip), so both
  pay their import and warm-up costs (speechmos: librosa + numba; rewardzoo: torch + onnxruntime).
- DNSMOS steady throughput: clips per second on the same 10 s 16 kHz clips, median of several runs
  after a warm-up; speechmos scores one clip per ``run`` call, rewardzoo one call per batch.
- Loudness: rewardzoo's BS.1770-4 against pyloudnorm on the same clips (short mono and long stereo).
- Clipping: the reward (with its input checks) against a bare NumPy count.
- CLAP retrieval margin (``--part clap``): ``clap_score`` with ``mode: retrieval_margin`` (seven negative captions
  per clip, UniRL PR #475's recipe) against ``mode: cosine`` on the same clips, on laion/larger_clap_general's
  architecture with random weights (``scripts/scale/audio.py``'s build; the real weights cannot be downloaded here);
  with ``--unirl DIR`` also against UniRL's own ``CLAPRewardScorer`` on the same inputs (its files as stored, with
  the container stand-in of ``scripts/check_clap_margin_unirl.py``).

Run: ``python benchmarks/bench_audio.py [--quick] [--cold-numba] [--part all|clap] [--unirl DIR]``. Prints times and
ratios (>1 = rewardzoo faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

FIRST_CALL = {
    "speechmos": """
import time; t0 = time.perf_counter()
import numpy as np
from speechmos import dnsmos
x = (0.2 * np.sin(2 * np.pi * 220 * np.arange(160000) / 16000)).astype(np.float32)
dnsmos.run(x, 16000)
print(time.perf_counter() - t0)
""",
    "rewardzoo": """
import time; t0 = time.perf_counter()
import numpy as np
from rewardzoo.registry import resolve
reward = resolve("dnsmos")()
x = (0.2 * np.sin(2 * np.pi * 220 * np.arange(160000) / 16000)).astype(np.float32)
reward(audio=[x], audio_sample_rate=[16000])
print(time.perf_counter() - t0)
""",
    # inside a trainer torch is already imported: time from there
    "rewardzoo (torch already imported)": """
import torch, time; t0 = time.perf_counter()
import numpy as np
from rewardzoo.registry import resolve
reward = resolve("dnsmos")()
x = (0.2 * np.sin(2 * np.pi * 220 * np.arange(160000) / 16000)).astype(np.float32)
reward(audio=[x], audio_sample_rate=[16000])
print(time.perf_counter() - t0)
""",
}


def first_call(side: str, repeats: int, env: dict | None = None) -> list[float]:
    times = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_CALL[side]], capture_output=True, text=True, check=True, env=env
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def paired(baseline, ours, runs: int) -> tuple[float, float]:
    """Median seconds of ``baseline`` and ``ours`` (interleaved runs after a warm-up)."""
    medians, _ = interleaved({"baseline": baseline, "ours": ours}, runs)
    return medians["baseline"], medians["ours"]


def clips(n: int, seconds: float, rate: int, channels: int = 1, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    out = []
    for i in range(n):
        x = 0.2 * np.sin(2 * np.pi * (150 + 40 * i) * t) + 0.05 * rng.standard_normal((channels, t.size))
        out.append((x[0] if channels == 1 else x).astype(np.float32))
    return out


CAPTIONS = [
    "a dog barks twice in a quiet yard", "rain falls steadily on a tin roof", "a man speaks calmly in a small room",
    "birds sing at dawn in a forest", "a car horn honks in heavy traffic", "waves crash on a rocky shore",
    "a crowd cheers in a large stadium", "a kettle whistles in a kitchen", "footsteps echo in an empty hall",
]  # fmt: skip


def clap_margin_figures(runs: int, n_clips: int, unirl: str | None = None) -> list[dict]:
    """``retrieval_margin`` (seven negatives a clip, from its metadata) vs ``cosine`` on the real-size architecture,
    and with ``unirl`` (a folder of UniRL's stored files) vs UniRL's ``CLAPRewardScorer`` at PR #475's weights."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from scale.audio import build_clap

    from rewardzoo.rewards.audio.clap import ClapScore

    folder = tempfile.mkdtemp(prefix="bench-clap-")
    build_clap(__import__("pathlib").Path(folder))
    cosine = ClapScore(model_path=folder)
    margin = ClapScore(model_path=folder, mode="retrieval_margin", negatives_key="negative_prompts")
    audio = clips(n_clips, 10.0, 48000, seed=7)
    prompts = [CAPTIONS[i % len(CAPTIONS)] for i in range(n_clips)]
    metadata = [{"negative_prompts": [c for c in CAPTIONS if c != p][:7]} for p in prompts]
    rates = [48000] * n_clips
    sides = {
        "cosine": lambda: cosine(audio=audio, prompt=prompts, audio_sample_rate=rates),
        "margin": lambda: margin(audio=audio, prompt=prompts, audio_sample_rate=rates, metadata=metadata),
    }
    if unirl:
        import torch
        from check_clap_margin_unirl import overlay

        sys.path.insert(0, str(overlay(__import__("pathlib").Path(unirl))))
        from unirl.reward.local.clap import CLAPRewardScorer, CLAPSpec
        from unirl.types.reward import RewardRequest, _Texts

        spec = CLAPSpec(
            device="cpu", model_id=folder, retrieval_margin_weight=1.0, negative_prompts_metadata_key="negs"
        )
        theirs = CLAPRewardScorer(config=spec, base_device="cpu")
        request = RewardRequest(
            original_prompt=_Texts(prompts),
            metadata=[{"negs": m["negative_prompts"]} for m in metadata],
            audio=[torch.from_numpy(x) for x in audio],
            audio_sample_rate=48000,
        )
        sides["unirl"] = lambda: theirs.compute_rewards(request)
    medians, ratios = interleaved(sides, runs)
    print(
        f"CLAP, {n_clips} x 10 s at 48 kHz: cosine {medians['cosine']:.2f} s | retrieval_margin (7 negatives each) "
        f"{medians['margin']:.2f} s | ratio {ratios['margin']:.2f}"
        + (f" | UniRL's scorer {medians['unirl']:.2f} s" if unirl else "")
    )
    figs = [
        figure(
            "audio.clap.retrieval_margin_vs_cosine",
            f"clap_score, {n_clips} clips of 10 s at 48 kHz, laion/larger_clap_general's architecture (random weights), "
            f"float32 on the CPU: `mode: retrieval_margin` with 7 negative captions per clip (UniRL PR #475's recipe) vs "
            f"`mode: cosine`; median of {runs} interleaved runs",
            measure("retrieval_margin", medians["margin"], "s"),
            baseline=measure("cosine", medians["cosine"], "s"),
            ratio=ratios["margin"],
            ratio_label="margin / cosine time",
            rewards=["clap_score"],
            notes="the margin adds one text forward per distinct negative caption and a max over its cosines",
        )
    ]
    if unirl:
        speed = ratios["unirl"] / ratios["margin"]  # per-run ratios against the cosine side: drift cancels
        figs.append(
            figure(
                "audio.clap.retrieval_margin_vs_unirl",
                f"clap_score `mode: retrieval_margin` vs UniRL's CLAPRewardScorer (0f5d2ae, weights 1.0 + 1.0, 7 "
                f"negative captions a clip from metadata), {n_clips} clips of 10 s at 48 kHz, the same real-size "
                f"architecture with random weights, float32 on the CPU; median of {runs} interleaved runs",
                measure("rewardzoo", medians["margin"], "s"),
                baseline=measure("UniRL CLAPRewardScorer", medians["unirl"], "s"),
                ratio=speed,
                ratio_label="x faster",
                rewards=["clap_score"],
                notes="scores agree within 2.1e-7 (scripts/check_clap_margin_unirl.py, tiny model)",
            )
        )
    return figs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer clips and runs")
    parser.add_argument(
        "--cold-numba",
        action="store_true",
        help="also time speechmos's first call with an empty numba cache (librosa's JIT, ~15 s)",
    )
    parser.add_argument("--part", choices=["all", "clap"], default="all", help="clap: only the CLAP figures")
    parser.add_argument("--unirl", help="a folder of UniRL's stored CLAP scorer files: time it as the baseline")
    args = parser.parse_args()
    runs, n_clips, fresh = (3, 4, 2) if args.quick else (5, 8, 3)
    if args.part == "clap":
        write_results(__file__, clap_margin_figures(runs, n_clips, args.unirl), parts=["audio.clap"])
        return

    print(f"DNSMOS first call in a fresh process (import + load + one 10 s clip), median of {fresh}:")
    first = {side: statistics.median(first_call(side, fresh)) for side in FIRST_CALL}
    figs = []
    speechmos = measure("speechmos", first["speechmos"], "s")
    figs += [
        figure(
            "audio.dnsmos.first_call",
            "DNSMOS first call in a fresh process (import, model load, one 10 s "
            f"clip at 16 kHz), numba cache warm; median of {fresh} processes",
            measure("rewardzoo", first["rewardzoo"], "s"),
            baseline=speechmos,
            ratio=first["speechmos"] / first["rewardzoo"],
            ratio_label="x faster",
            goal="<= 2 s",
            rewards=["dnsmos"],
            notes="mostly torch's import",
        ),
        figure(
            "audio.dnsmos.first_call_torch_imported",
            "DNSMOS first call in a fresh process with torch "
            f"already imported (as inside a trainer); median of {fresh} processes",
            measure("rewardzoo", first["rewardzoo (torch already imported)"], "s"),
            baseline=speechmos,
            ratio=first["speechmos"] / first["rewardzoo (torch already imported)"],
            ratio_label="x faster",
            rewards=["dnsmos"],
        ),
    ]
    for side in ("rewardzoo", "rewardzoo (torch already imported)"):
        print(
            f"  speechmos {first['speechmos']:.2f} s | {side} {first[side]:.2f} s | "
            f"ratio {first['speechmos'] / first[side]:.2f}x"
        )
    if args.cold_numba:
        with tempfile.TemporaryDirectory() as cache:
            cold = first_call("speechmos", 1, env={**os.environ, "NUMBA_CACHE_DIR": cache})[0]
        print(
            f"  speechmos with an empty numba cache: {cold:.2f} s | ratio to rewardzoo {cold / first['rewardzoo']:.2f}x"
        )
        figs.append(
            figure(
                "audio.dnsmos_cold.first_call",
                "DNSMOS first call in a fresh process, speechmos with an "
                "empty numba cache (librosa's JIT) vs rewardzoo's warm first call",
                measure("rewardzoo", first["rewardzoo"], "s"),
                baseline=measure("speechmos, cold numba cache", cold, "s"),
                ratio=cold / first["rewardzoo"],
                ratio_label="x faster",
                rewards=["dnsmos"],
            )
        )

    from speechmos import dnsmos as reference

    from rewardzoo.rewards.audio.dnsmos import DNSMOS

    reward = DNSMOS()
    batch = clips(n_clips, 10.0, 16000)
    t_ref, t_ours = paired(
        lambda: [reference.run(x, 16000) for x in batch],
        lambda: reward(audio=batch, audio_sample_rate=[16000] * len(batch)),
        runs,
    )
    print(f"DNSMOS steady state, {n_clips} clips of 10 s at 16 kHz, median of {runs}:")
    print(
        f"  speechmos {n_clips / t_ref:.2f} clips/s | rewardzoo {n_clips / t_ours:.2f} clips/s | "
        f"ratio {t_ref / t_ours:.2f}x"
    )
    figs.append(
        figure(
            "audio.dnsmos.steady",
            f"DNSMOS steady state, {n_clips} clips of 10 s at 16 kHz (speechmos: "
            f"one `run` per clip; rewardzoo: one call per batch), median of {runs} interleaved runs",
            measure("rewardzoo", n_clips / t_ours, "clips/s"),
            baseline=measure("speechmos", n_clips / t_ref, "clips/s"),
            ratio=t_ref / t_ours,
            ratio_label="x faster",
            goal=">= 1.0x",
            rewards=["dnsmos"],
        )
    )
    batch44 = clips(n_clips, 10.0, 44100, seed=1)
    t_16, t_44 = paired(
        lambda: reward(audio=batch, audio_sample_rate=[16000] * len(batch)),
        lambda: reward(audio=batch44, audio_sample_rate=[44100] * len(batch44)),
        runs,
    )
    print(
        f"  rewardzoo at 44.1 kHz (incl. resampling to 16 kHz): {n_clips / t_44:.2f} clips/s "
        f"({t_16 / t_44:.2f}x its 16 kHz speed in the same runs)"
    )
    figs.append(
        figure(
            "audio.dnsmos.resample_44k",
            f"DNSMOS on {n_clips} clips of 10 s at 44.1 kHz (incl. resampling "
            f"to 16 kHz) vs the same call at 16 kHz, median of {runs} interleaved runs",
            measure("rewardzoo at 44.1 kHz", n_clips / t_44, "clips/s"),
            baseline=measure("rewardzoo at 16 kHz", n_clips / t_16, "clips/s"),
            ratio=t_16 / t_44,
            ratio_label="x the 16 kHz speed",
            rewards=["dnsmos"],
        )
    )

    import pyloudnorm

    from rewardzoo.rewards.audio.loudness import Loudness

    loud = Loudness()
    for key, label, data, rate in (
        ("mono_16k", "16 x 5 s mono 16 kHz", clips(16, 5.0, 16000, seed=2), 16000),
        ("stereo_48k", "60 s stereo 48 kHz", clips(1, 60.0, 48000, channels=2, seed=3), 48000),
    ):
        t_ref, t_ours = paired(
            lambda: [pyloudnorm.Meter(rate).integrated_loudness(np.asarray(x, np.float64).T) for x in data],
            lambda: loud(audio=data, audio_sample_rate=[rate] * len(data)),
            runs,
        )
        print(
            f"Loudness, {label}: pyloudnorm {t_ref * 1000:.1f} ms | rewardzoo {t_ours * 1000:.1f} ms | "
            f"ratio {t_ref / t_ours:.2f}x"
        )
        figs.append(
            figure(
                f"audio.loudness.{key}",
                f"integrated loudness (BS.1770-4), {label}, median of {runs} interleaved runs",
                measure("rewardzoo", t_ours * 1000, "ms"),
                baseline=measure("pyloudnorm", t_ref * 1000, "ms"),
                ratio=t_ref / t_ours,
                ratio_label="x faster",
                rewards=["loudness"],
            )
        )

    from rewardzoo.rewards.audio.clipping import AudioClipping

    stereo = clips(8, 10.0, 48000, channels=2, seed=4)
    t_base, t_clip = paired(
        lambda: [np.mean(np.abs(x) >= 1.0) for x in stereo],
        lambda: AudioClipping()(audio=stereo, audio_sample_rate=[48000] * len(stereo)),
        runs,
    )
    print(
        f"Clipping, 8 x 10 s stereo 48 kHz: bare NumPy count {t_base * 1000:.1f} ms | rewardzoo "
        f"{t_clip * 1000:.1f} ms (incl. input checks) | ratio {t_base / t_clip:.2f}x"
    )
    figs.append(
        figure(
            "audio.clipping.stereo_48k",
            "clipping fraction, 8 clips of 10 s stereo 48 kHz: the reward "
            "(incl. its input checks) vs a bare `np.mean(np.abs(x) >= 1.0)` per clip, median of "
            f"{runs} interleaved runs",
            measure("rewardzoo", t_clip * 1000, "ms"),
            baseline=measure("bare NumPy", t_base * 1000, "ms"),
            ratio=t_base / t_clip,
            ratio_label="x faster",
            rewards=["audio_clipping"],
        )
    )
    figs += clap_margin_figures(runs, n_clips, args.unirl)
    parts = ["audio.dnsmos", "audio.loudness", "audio.clipping", "audio.clap"]
    parts += ["audio.dnsmos_cold"] if args.cold_numba else []
    write_results(__file__, figs, parts=parts)


if __name__ == "__main__":
    main()
