"""song_eval benchmark: rewardzoo's reward against SongEval's own scoring steps on the same tiny MuQ and head.

The reference is ``ASLP-lab/SongEval`` (commit f811311), not on PyPI: pass its checkout with ``--reference DIR``.
Its ``eval.py`` imports hydra and omegaconf to build the head from ``config.yaml``; the baseline builds the same
``model.Generator`` (imported from the checkout, unmodified) with the keyword arguments of the tiny head's
``config.yaml`` and runs ``Synthesizer.handle``'s steps: ``librosa.load(path, sr=24000)``, ``muq(audio,
output_hidden_states=True)["hidden_states"][6]`` (MuQ's own forward, which needs transformers 4: put one on
``--extra DIR``, e.g. ``pip install --target DIR transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.26.5
--no-deps``), ``model(input)``, one song at a time. Contestant: ``song_eval`` called on the decoded songs (mixed
down and resampled by the reward; MuQ's modules with a hook on layer 6).

Workload: 4 songs of 10 s, stereo 44.1 kHz WAV; tiny random MuQ (6 layers, 32 wide) and head; CPU; one run.
Run: ``python benchmarks/bench_song_eval.py --reference DIR --extra DIR`` (needs ``muq``).
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
SONGS, SECONDS, RATE = 4, 10.0, 44100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="a checkout of ASLP-lab/SongEval")
    parser.add_argument("--extra", default=None, help="a folder with transformers 4.x (MuQ's own forward)")
    args = parser.parse_args()
    if args.extra:
        sys.path.insert(0, args.extra)
    sys.path.insert(0, args.reference)
    import librosa
    import soundfile as sf
    import torch
    import yaml
    from model import Generator  # SongEval's model.py

    from rewardzoo.rewards.audio.song_eval import DIMENSIONS, SongEval, build_muq
    from rewardzoo.shared.weights import load_state_dict
    from rewardzoo.testing import tiny_muq_dir, tiny_songeval_dir

    g = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        head_dir, muq_dir = tiny_songeval_dir(Path(tmp) / "head", seed=1), tiny_muq_dir(Path(tmp) / "muq", seed=2)
        t = np.arange(int(RATE * SECONDS)) / RATE
        paths, songs = [], []
        for i in range(SONGS):
            stereo = np.stack([0.3 * np.sin(2 * np.pi * (220 + 55 * i) * t), 0.05 * g.standard_normal(t.size)])
            path = Path(tmp) / f"song{i}.wav"
            sf.write(path, stereo.T.astype(np.float32), RATE, subtype="FLOAT")
            paths.append(path)
            songs.append(stereo.astype(np.float32))
        config = yaml.safe_load((head_dir / "config.yaml").read_text())["generator"]
        config.pop("_target_")
        ref_head = Generator(**config).eval()
        ref_head.load_state_dict(load_state_dict(head_dir / "ckpt" / "model.safetensors"), strict=False)
        muq = build_muq(str(muq_dir))
        reward = SongEval(str(head_dir), muq_path=str(muq_dir))

        def reference() -> np.ndarray:
            rows = []
            with torch.no_grad():
                for path in paths:
                    wav, _ = librosa.load(str(path), sr=24000)
                    audio = torch.tensor(wav).unsqueeze(0)
                    features = muq(audio, output_hidden_states=True)["hidden_states"][6]
                    rows.append(ref_head(features).squeeze(0).numpy())
            return np.stack(rows)

        def rewardzoo() -> np.ndarray:
            out = reward(audio=songs, audio_sample_rate=[RATE] * SONGS)
            return np.stack([out.extras[d] for d in DIMENSIONS], axis=1)

        start = time.perf_counter()
        want = reference()
        base = time.perf_counter() - start
        start = time.perf_counter()
        got = rewardzoo()
        mine = time.perf_counter() - start
    diff = float(np.max(np.abs(got - want)))
    print(f"SongEval {base:.2f} s | rewardzoo {mine:.2f} s | {base / mine:.2f}x; max |difference| {diff:.2e}")
    workload = (
        f"{SONGS} songs of {SECONDS:g} s (stereo {RATE / 1000:g} kHz WAV), tiny random MuQ and head, CPU "
        f"({torch.get_num_threads()} threads), one run"
    )
    figs = [
        figure(
            "song_eval.reference_call",
            f"`song_eval` vs SongEval f811311's scoring steps (its `model.Generator`, MuQ's own forward under "
            f"transformers 4.46.3, `librosa.load`); {workload}",
            measure("rewardzoo", SONGS / mine, "songs/s"),
            baseline=measure("SongEval", SONGS / base, "songs/s"),
            ratio=base / mine,
            ratio_label="x the speed of SongEval's steps",
            rewards=["song_eval"],
        ),
        figure(
            "song_eval.agreement",
            f"`song_eval` vs SongEval's steps: max |difference| over the five scores; {workload}",
            measure("difference", diff, ""),
            rewards=["song_eval"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
