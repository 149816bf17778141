"""Video flagships at their real size (cases for ``scripts/scale_check.py``; interface in ``common.py``).

The sample is one generated 720p clip (:func:`video_file`: 1280x720, 5 s at 30 fps, H.264, 150 frames = 415 MB as
8-bit RGB once decoded), given as its path, as a trainer hands a generator's output over. The VBench rewards run
their real-sized backbones: DINO ViT-B/16 (subject consistency), CLIP ViT-B/32 (background consistency), RAFT
large (dynamic degree), MUSIQ (imaging quality), CLIP ViT-L/14 + the LAION head (aesthetic); temporal flickering
has no model. ``imagebind_score`` runs ImageBind huge on the clip and its 5 s soundtrack.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scale.common import SCRATCH, Case

PROMPT = "a red ball rolling across a sunny city street while cars pass by, cinematic, 4k"
VIDEO_IMPORTS = ("torch", "av", "numpy")
WIDTH, HEIGHT, FPS, SECONDS = 1280, 720, 30, 5


def _atomic(path: Path, write) -> Path:
    """Write ``path`` once (``write(tmp)``), atomically; reuse it when present."""
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}{path.suffix}")
    write(tmp)
    tmp.replace(path)
    return path


def _frame(t: int, rng: Any) -> Any:
    """Frame ``t`` of the clip: a gradient sky and street, a ball moving across, a block of cars sliding the other way,
    and sensor noise (so optical flow, consistency and flicker all have something to measure)."""
    import numpy as np

    y = np.linspace(0.0, 1.0, HEIGHT, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, WIDTH, dtype=np.float32)[None, :]
    img = np.empty((HEIGHT, WIDTH, 3), np.float32)
    img[..., 0] = 90 + 120 * y + 20 * x
    img[..., 1] = 140 + 60 * y - 30 * x
    img[..., 2] = 230 - 150 * y
    cx, cy, r = 100 + 7 * t, 450 + 40 * np.sin(t / 8), 60
    ball = (x * WIDTH - cx) ** 2 + (y * HEIGHT - cy) ** 2 < r * r
    img[ball] = (220, 30, 30)
    car = int(1100 - 5 * t)
    img[560:640, max(car, 0) : max(car + 200, 0)] = (40, 40, 160)
    img += rng.normal(0, 4, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def video_file(frames: int = FPS * SECONDS) -> Path:
    """The 720p clip of ``frames`` frames (default 5 s; cached under the scratch folder)."""

    def write(tmp: Path) -> None:
        import av
        import numpy as np

        rng = np.random.default_rng(0)
        with av.open(str(tmp), "w") as out:
            stream = out.add_stream("libx264", rate=FPS)
            stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            stream.options = {"crf": "18", "preset": "veryfast"}
            for t in range(frames):
                for packet in stream.encode(av.VideoFrame.from_ndarray(_frame(t, rng), format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)

    length = f"{SECONDS}s" if frames == FPS * SECONDS else f"{frames}frames"
    return _atomic(SCRATCH / "media" / f"clip_{WIDTH}x{HEIGHT}_{length}_{FPS}fps.mp4", write)


def audio_file(seconds: float, rate: int = 48000, channels: int = 2) -> Path:
    """A generated stereo clip (``seconds`` at ``rate``, 16-bit WAV): voiced harmonics with a syllable-rate envelope,
    a drifting pitch, and noise: speech-like enough for speech and sound models, at the size a generator writes."""

    def write(tmp: Path) -> None:
        import numpy as np
        import soundfile as sf

        rng = np.random.default_rng(1)
        n = int(seconds * rate)
        t = np.arange(n) / rate
        f0 = 140 + 30 * np.sin(2 * np.pi * 0.3 * t)
        phase = 2 * np.pi * np.cumsum(f0) / rate
        voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
        envelope = 0.5 * (1 + np.sin(2 * np.pi * 4.0 * t)) * (np.sin(2 * np.pi * 0.25 * t) > -0.6)
        mono = 0.25 * voiced * envelope + 0.01 * rng.standard_normal(n)
        stereo = np.stack([mono, np.roll(mono, 37)], axis=1)[:, :channels]
        sf.write(str(tmp), stereo.astype(np.float32), rate, subtype="PCM_16", format="WAV")

    name = f"audio_{seconds:g}s_{rate}hz_{channels}ch.wav"
    return _atomic(SCRATCH / "media" / name, write)


def video_sample() -> dict[str, Any]:
    return {"video": str(video_file()), "prompt": PROMPT}


# ------------------------------------------------------------------------------------------------ imagebind
def build_imagebind(folder: Path) -> None:
    """ImageBind huge (random init, float32) saved as Meta publishes it: ``imagebind_huge.pth``, a
    ``torch.save`` of the state dict."""
    import torch

    from rewardzoo.rewards.video.imagebind import imagebind_modules

    ib, _ = imagebind_modules()
    torch.manual_seed(0)
    model = ib.imagebind_huge(pretrained=False)
    torch.save(model.state_dict(), folder / "imagebind_huge.pth")


def reference_imagebind(folder: Path) -> Any:
    """What ``imagebind_huge(pretrained=True)`` does once the file is downloaded: build, then
    ``load_state_dict(torch.load(path))``."""
    import torch

    from rewardzoo.rewards.video.imagebind import imagebind_modules

    ib, _ = imagebind_modules()
    model = ib.imagebind_huge(pretrained=False)
    model.load_state_dict(torch.load(folder / "imagebind_huge.pth", map_location="cpu", weights_only=True))
    return model.eval()


def imagebind_samples() -> list[dict[str, Any]]:
    return [{**video_sample(), "audio": str(audio_file(SECONDS))}]


# ------------------------------------------------------------------------------------------------ VBench backbones
def build_dino(folder: Path) -> None:
    """DINO ViT-B/16 as facebook/dino-vitb16 (``ViTModel`` without pooler, its config), ``save_pretrained``."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224,
        patch_size=16, qkv_bias=True, layer_norm_eps=1e-12,
    )  # fmt: skip
    ViTModel(config, add_pooling_layer=False).save_pretrained(folder)


