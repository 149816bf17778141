"""The tiny random-weight stand-ins for the downloads of the reward pages' Python examples.

:data:`STAND_INS` maps each downloading reward (all but ``remote``) to a function that writes its stand-in under a
shared folder and returns what the example's ``entry`` gets (``model_path``, ``kwargs`` merged into the entry's own)
and, for the two rewards whose published architecture is read from a module constant (utmos, audiobox_aesthetics),
the tiny architecture to patch in while the example runs (their own tests do the same). Each model is built once
per folder (:func:`_once`), so rewards that share a stand-in (the Qwen-VL judges, the open_clip rewards) pay for it
once per session. The builders are rewardzoo.testing's and the reward tests' own; scripts/build_docs.py's
``STAND_INS`` says on each page which stand-in runs (tests/docs/test_doc_examples.py checks both name the same
rewards). Imports only the core at module level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Swap:
    """What a stand-in changes in an example: entry keys, kwargs merged into the entry's, module constants."""

    model_path: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    patches: tuple[tuple[str, str, Callable[[], Any]], ...] = ()


_BUILT: dict[tuple[str, str], Any] = {}


def _once(root: Path, key: str, build: Callable[[Path], Any]) -> Any:
    """``build(root / key)`` the first time for this folder, its result after."""
    if (str(root), key) not in _BUILT:
        _BUILT[str(root), key] = build(root / key)
    return _BUILT[str(root), key]


# ------------------------------------------------------------------ shared models
def _open_clip(root: Path) -> str:
    from rewardzoo.testing import tiny_open_clip_dir

    return str(_once(root, "open_clip", lambda p: tiny_open_clip_dir(p, seed=0)))


def _hf_clip(root: Path) -> str:
    from rewardzoo.testing import tiny_hf_clip_dir

    return str(_once(root, "openai-tiny-clip", lambda p: tiny_hf_clip_dir(p, seed=1)))


def _vlm(root: Path, family: str) -> str:
    from rewardzoo.testing.vlm import tiny_vlm_dir

    return str(_once(root, family, lambda p: tiny_vlm_dir(p, family, seed=0)))


def _dino(root: Path) -> str:
    from rewardzoo.testing import tiny_dino_dirs

    return str(_once(root, "dino", lambda p: tiny_dino_dirs(p, seed=0))["vit"])


def _aesthetic_head(root: Path) -> str:
    from rewardzoo.testing import aesthetic_head_file

    return str(_once(root, "aesthetic", lambda p: aesthetic_head_file(p / "sac+logos+ava1-l14-linearMSE.pth", seed=7)))


#: the tiny MUSIQ of tests/image/test_image_imaging_quality.py (``kwargs.arch``)
MUSIQ_ARCH = {"hidden_size": 32, "mlp_dim": 64, "num_heads": 2, "num_layers": 2}


def _musiq(root: Path) -> str:
    def build(path: Path) -> str:
        import torch
        from pyiqa.archs.musiq_arch import MUSIQ

        torch.manual_seed(0)
        path.mkdir(parents=True)
        torch.save(MUSIQ(pretrained=False, num_class=1, **MUSIQ_ARCH).state_dict(), path / "musiq_tiny.pth")
        return str(path / "musiq_tiny.pth")

    return str(_once(root, "musiq", build))


def _topiq(root: Path) -> str:
    """pyiqa's TOPIQ-NR (image_quality's default metric), random init, as safetensors (its ResNet-50 built without
    the download, as tests/image/test_image_quality.py builds it)."""

    def build(path: Path) -> str:
        import pytest
        import timm
        import torch
        from safetensors.torch import save_file

        from rewardzoo.rewards.image.image_quality import metric_options

        create = timm.create_model
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(timm, "create_model", lambda *a, **k: create(*a, **{**k, "pretrained": False}))
            import pyiqa

            torch.manual_seed(0)
            net = pyiqa.create_metric("topiq_nr", device="cpu", pretrained=False, **metric_options("topiq_nr", {})).net
        path.mkdir(parents=True)
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path / "topiq_nr.safetensors"))
        return str(path / "topiq_nr.safetensors")

    return str(_once(root, "topiq_nr", build))


