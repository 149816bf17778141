"""Video reading speed (issue 8): decord vs PyAV, and sampled reading vs decoding every frame.

Clips: 256x256 H.264 (libx264, yuv420p) at 24 fps of a drifting noisy texture, 2 s (48 frames) and
20 s (480 frames), each encoded twice: with the encoder's default GOP (one keyframe every 250
frames) and with a keyframe every 12 frames. All in one run, in a temporary directory.

Measured (medians over repetitions after a warm-up; each repetition times every side once, order
rotating; ratios are medians of per-repetition ratios):

1. full decode throughput, frames per second: decord vs PyAV on the same file;
2. 8 uniformly sampled frames (``rewardzoo.shared.video.read_video(path, 8)``) from the 2 s and the
   20 s clip, per backend and GOP: the 20 s / 2 s cost ratio (goal with the short GOP: <= 2x);
3. sampled reading vs decoding every frame of the same file (goal: ratio <= 1 everywhere).

4. (``--part rewards``) the video rewards on 2 videos x 4 frames of 256x256 with full-size random-init
   backbones (DINO ViT-B/16, CLIP ViT-B/32; same compute as the real weights), each against the
   work it cannot avoid: flickering vs a NumPy transcription of VBench's loop, subject consistency
   vs the bare transformers forward on already resized input, background consistency vs the
   backbone's own ``encode_images`` on the same frames, video_clip_score vs ``clip_score`` on the
   8 frames as images with the prompt repeated.

Run: python benchmarks/bench_video.py [--part reading|rewards|all] [--repeats 11] [--size 256]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved


def make_frames(n: int, size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (size // 8, (size + n) // 8 + 2, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        out[i] = np.clip(base[:size, i : i + size].astype(np.int16) + rng.integers(-8, 9, (size, size, 3)), 0, 255)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--part", choices=("reading", "rewards", "all"), default="reading")
    args = ap.parse_args()
    figures, parts = [], []
    if args.part in ("reading", "all"):
        figures += bench_reading(args)
        parts.append("video.reading")
    if args.part in ("rewards", "all"):
        figures += bench_rewards(args)
        parts.append("video.rewards")
    write_results(__file__, figures, parts=parts)


GOPS = {"longgop": "the encoder's default GOP (250)", "gop12": "a keyframe every 12 frames"}
READERS = ["video_temporal_flickering"]  # the card that holds the video-reading figures for all video rewards


def bench_reading(args) -> list[dict]:
    from rewardzoo.shared.video import read_video, write_video

    fps = 24
    tmp = Path(tempfile.mkdtemp(prefix="bench_video_"))
    frames = make_frames(20 * fps, args.size)
    clips = {}
    for seconds in (2, 20):
        for gop in (None, 12):
            name = f"{seconds}s_{'gop12' if gop else 'longgop'}"
            clips[name] = write_video(tmp / f"{name}.mp4", frames[: seconds * fps], fps=fps, gop=gop)
    print(f"clips: {args.size}x{args.size} H.264 {fps} fps in {tmp}; repeats={args.repeats}\n")

    # 1. full decode throughput on the same file
    path = clips["20s_longgop"]
    t, r = interleaved(
        {
            "decord": lambda: read_video(path, None, backend="decord"),
            "pyav": lambda: read_video(path, None, backend="pyav"),
        },
        args.repeats,
    )
    n = 20 * fps
    print("1. decode every frame of the 20 s clip (long GOP)")
    print(f"   decord {n / t['decord']:7.0f} frames/s ({t['decord'] * 1e3:6.1f} ms)")
    print(
        f"   PyAV   {n / t['pyav']:7.0f} frames/s ({t['pyav'] * 1e3:6.1f} ms)   PyAV / decord time = {r['pyav']:.2f}x\n"
    )
    work = f"{args.size}x{args.size} H.264 at {fps} fps, median of {args.repeats} interleaved repetitions"
    figures = [
        figure(
            "video.reading.decode_all",
            f"decode every frame of a 20 s clip ({n} frames, {GOPS['longgop']}), decord vs PyAV; {work}",
            measure("decord", n / t["decord"], "frames/s"),
            baseline=measure("PyAV", n / t["pyav"], "frames/s"),
            ratio=r["pyav"],
            ratio_label="x faster (PyAV time / decord time)",
            rewards=READERS,
        )
    ]

    # 2 + 3. 8 sampled frames: 20 s vs 2 s, and sampled vs all frames
    print("2. 8 sampled frames: cost of the 20 s clip relative to the 2 s clip")
    print("3. sampled reading relative to decoding every frame of the same file (goal <= 1)")
    print(
        f"   {'backend':7} {'GOP':8} {'2 s (ms)':>9} {'20 s (ms)':>10} {'20s/2s':>7}   "
        f"{'2 s: 8/all':>10} {'20 s: 8/all':>11}"
    )
    for backend in ("decord", "pyav"):
        for gop in ("longgop", "gop12"):
            fns = {}
            for seconds in (2, 20):
                p = clips[f"{seconds}s_{gop}"]
                fns[f"{seconds}s_all"] = lambda p=p: read_video(p, None, backend=backend)
                fns[f"{seconds}s_8"] = lambda p=p: read_video(p, 8, backend=backend)
            t, _ = interleaved(fns, args.repeats)
            _, r_len = interleaved({"2s": fns["2s_8"], "20s": fns["20s_8"]}, args.repeats)
            _, r2 = interleaved({"all": fns["2s_all"], "eight": fns["2s_8"]}, args.repeats)
            _, r20 = interleaved({"all": fns["20s_all"], "eight": fns["20s_8"]}, args.repeats)
            print(
                f"   {backend:7} {gop:8} {t['2s_8'] * 1e3:9.1f} {t['20s_8'] * 1e3:10.1f} {r_len['20s']:6.2f}x   "
                f"{r2['eight']:9.2f}x {r20['eight']:10.2f}x"
            )
            name = "PyAV" if backend == "pyav" else backend
            figures.append(
                figure(
                    f"video.reading.sampled_20s_vs_2s.{backend}.{gop}",
                    f"8 sampled frames (`read_video(path, 8)`, {name}, {GOPS[gop]}): the 20 s clip vs the 2 s clip; {work}",
                    measure("20 s clip", t["20s_8"] * 1e3, "ms"),
                    baseline=measure("2 s clip", t["2s_8"] * 1e3, "ms"),
                    ratio=r_len["20s"],
                    ratio_label="x (20 s / 2 s)",
                    goal="<= 2x" if gop == "gop12" else None,
                    rewards=READERS,
                )
            )
            for seconds, rr in ((2, r2), (20, r20)):
                figures.append(
                    figure(
                        f"video.reading.sampled_vs_all.{backend}.{gop}.{seconds}s",
                        f"8 sampled frames vs decoding every frame of the same {seconds} s clip ({name}, {GOPS[gop]}); "
                        f"{work}",
                        measure("8 sampled frames", t[f"{seconds}s_8"] * 1e3, "ms"),
                        baseline=measure("every frame", t[f"{seconds}s_all"] * 1e3, "ms"),
                        ratio=rr["eight"],
                        ratio_label="x (sampled / all)",
                        goal="<= 1",
                        rewards=READERS,
                        notes="ratio from a separate paired run",
                    )
                )
    return figures


def bench_rewards(args) -> list[dict]:
    import open_clip
    import torch

    from rewardzoo import load_reward
    from rewardzoo.rewards.image.clip_score import ClipScore
    from rewardzoo.rewards.video.consistency import BackgroundConsistency, SubjectConsistency
    from rewardzoo.rewards.video.flickering import TemporalFlickering
    from rewardzoo.testing import tiny_dino_dirs, tiny_open_clip_dir

    tmp = Path(tempfile.mkdtemp(prefix="bench_video_models_"))
    # full-size random-init backbones: DINO ViT-B/16 (transformers' ViTConfig defaults) and open_clip ViT-B/32
    vit_b16 = dict(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        image_size=224,
        patch_size=16,
        initializer_range=0.02,
    )
    dino_dir = tiny_dino_dirs(tmp / "dino", seed=0, vit_config=vit_b16)["vit"]
    clip_dir = tiny_open_clip_dir(
        tmp / "clip", seed=0, model_cfg=open_clip.get_model_config("ViT-B-32"), preprocess_cfg={}
    )

    frames = make_frames(4, args.size)
    videos = [
        torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255,
        torch.from_numpy(frames[::-1].copy()).permute(0, 3, 1, 2).float() / 255,
    ]
    u8 = [frames, frames[::-1]]
    prompts = ["a drifting texture", "a red fox in the snow"]
    reps = 3
    print(
        f"\n4. rewards on 2 videos x 4 frames {args.size}x{args.size} (CPU, {torch.get_num_threads()} threads, "
        f"repeats={reps})"
    )

    def numpy_flicker():
        return [
            float(
                np.mean(
                    [np.mean(np.abs(v[i].astype(np.float32) - v[i + 1].astype(np.float32))) for i in range(len(v) - 1)]
                )
            )
            for v in u8
        ]

    flicker = TemporalFlickering()
    t, r = interleaved({"numpy": numpy_flicker, "reward": lambda: flicker(video=videos)}, reps * 3)
    print(
        f"   video_temporal_flickering   {t['reward'] * 1e3:8.1f} ms   NumPy VBench loop {t['numpy'] * 1e3:8.1f} ms"
        f"   ratio {r['reward']:.2f}"
    )
    work = f"2 videos x 4 frames {args.size}x{args.size}, CPU, {torch.get_num_threads()} torch threads"
    figures = [
        figure(
            "video.rewards.flickering",
            f"`video_temporal_flickering` vs a NumPy transcription of VBench's "
            f"loop; {work}, median of {reps * 3} interleaved repetitions",
            measure("video_temporal_flickering", t["reward"] * 1e3, "ms"),
            baseline=measure("NumPy VBench loop", t["numpy"] * 1e3, "ms"),
            ratio=r["reward"],
            ratio_label="reward / baseline",
            rewards=["video_temporal_flickering"],
        )
    ]

    subject = SubjectConsistency(dino_dir, num_frames=None)
    pre = [subject.preprocess(v) for v in videos]
    with torch.inference_mode():
        bare = lambda: [subject.model(pixel_values=x, interpolate_pos_encoding=True) for x in pre]  # noqa: E731
        t, r = interleaved({"bare": bare, "reward": lambda: subject(video=videos)}, reps)
    print(
        f"   video_subject_consistency   {t['reward'] * 1e3:8.1f} ms   bare ViT-B/16 forward {t['bare'] * 1e3:8.1f} ms"
        f"   ratio {r['reward']:.2f}"
    )
    figures.append(
        figure(
            "video.rewards.subject_consistency",
            "`video_subject_consistency` (full-size random-init "
            "DINO ViT-B/16) vs the bare transformers forward on already resized input; "
            f"{work}, median of {reps} interleaved repetitions",
            measure("video_subject_consistency", t["reward"] * 1e3, "ms"),
            baseline=measure("bare ViT-B/16 forward", t["bare"] * 1e3, "ms"),
            ratio=r["reward"],
            ratio_label="reward / baseline",
            rewards=["video_subject_consistency"],
        )
    )

    background = BackgroundConsistency(str(clip_dir), num_frames=None)
    t, r = interleaved(
        {
            "encode": lambda: [background.backbone.encode_images(v) for v in videos],
            "reward": lambda: background(video=videos),
        },
        reps,
    )
    print(
        f"   video_background_consistency {t['reward'] * 1e3:7.1f} ms   encode_images alone {t['encode'] * 1e3:8.1f} ms"
        f"   ratio {r['reward']:.2f}"
    )
    figures.append(
        figure(
            "video.rewards.background_consistency",
            "`video_background_consistency` (full-size "
            "random-init CLIP ViT-B/32) vs the backbone's own `encode_images` on the same frames; "
            f"{work}, median of {reps} interleaved repetitions",
            measure("video_background_consistency", t["reward"] * 1e3, "ms"),
            baseline=measure("encode_images alone", t["encode"] * 1e3, "ms"),
            ratio=r["reward"],
            ratio_label="reward / baseline",
            rewards=["video_background_consistency"],
        )
    )

    # a composite: the loader builds its inner clip_score (same weights) and hands it over
    vclip = load_reward({"name": "video_clip_score", "model_path": str(clip_dir), "device": "cpu"}, num_frames=None)
    image = ClipScore(str(clip_dir))
    flat = torch.cat(videos)
    flat_prompts = [p for p in prompts for _ in range(4)]
    t, r = interleaved(
        {"image": lambda: image(image=flat, prompt=flat_prompts), "video": lambda: vclip(video=videos, prompt=prompts)},
        reps,
    )
    print(
        f"   video_clip_score            {t['video'] * 1e3:8.1f} ms   clip_score on the 8 frames {t['image'] * 1e3:7.1f} ms"
        f"   ratio {r['video']:.2f}"
    )
    figures.append(
        figure(
            "video.rewards.clip_score",
            "`video_clip_score` (full-size random-init CLIP ViT-B/32) vs "
            "`clip_score` on the same 8 frames as images with the prompt repeated; "
            f"{work}, median of {reps} interleaved repetitions",
            measure("video_clip_score", t["video"] * 1e3, "ms"),
            baseline=measure("clip_score on the frames", t["image"] * 1e3, "ms"),
            ratio=r["video"],
            ratio_label="reward / baseline",
            rewards=["video_clip_score"],
        )
    )
    return figures


if __name__ == "__main__":
    main()