def reference_dino(folder: Path) -> Any:
    from transformers import ViTModel

    return ViTModel.from_pretrained(folder, add_pooling_layer=False).eval()


def build_open_clip(folder: Path, arch: str) -> None:
    from scale.image import _open_clip_dir

    _open_clip_dir(folder, arch)


def reference_open_clip(folder: Path, arch: str) -> Any:
    import open_clip

    model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=str(folder / "open_clip_model.safetensors"))
    return model.eval()


RAFT_FILE = "raft_large_C_T_V1.pth"
RAFT_WAKE_FRAMES = 5  # frames 0 and 4 at 30 fps: one RAFT pair


def build_raft(folder: Path) -> None:
    """torchvision's RAFT large (random init), ``torch.save(model.state_dict())`` as the card asks."""
    import torch
    from torchvision.models.optical_flow import raft_large

    torch.manual_seed(0)
    torch.save(raft_large(weights=None).state_dict(), folder / RAFT_FILE)


def reference_raft(folder: Path) -> Any:
    import torch
    from torchvision.models.optical_flow import raft_large

    model = raft_large(weights=None)
    model.load_state_dict(torch.load(folder / RAFT_FILE, map_location="cpu", weights_only=True))
    return model.eval()


MUSIQ_FILE = "musiq_spaq_ckpt-358bb6af.pth"


def build_musiq(folder: Path) -> None:
    """pyiqa's MUSIQ (its defaults, the published checkpoints' architecture), random init, ``torch.save``d with
    pyiqa's key names (its release files hold ``{'params': state}``? no: the plain state dict it loads)."""
    import torch
    from pyiqa.archs.musiq_arch import MUSIQ

    torch.manual_seed(0)
    torch.save(MUSIQ(pretrained=False).state_dict(), folder / MUSIQ_FILE)


def reference_musiq(folder: Path) -> Any:
    """pyiqa's own loader: ``MUSIQ(pretrained_model_path=...)`` (its ``load_pretrained_network``)."""
    from pyiqa.archs.musiq_arch import MUSIQ

    return MUSIQ(pretrained_model_path=str(folder / MUSIQ_FILE)).eval()


HEAD_FILE = "sac+logos+ava1-l14-linearMSE.pth"


def build_aesthetic(folder: Path) -> None:
    """CLIP ViT-L/14 (open_clip hub layout) + the LAION aesthetic v2 MLP head (``.pth`` state dict)."""
    from rewardzoo.testing.aesthetic import aesthetic_head_file

    build_open_clip(folder / "clip", "ViT-L-14")
    aesthetic_head_file(folder / HEAD_FILE, input_size=768)


def reference_aesthetic(folder: Path) -> Any:
    """open_clip's loader for the backbone + the reference MLP class with ``torch.load`` for the head."""
    import torch

    from rewardzoo.testing.aesthetic import reference_aesthetic_head

    clip = reference_open_clip(folder / "clip", "ViT-L-14")
    head = reference_aesthetic_head(input_size=768)
    head.load_state_dict(torch.load(folder / HEAD_FILE, map_location="cpu", weights_only=True))
    return (clip, head.eval())


def raft_working_set(proc: Any, reward: Any, samples: list[dict[str, Any]]) -> Any:
    """RAFT on ONE pair of the clip's sampled frames (0 and the stride's next), as the reward runs each pair: the two
    decoded 8-bit frames (allocated before) through ``pair_scores``."""
    import av
    import numpy as np
    import torch

    from rewardzoo.rewards.video.dynamic_degree import frame_stride

    stride = frame_stride(FPS)
    with av.open(samples[0]["video"]) as container:
        frames = [f.to_ndarray(format="rgb24") for _, f in zip(range(stride + 1), container.decode(video=0))]
    pair = torch.from_numpy(np.stack([frames[0], frames[stride]])).permute(0, 3, 1, 2).contiguous()

    def step() -> None:
        with torch.inference_mode():
            reward.pair_scores(pair)

    return step