def _qwen_judge(family: str, **kwargs: Any) -> Callable[[Path], Swap]:
    """A generative judge on a tiny Qwen-VL: a random model writes no verdict, so a failure scores 0."""
    opts = {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}, **kwargs}
    return lambda root: Swap(_vlm(root, family), opts)


# ------------------------------------------------------------------ per reward
def _hpsv2(root: Path) -> Swap:
    from rewardzoo.testing import hps_checkpoint

    path, _ = _once(root, "hps", lambda p: hps_checkpoint(p / "HPS_v2.1_compressed.pt", seed=123))
    return Swap(str(path), {"clip_model": _open_clip(root)})


def _image_reward(root: Path) -> Swap:
    from tests.verifiers.image_reward_tiny import write_tiny_checkpoint

    def build(path: Path) -> str:
        path.mkdir(parents=True)
        write_tiny_checkpoint(path)
        return str(path)

    return Swap(_once(root, "image_reward", build))


def _geneval(root: Path) -> Swap:
    from tests.verifiers.test_verifiers_geneval import tiny_mask2former

    def build(path: Path) -> str:
        tiny_mask2former().save_pretrained(path)
        return str(path)

    return Swap(
        _once(root, "mask2former", build),
        {"clip_model": _open_clip(root), "clip_pretrained": None, "shortest_edge": 64, "longest_edge": 96},
    )


def _hpsv3(root: Path) -> Swap:
    """HPSv3's published layout on a tiny Qwen2-VL, as tests/vlm/test_vlm_hpsv3.py writes it."""

    def build(path: Path) -> tuple[str, str]:
        from tests.vlm.test_vlm_hpsv3 import write_published

        base, ckpt, *_ = write_published(path, path / "ckpt")
        return str(ckpt.parent), str(base)

    ckpt, base = _once(root, "hpsv3", build)
    return Swap(ckpt, {"base_model": base})


def _edit_reward(root: Path) -> Swap:
    from rewardzoo.testing import tiny_edit_reward_dirs

    base, ckpt = _once(root, "edit_reward", lambda p: tiny_edit_reward_dirs(p, seed=3))
    return Swap(str(ckpt), {"base_model": str(base)})


def _videoalign(root: Path) -> Swap:
    from rewardzoo.testing import tiny_videoalign_release

    # the release's own frame bounds hold VideoAlign's default min_pixels (100352): the entry's options stay as shown
    released = _once(root, "videoalign", lambda p: tiny_videoalign_release(p, max_pixels=200704)[0])
    return Swap(str(released))


def _synchformer(root: Path) -> Swap:
    from rewardzoo.testing import tiny_synchformer_dir

    return Swap(str(_once(root, "synchformer", lambda p: tiny_synchformer_dir(p, seed=0))))


def _imagebind(root: Path) -> Swap:
    from rewardzoo.testing import tiny_imagebind_dir

    return Swap(str(_once(root, "imagebind", lambda p: tiny_imagebind_dir(p, seed=3))))


def _raft(root: Path) -> Swap:
    def build(path: Path) -> str:
        import torch
        from torchvision.models.optical_flow import raft_large

        torch.manual_seed(0)
        path.mkdir(parents=True)
        torch.save(raft_large(weights=None, progress=False).state_dict(), path / "raft-things.pth")
        return str(path / "raft-things.pth")

    return Swap(_once(root, "raft", build), {"iters": 4})


def _whisper(root: Path) -> Swap:
    from rewardzoo.testing import tiny_whisper_dir

    return Swap(str(_once(root, "whisper", lambda p: tiny_whisper_dir(p, seed=5))), {"max_new_tokens": 6})


#: UTMOS's wav2vec2 shrunk as tests/audio/test_audio_utmos.py shrinks it
UTMOS_WAV2VEC2 = {
    "conv_feature_layers": "[(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2",
    "encoder_layers": 1,
    "encoder_ffn_embed_dim": 64,
    "conv_pos": 16,
}


