"""av_sync benchmark: rewardzoo's reward against av-benchmark's own Synchformer code at real size (random weights).

The reference is ``hkchengrex/av-benchmark`` (commit 050a5cd, MMAudio's evaluation), not on PyPI: pass its
checkout with ``--reference DIR``. Its ``av_bench/synchformer`` package needs ``omegaconf`` and a transformers 4.x
(its AST copy imports ``find_pruneable_heads_and_indices``, gone in transformers 5): put them on ``--extra DIR``
(e.g. ``pip install --target DIR omegaconf transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.26.5
--no-deps``). Its ``extract.py`` / ``extract_video.py`` import ImageBind, PaSST, LAION-CLAP and MS-CLAP at module
level, so the baseline runs the reference's preprocessing steps as those files write them (``v2.Compose`` of
``video_dataset.py`` 51-57; segments, mel, log, pad, normalise of ``extract.py`` 23-37; ``evaluate.py`` 176-191)
around the reference's own ``Synchformer`` (``extract_vfeats``, ``extract_afeats``, ``compare_v_a``), eager (its
extractor wraps the video encoder in ``torch.compile``; not here).

Both sides load one random state dict at the real size (237 M parameters). Also reported: the largest difference
between the two networks' video features, audio features and logits on the same inputs. Workload: one clip of
4.8 s (14 segments, one window twice), 120 frames 240x320 uint8, 16 kHz mono audio; CPU, one run.
Run: ``flock /tmp/rewardzoo-heavy.lock python benchmarks/bench_av_sync.py --reference DIR --extra DIR``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SECONDS, FRAMES, HEIGHT, WIDTH = 4.8, 120, 240, 320


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="a checkout of hkchengrex/av-benchmark")
    parser.add_argument("--extra", default=None, help="a folder with omegaconf and transformers 4.x")
    args = parser.parse_args()
    if args.extra:
        sys.path.insert(0, args.extra)
    sys.path.insert(0, args.reference)
    import torch
    import torchaudio
    from av_bench.synchformer.synchformer import Synchformer as Reference
    from av_bench.synchformer.synchformer import make_class_grid
    from torchvision.transforms import v2

    from rewardzoo.rewards.models.synchformer import WEIGHTS_FILE
    from rewardzoo.rewards.video.av_sync import AVSync

    torch.manual_seed(0)
    ref = Reference().eval()
    g = torch.Generator().manual_seed(1)
    state = {
        k: torch.randn(v.shape, generator=g) * 0.05 + (1.0 if "norm" in k and k.endswith("weight") else 0.0)
        for k, v in ref.state_dict().items()
    }
    ref.load_state_dict(state)
    video = torch.randint(0, 256, (FRAMES, 3, HEIGHT, WIDTH), dtype=torch.uint8, generator=g)
    wave = 0.1 * torch.randn(int(16000 * SECONDS), generator=g)
    transform = v2.Compose(
        [
            v2.Resize(224, interpolation=v2.InterpolationMode.BICUBIC),
            v2.CenterCrop(224),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5]),
        ]
    )
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=16000, win_length=400, hop_length=160, n_fft=1024, n_mels=128
    )
    grid = make_class_grid(-2, 2, 21)

    def reference() -> tuple[float, torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.inference_mode():
            x = transform(video)[None]
            n = (x.shape[1] - 16) // 8 + 1
            x = torch.stack([x[:, i * 8 : i * 8 + 16] for i in range(n)], dim=1)
            v = ref.extract_vfeats(x.flatten(0, 1)[:, None]).view(1, n, 8, -1)
            s = wave[None]
            m = (s.shape[1] - 10240) // 5120 + 1
            s = torch.stack([s[:, i * 5120 : i * 5120 + 10240] for i in range(m)], dim=1)
            s = torch.log(mel(s) + 1e-6)
            s = torch.nn.functional.pad(s, (0, 66 - s.shape[-1]))
            s = (s - -4.2677393) / (2 * 4.5689974)
            a = ref.extract_afeats(s.unsqueeze(2))
            scores = []
            for window in (slice(0, 14), slice(-14, None)):
                logits = ref.compare_v_a(v[:, window], a[:, window])
                scores.append(abs(grid[logits.argmax(-1)[0]].item()))
            return float(np.mean(scores)), v, a, logits

    with tempfile.TemporaryDirectory() as tmp:
        torch.save(state, Path(tmp) / WEIGHTS_FILE)
        ours = AVSync(tmp, duration=SECONDS)
    net = ours.model

    def rewardzoo() -> float:
        out = ours(video=[video], audio=[wave[None].numpy()], audio_sample_rate=[16000])
        return float(out.extras["desync"][0])

    start = time.perf_counter()
    want, v, a, logits = reference()
    base = time.perf_counter() - start
    start = time.perf_counter()
    got = rewardzoo()
    mine = time.perf_counter() - start
    with torch.inference_mode():
        x = transform(video)[:16][None]
        s = torch.log(mel(wave[:10240]) + 1e-6)
        s = (torch.nn.functional.pad(s, (0, 1)) - -4.2677393) / (2 * 4.5689974)
        d_video = (net.video_features(x) - ref.extract_vfeats(x[:, None])[0]).abs().max().item()
        d_audio = (net.audio_features(s[None]) - ref.extract_afeats(s[None, None, None])[0]).abs().max().item()
        d_logits = (net.offset_logits(v[:, -14:], a[:, -14:]) - logits).abs().max().item()
    print(f"DeSync reference {want:.3f} rewardzoo {got:.3f}; reference {base:.1f} s, rewardzoo {mine:.1f} s")
    print(f"max |difference|: video features {d_video:.2e}, audio features {d_audio:.2e}, logits {d_logits:.2e}")
    workload = (
        f"one clip of {SECONDS:g} s ({FRAMES} frames {HEIGHT}x{WIDTH} uint8, 16 kHz mono), real-size Synchformer "
        f"with random weights, CPU ({torch.get_num_threads()} threads), one run"
    )
    figs = [
        figure(
            "av_sync.reference_call",
            f"`av_sync` vs av-benchmark 050a5cd's Synchformer (eager) and its preprocessing steps; {workload}",
            measure("rewardzoo", 1.0 / mine, "clips/s"),
            baseline=measure("av-benchmark", 1.0 / base, "clips/s"),
            ratio=base / mine,
            ratio_label="x the speed of av-benchmark's steps",
            rewards=["av_sync"],
        ),
        figure(
            "av_sync.agreement",
            f"`av_sync` vs av-benchmark's Synchformer: max |difference| of video features, audio features and "
            f"logits (DeSync {got:.2f} vs {want:.2f}); {workload}",
            measure("difference", max(d_video, d_audio, d_logits), ""),
            rewards=["av_sync"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