def _nothing(folder: Path) -> None:
    return None


_720P = "sample: 1280x720, 5 s, 30 fps H.264 clip (150 frames, 415 MB decoded as 8-bit RGB), given as its path"

CASES = [
    Case(
        name="imagebind_score",
        reward="imagebind_score",
        build=build_imagebind,
        entry=lambda folder: {"model_path": str(folder / "imagebind_huge.pth"), "kwargs": {"mode": "all"}},
        reference=reference_imagebind,
        samples=imagebind_samples,
        imports=(*VIDEO_IMPORTS, "torchaudio", "timm"),
        layout="imagebind_huge.pth: torch.save of ImageBindModel's state dict (Meta's download)",
        notes=_720P + " and its 5 s 48 kHz stereo soundtrack; mode all",
    ),
    Case(
        name="video_subject_consistency",
        reward="video_subject_consistency",
        build=build_dino,
        entry=lambda folder: {"model_path": str(folder)},
        reference=reference_dino,
        samples=lambda: [video_sample()],
        imports=(*VIDEO_IMPORTS, "transformers"),
        layout="transformers save_pretrained: config.json + model.safetensors (facebook/dino-vitb16's config)",
        notes=_720P + "; card defaults (16 frames)",
    ),
    Case(
        name="video_background_consistency",
        reward="video_background_consistency",
        build=lambda folder: build_open_clip(folder, "ViT-B-32"),
        entry=lambda folder: {"model_path": str(folder)},
        reference=lambda folder: reference_open_clip(folder, "ViT-B-32"),
        samples=lambda: [video_sample()],
        imports=(*VIDEO_IMPORTS, "open_clip"),
        layout="open_clip hub directory: open_clip_config.json + open_clip_model.safetensors (ViT-B-32)",
        notes=_720P + "; card defaults (16 frames)",
    ),
    Case(
        name="video_dynamic_degree",
        reward="video_dynamic_degree",
        build=build_raft,
        entry=lambda folder: {"model_path": str(folder / RAFT_FILE), "kwargs": {"arch": "large", "fps": FPS}},
        reference=reference_raft,
        samples=lambda: [{"video": str(video_file(FPS)), "prompt": PROMPT}],
        calls=1,
        warmup=lambda: [{"video": str(video_file(RAFT_WAKE_FRAMES)), "prompt": PROMPT}],
        offload_samples=lambda: [{"video": str(video_file(RAFT_WAKE_FRAMES)), "prompt": PROMPT}],
        media_bytes=FPS * WIDTH * HEIGHT * 3,
        working_set=raft_working_set,
        imports=(*VIDEO_IMPORTS, "torchvision"),
        layout="torch.save of torchvision raft_large's state dict (.pth), as the card asks",
        notes="sample: a 1 s 1280x720 30 fps H.264 clip (30 frames, 83 MB decoded as 8-bit RGB), given as its path; "
        "RAFT large, 20 iterations, every 4th frame (8 frames, 7 pairs); one timed call after a warm-up on a "
        f"{RAFT_WAKE_FRAMES}-frame clip; the working set: RAFT on one pair; drop / cpu score the "
        f"{RAFT_WAKE_FRAMES}-frame clip (one pair) before and after the wake. The 5 s clip of the other video "
        "rows (37 pairs) is not run: a 720p pair takes 27-42 s on the 2 shared cores (about 20 min a call)",
    ),
    Case(
        name="video_imaging_quality",
        reward="video_imaging_quality",
        build=build_musiq,
        entry=lambda folder: {"model_path": str(folder / MUSIQ_FILE)},
        reference=reference_musiq,
        samples=lambda: [video_sample()],
        imports=(*VIDEO_IMPORTS, "pyiqa"),
        layout=f"{MUSIQ_FILE}: torch.save of pyiqa MUSIQ's state dict (pyiqa's release file name)",
        notes=_720P + "; card defaults (8 frames, resize longer)",
    ),
    Case(
        name="video_aesthetic",
        reward="video_aesthetic",
        build=build_aesthetic,
        entry=lambda folder: {
            "model_path": str(folder / HEAD_FILE),
            "kwargs": {"clip_model": str(folder / "clip"), "clip_pretrained": None},
        },
        reference=reference_aesthetic,
        samples=lambda: [video_sample()],
        imports=(*VIDEO_IMPORTS, "open_clip"),
        layout="open_clip hub directory of ViT-L-14 + the v2 head sac+logos+ava1-l14-linearMSE.pth (state dict)",
        notes=_720P + "; card defaults (8 frames)",
    ),
    Case(
        name="video_temporal_flickering",
        reward="video_temporal_flickering",
        build=_nothing,
        entry=lambda folder: {},
        reference=None,
        samples=lambda: [video_sample()],
        media_bytes=FPS * SECONDS * WIDTH * HEIGHT * 3,
        imports=VIDEO_IMPORTS,
        layout="no model",
        notes=_720P + "; every frame (VBench)",
    ),
]