def _utmos_config() -> Any:
    from utmos_pytorch.wav2vec2 import Wav2Vec2Config

    return lambda: Wav2Vec2Config(**UTMOS_WAV2VEC2)


def _utmos(root: Path) -> Swap:
    def build(path: Path) -> str:
        import pytest
        import torch
        from utmos_pytorch import utmos_torch

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(utmos_torch, "Wav2Vec2Config", _utmos_config())
            torch.manual_seed(0)
            net = utmos_torch.UTMOSModel()
        path.mkdir(parents=True)
        torch.save(net.state_dict(), path / "utmos_tiny.pt")
        return str(path / "utmos_tiny.pt")

    return Swap(_once(root, "utmos", build), patches=(("utmos_pytorch.utmos_torch", "Wav2Vec2Config", _utmos_config),))


def _audiobox(root: Path) -> Swap:
    from rewardzoo.testing import tiny_audiobox_checkpoint, tiny_audiobox_wavlm_config

    module = "audiobox_aesthetics.model.aes"

    def build(path: Path) -> str:
        import importlib

        import pytest

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(importlib.import_module(module), "DEFAULT_AUDIO_CFG", tiny_audiobox_wavlm_config())
            return str(tiny_audiobox_checkpoint(path))

    return Swap(_once(root, "audiobox", build), patches=((module, "DEFAULT_AUDIO_CFG", tiny_audiobox_wavlm_config),))


def _wavlm(root: Path) -> Swap:
    from rewardzoo.testing import tiny_wavlm_xvector_dir

    return Swap(str(_once(root, "wavlm", lambda p: tiny_wavlm_xvector_dir(p))))


def _song_eval(root: Path) -> Swap:
    from rewardzoo.testing import tiny_muq_dir, tiny_songeval_dir

    head = _once(root, "songeval", lambda p: tiny_songeval_dir(p, seed=1))
    muq = _once(root, "muq", lambda p: tiny_muq_dir(p, seed=2))
    return Swap(str(head), {"muq_path": str(muq)})


def _omni(root: Path) -> Swap:
    from rewardzoo.testing import tiny_omni_dir

    path = _once(root, "omni", lambda p: tiny_omni_dir(p, seed=0))
    return Swap(str(path), {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}})


def _implicit_prm(root: Path) -> Swap:
    models = _once(root, "text", _text)
    return Swap(models["gpt2_policy"], {"ref_model_path": models["gpt2_ref"]})


def _lrm(root: Path) -> Swap:
    from rewardzoo.testing.latent import tiny_lrm_dir, tiny_sd_dir

    def build(path: Path) -> tuple[str, str]:
        base = tiny_sd_dir(path / "base", seed=0)
        return str(tiny_lrm_dir(path / "lrm" / "lrm_sd15", base, seed=1)), str(base)

    ckpt, base = _once(root, "lrm", build)
    return Swap(ckpt, {"base_model_path": base})


def _dina_lrm(root: Path) -> Swap:
    from rewardzoo.testing.latent import tiny_dina_lrm_dir, tiny_sd3_dir

    def build(path: Path) -> str:
        base = tiny_sd3_dir(path / "sd3", seed=0)
        return str(tiny_dina_lrm_dir(path / "dina", base, seed=1))

    return Swap(_once(root, "dina_lrm", build))


def _diversity_weighted(root: Path) -> Swap:
    return Swap(_dino(root), {"base": {"reward_model": "pickscore", "model_path": _hf_clip(root)}})


