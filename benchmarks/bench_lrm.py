"""lrm against LPO's own latent reward model code, on tiny SD1.5- and SDXL-shaped checkpoints.

The reference is ``Kwai-Kolors/LPO`` (commit 9c2e8b8), not on PyPI: pass its checkout with ``--reference DIR``. Its
``lpo/lpo/preference_models/models/`` (``SD15PreferenceModel``, ``SDXLBasePreferenceModel`` and their modified UNet)
is imported from there unmodified, as a package of its own (the folder's parent package imports mmengine, which
the scorer does not need). The reference model is built as ``preference_model_fns.py`` builds it (config with
``ft_model_path``, ``.eval()``, ``requires_grad_(False)``), but in float32 on the CPU (LPO casts to float16 on its
GPU), and called as LPO's sampler calls it: ``encode_prompt`` then ``get_preference_score(latents, ids, timesteps)``
on the whole batch. rewardzoo's ``lrm`` encodes the call's distinct prompts (and the empty prompt) once and runs the
UNet's down and mid blocks only.

- ``tiny``: 8 latents 4x16x16 (4 prompts, each twice) at timestep 1, tiny random-init checkpoints
  (``rewardzoo.testing.tiny_lrm_dir``) with the base pipeline the reference's constructor reads (a tiny VAE and
  the UNet added), float32, 1 torch thread, interleaved medians; the largest score difference is reported.

Without ``--reference`` the reference rows are skipped (rewardzoo's time alone is recorded, with a note).

Run: ``python benchmarks/bench_lrm.py --reference DIR [--quick]``. Ratios > 1 favour rewardzoo.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved, quiet_transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

N = 8


def reference_models(checkout: Path) -> types.ModuleType:
    """The reference's ``preference_models/models`` folder as a package (its files imported unmodified)."""
    folder = checkout / "lpo" / "lpo" / "preference_models" / "models"
    if not (folder / "sd15_preference_model.py").is_file():
        raise SystemExit(f"{checkout} is not a checkout of Kwai-Kolors/LPO (no {folder})")
    pkg = types.ModuleType("lpo_reference_models")
    pkg.__path__ = [str(folder)]
    sys.modules["lpo_reference_models"] = pkg
    return pkg


def reference_base(base: Path, ckpt: Path, root: Path) -> Path:
    """``base`` plus what the reference's constructor also reads: ``vae/`` (tiny, 4 blocks: the factor 8),
    ``unet/`` (the checkpoint's), and OpenAI CLIP's ``text_projection.weight`` file (sd15 59-60)."""
    import torch
    from diffusers import AutoencoderKL

    out = root / f"ref-{base.name}"
    shutil.copytree(base, out)
    shutil.copytree(ckpt / "unet", out / "unet")
    AutoencoderKL(
        block_out_channels=(8, 8, 8, 8),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=4,
        layers_per_block=1,
    ).save_pretrained(out / "vae")
    torch.save({"text_projection.weight": torch.zeros(10, 16)}, out / "clip.bin")  # replaced by the checkpoint's
    return out


