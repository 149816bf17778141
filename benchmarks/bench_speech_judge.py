"""speech_judge benchmark: rewardzoo's prompt, processor call and parse against SpeechJudge's own, on a tiny model.

The reference is ``AmphionTeam/SpeechJudge`` (commit 1fbd1c8), not on PyPI: pass its ``infer/`` folder with
``--reference DIR``; its ``build_qwen_omni_inputs`` needs ``qwen_omni_utils`` (PyPI ``qwen-omni-utils``; put it on
``--extra DIR``). Baseline: the reference's own ``build_cot_conversation`` + ``build_qwen_omni_inputs`` (chat
template, ``process_mm_info`` reading the two WAV files at 16 kHz, the processor) + ``extract_rating`` on a canned
judgement. Contestant: the reward's ``conversation`` + ``LocalOmni.inputs`` (clips read and resampled by
``prepare_clips``) + ``parse_rating``. Generation is left out: it is the same ``model.generate`` on both sides
and, with a random tiny model, its length is noise (the reference's eos id 151645 is not in the tiny vocabulary).
Also reported: whether both sides build identical model inputs.

Workload: 8 pairs of 3 s, 16 kHz PCM WAV clips, tiny random Qwen2.5-Omni thinker and processor, CPU, one run.
Run: ``python benchmarks/bench_speech_judge.py --reference DIR/infer --extra DIR``.
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
PAIRS, SECONDS, RATE = 8, 3.0, 16000
JUDGEMENT = "Prosody is fine. **Output A: 7**, Output B: 5."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="SpeechJudge's infer/ folder")
    parser.add_argument("--extra", default=None, help="a folder with qwen_omni_utils")
    args = parser.parse_args()
    if args.extra:
        sys.path.insert(0, args.extra)
    sys.path.insert(0, args.reference)
    import soundfile as sf
    import torch
    from utils import build_cot_conversation, build_qwen_omni_inputs, extract_rating  # SpeechJudge's infer/utils.py

    from rewardzoo.rewards.audio.speech_judge import SpeechJudge, conversation, parse_rating
    from rewardzoo.shared.audio import prepare_clips
    from rewardzoo.testing import tiny_omni_dir

    g = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = tiny_omni_dir(Path(tmp) / "omni", seed=0)
        paths = []
        for i in range(2 * PAIRS):
            path = Path(tmp) / f"clip{i}.wav"
            sf.write(path, (0.1 * g.standard_normal(int(RATE * SECONDS))).astype(np.float32), RATE, subtype="PCM_16")
            paths.append(str(path))
        pairs = [(paths[2 * i], paths[2 * i + 1]) for i in range(PAIRS)]
        reward = SpeechJudge(str(model_dir), on_failure={"substitute": 0.0})
        processor = reward.backend.processor

        def reference() -> list:
            out = []
            for a, b in pairs:
                inputs = build_qwen_omni_inputs(processor, build_cot_conversation("hello world", a, b))
                out.append((inputs, extract_rating(JUDGEMENT)[0]))
            return out

        def rewardzoo() -> list:
            out = []
            for a, b in pairs:
                (ca, cb), _ = prepare_clips([a, b], None, target_rate=RATE, mono=True)
                inputs = reward.backend.inputs(conversation("hello world", ca.reshape(-1), cb.reshape(-1)))
                out.append((inputs, parse_rating(JUDGEMENT)))
            return out

        reference()  # warm both paths once (first imports, the processor's caches)
        rewardzoo()
        start = time.perf_counter()
        want = reference()
        base = time.perf_counter() - start
        start = time.perf_counter()
        got = rewardzoo()
        mine = time.perf_counter() - start
    same = all(sorted(w) == sorted(o) and all(torch.equal(w[k], o[k]) for k in w) for (w, _), (o, _) in zip(want, got))
    same_parse = all(float(w["output_a"]) == o[0] and float(w["output_b"]) == o[1] for (_, w), (_, o) in zip(want, got))
    print(
        f"SpeechJudge {base:.3f} s | rewardzoo {mine:.3f} s | {base / mine:.2f}x; inputs identical: {same}, parse: {same_parse}"
    )
    workload = f"{PAIRS} pairs of {SECONDS:g} s 16 kHz WAV clips, tiny random Qwen2.5-Omni processor, CPU, one run"
    figs = [
        figure(
            "speech_judge.reference_inputs",
            "`speech_judge`'s prompt, processor call and parse vs SpeechJudge 1fbd1c8's `build_cot_conversation`, "
            f"`build_qwen_omni_inputs` (qwen_omni_utils) and `extract_rating` (generation left out); {workload}",
            measure("rewardzoo", PAIRS / mine, "pairs/s"),
            baseline=measure("SpeechJudge", PAIRS / base, "pairs/s"),
            ratio=base / mine,
            ratio_label="x the speed of SpeechJudge's steps",
            rewards=["speech_judge"],
        ),
        figure(
            "speech_judge.agreement",
            f"`speech_judge` vs SpeechJudge's steps: pairs whose model inputs and parsed rating differ; {workload}",
            measure("pairs differing", 0.0 if (same and same_parse) else float(PAIRS), ""),
            rewards=["speech_judge"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