#: reward -> its stand-in (every downloading reward but ``remote``)
STAND_INS: dict[str, Callable[[Path], Swap]] = {
    "clip_score": lambda root: Swap(_open_clip(root)),
    "video_clip_score": lambda root: Swap(_open_clip(root)),
    "clip_image_similarity": lambda root: Swap(_open_clip(root)),
    "video_background_consistency": lambda root: Swap(_open_clip(root)),
    "hpsv2": _hpsv2,
    "laion_aesthetic": lambda root: Swap(_aesthetic_head(root), {"clip_model": _open_clip(root)}),
    "video_aesthetic": lambda root: Swap(
        _aesthetic_head(root), {"clip_model": _open_clip(root), "clip_pretrained": None}
    ),
    "pickscore": lambda root: Swap(_hf_clip(root)),
    "image_reward": _image_reward,
    "geneval": _geneval,
    "image_quality": lambda root: Swap(_topiq(root)),
    "video_quality": lambda root: Swap(_topiq(root)),
    "imaging_quality": lambda root: Swap(_musiq(root), {"arch": MUSIQ_ARCH}),
    "video_imaging_quality": lambda root: Swap(_musiq(root), {"arch": MUSIQ_ARCH, "num_frames": 2, "resize": None}),
    "video_subject_consistency": lambda root: Swap(_dino(root)),
    "video_dynamic_degree": _raft,
    "group_diversity": lambda root: Swap(_dino(root)),
    "diversity_weighted": _diversity_weighted,
    "av_sync": _synchformer,
    "imagebind_score": _imagebind,
    "clap_score": lambda root: Swap(str(_once(root, "clap", _clap))),
    "asr_wer": _whisper,
    "asr_cer": _whisper,
    "utmos": _utmos,
    "audiobox_aesthetics": _audiobox,
    "speaker_similarity": _wavlm,
    "song_eval": _song_eval,
    "speech_judge": _omni,
    "sequence_reward": lambda root: Swap(_once(root, "text", _text)["gpt2_cls"]),
    "implicit_prm": _implicit_prm,
    "lrm": _lrm,
    "dina_lrm": _dina_lrm,
    "hpsv3": _hpsv3,
    "edit_reward": _edit_reward,
    "videoalign": _videoalign,
    "vqascore": lambda root: Swap(_vlm(root, "qwen2_5_vl")),
    "video_vqascore": lambda root: Swap(_vlm(root, "qwen2_5_vl")),
    "tifa_vqa": lambda root: Swap(_vlm(root, "qwen3_vl")),
    "videoscore2": lambda root: Swap(_vlm(root, "qwen2_5_vl"), {"on_failure": {"substitute": 0.0}}),
    "unified_reward": _qwen_judge("qwen2_5_vl"),
    "unified_reward_think": _qwen_judge("qwen2_5_vl"),
    "unified_reward_edit": _qwen_judge("qwen2_5_vl"),
    "unified_reward_edit_pairwise": _qwen_judge("qwen2_5_vl"),
    "edit_score": _qwen_judge("qwen2_5_vl"),
    "rational_rewards": _qwen_judge("qwen2_5_vl"),
    "rational_rewards_edit": _qwen_judge("qwen2_5_vl"),
    "vlm_judge": _qwen_judge("qwen2_5_vl"),
    "video_vlm_judge": _qwen_judge("qwen2_5_vl"),
    "unified_reward_2": _qwen_judge("qwen3_vl"),
    "video_unified_reward_2": _qwen_judge("qwen3_vl"),
}


def _clap(path: Path) -> Path:
    from rewardzoo.testing import tiny_clap_dir

    return tiny_clap_dir(path)


def _text(path: Path) -> dict[str, str]:
    from rewardzoo.testing import tiny_text_models

    return tiny_text_models(path)


def swapped(code: str, swap: Swap) -> str:
    """The example's code with the stand-in set on ``entry`` right before the processor is built (the only change)."""
    build = "\ntrain, _ = rewardzoo.build_processors("
    assert build in code, "the example builds no processor"
    lines = []
    if swap.model_path is not None:
        lines.append(f'entry["model_path"] = {swap.model_path!r}')
    if swap.kwargs:
        lines.append(f'entry["kwargs"] = {{**entry.get("kwargs", {{}}), **{swap.kwargs!r}}}')
    return code.replace(build, "\n" + "\n".join(lines) + build, 1)