def bench_tiny(root: Path, repeats: int, checkout: Path | None, xl: bool) -> dict:
    import numpy as np
    import torch

    import rewardzoo
    from rewardzoo.testing.latent import tiny_lrm_dir, tiny_sd_dir

    name = "sdxl" if xl else "sd15"
    base = tiny_sd_dir(root / f"base-{name}", xl=xl, seed=0)
    ckpt = tiny_lrm_dir(root / f"lrm-{name}", base, xl=xl, seed=1)
    reward = rewardzoo.load_reward(
        {"name": "lrm", "model_path": str(ckpt), "dtype": "float32", "kwargs": {"base_model_path": str(base)}}
    )
    g = torch.Generator().manual_seed(0)
    latents = [torch.randn(4, 16, 16, generator=g) for _ in range(N)]
    prompts = [f"a {c} cat sitting on the wooden floor" for c in ("red", "blue", "green", "dog")] * 2

    def ours():
        return reward(prompt=prompts, latent=latents).rewards

    what = (
        f"`lrm` ({name}) on {N} latents 4x16x16 (4 prompts, each twice), timestep 1, tiny random-init checkpoint, "
        "CPU, float32, 1 torch thread"
    )
    if checkout is None:
        times, _ = interleaved({"rewardzoo": ours}, repeats)
        print(f"tiny {name}: rewardzoo {times['rewardzoo'] * 1e3:.1f} ms (reference skipped: no --reference)")
        return figure(
            f"lrm.tiny.{name}",
            f"{what}: one call, median of {repeats} runs",
            measure("rewardzoo", times["rewardzoo"] * 1e3, "ms"),
            rewards=["lrm"],
            notes="reference row skipped: no --reference checkout of Kwai-Kolors/LPO given",
        )
    from accelerate import PartialState

    PartialState(cpu=True)  # the reference logs through accelerate's logger, which wants its state (as in LPO)
    reference_models(checkout)
    ref_base = reference_base(base, ckpt, root)
    # ft_model_path None: the constructor skips load(); its multi-scale visual_projection is hard-coded to the real
    # widths (sd15 51-52: 4800, sdxl 58-59: 3520), so the instance gets one of the tiny width, then loads the
    # checkpoint with its own load() (sd15 200-212, sdxl 261-279)
    if xl:
        mod = importlib.import_module("lpo_reference_models.sdxl_base_preference_model")
        cfg = mod.SDXLBasePreferenceModelConfig(
            pretrained_model_name_or_path=str(ref_base),
            pretrained_vae_name_or_path=str(ref_base / "vae"),
            ft_model_path=None,
            projection_dim=12,
        )
        model = mod.SDXLBasePreferenceModel(cfg)
    else:
        mod = importlib.import_module("lpo_reference_models.sd15_preference_model")
        cfg = mod.SD15PreferenceModelConfig(
            pretrained_model_name_or_path=str(ref_base),
            clip_ckpt_path=str(ref_base / "clip.bin"),
            ft_model_path=None,
            text_embed_dim=16,
            projection_dim=10,
        )
        model = mod.SD15PreferenceModel(cfg)
    visual = torch.load(ckpt / "state_dict.pt", weights_only=True)["visual_projection"]["weight"]
    model.visual_projection = torch.nn.Linear(visual.shape[1], visual.shape[0], bias=False)
    model.load(str(ckpt))
    model = model.eval().requires_grad_(False)  # preference_model_fns.py 14-16 (float16 there)
    batch = torch.stack(latents)
    timesteps = torch.ones(N, dtype=torch.long)

    def reference():  # LPO's sampler: the batch's ids, then one get_preference_score call
        ids = model.encode_prompt(prompts)
        ids = ids if isinstance(ids, tuple) else (ids,)
        return model.get_preference_score(batch, *ids, timesteps)

    want = reference().numpy()
    diff = float(np.max(np.abs(want - ours().numpy())))
    print(f"tiny {name}: reference scores {np.round(want, 3).tolist()}")
    times, ratios = interleaved({"reference": reference, "rewardzoo": ours}, repeats)
    ratio = 1.0 / ratios["rewardzoo"]
    print(
        f"tiny {name}: reference {times['reference'] * 1e3:.1f} ms | rewardzoo {times['rewardzoo'] * 1e3:.1f} ms "
        f"| {ratio:.2f}x (max |score difference| {diff:.1e})"
    )
    return figure(
        f"lrm.tiny.{name}",
        f"{what}: one call (distinct prompts encoded once, down + mid blocks only) vs the reference's call "
        f"(encode_prompt + get_preference_score, its own code, the full batch), median of {repeats} interleaved runs "
        f"(median per-run ratio); max |score difference| {diff:.1e}",
        measure("rewardzoo", times["rewardzoo"] * 1e3, "ms"),
        baseline=measure("reference", times["reference"] * 1e3, "ms"),
        ratio=ratio,
        ratio_label="x faster",
        rewards=["lrm"],
        notes="a tiny model measures per-call overhead and prompt deduplication, not the UNet's cost; the "
        "reference in float32 here (float16 on LPO's GPU); a shared, noisy machine",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="a checkout of Kwai-Kolors/LPO (commit 9c2e8b8)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    import torch

    quiet_transformers()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        figs = [bench_tiny(Path(tmp), 3 if args.quick else 5, args.reference, xl) for xl in (False, True)]
    write_results(__file__, figs, parts=["lrm.tiny"])


if __name__ == "__main__":
    main()
