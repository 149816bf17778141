"""Audio flagships at their real size (cases for ``scripts/scale_check.py``; interface in ``common.py``).

The sample is one generated 60 s, 48 kHz stereo WAV file (:func:`scale.video.audio_file`), the size the issue
names for audio. ``clap_score``: laion/larger_clap_general's architecture (HTSAT base + RoBERTa base, 193M
parameters) as ``save_pretrained`` writes it; ``utmos``: utmos-pytorch's ``UTMOSModel`` as
``utmos_state_dict.pt``; ``audiobox_aesthetics``: ``AesMultiOutput`` (WavLM base) as facebook/audiobox-aesthetics
publishes it (``config.json`` + ``model.safetensors``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from scale.common import Case

AUDIO_SECONDS = 60.0
PROMPT = "a man speaks calmly in a quiet room while birds sing outside"


def audio_sample(prompt: bool = False) -> dict[str, Any]:
    from scale.video import audio_file

    sample: dict[str, Any] = {"audio": str(audio_file(AUDIO_SECONDS))}
    if prompt:
        sample["prompt"] = PROMPT
    return sample


# ------------------------------------------------------------------------------------------------ CLAP
def build_clap(folder: Path) -> None:
    """laion/larger_clap_general's ``ClapConfig`` (HTSAT: patch embeddings 128, depths 2-2-12-2, width 1024; text:
    RoBERTa base, 50,265 rows) with random weights and the unfused LAION feature extractor; a character-level
    RoBERTa tokenizer (ids within the real vocabulary) stands in for the 50k BPE."""
    import torch
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor

    from rewardzoo.testing.audio import tiny_clap_dir

    tiny_clap_dir(folder)  # tokenizer + processor files; the model is overwritten below
    tokenizer = ClapProcessor.from_pretrained(folder).tokenizer
    text = dict(
        vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=514, type_vocab_size=1, projection_dim=512,
    )  # fmt: skip
    audio = dict(
        depths=[2, 2, 12, 2], num_attention_heads=[4, 8, 16, 32], patch_embeds_hidden_size=128, hidden_size=1024,
        projection_dim=512, window_size=8, spec_size=256, num_mel_bins=64, enable_fusion=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = ClapModel(ClapConfig(text_config=text, audio_config=audio, projection_dim=512)).eval()
    for name in ("model.safetensors", "pytorch_model.bin"):
        (folder / name).unlink(missing_ok=True)
    model.save_pretrained(folder)
    ClapProcessor(
        feature_extractor=ClapFeatureExtractor(truncation="rand_trunc", padding="repeatpad"), tokenizer=tokenizer
    ).save_pretrained(folder)


def reference_clap(folder: Path) -> Any:
    from transformers import ClapModel

    return ClapModel.from_pretrained(folder).eval()


# ------------------------------------------------------------------------------------------------ UTMOS
UTMOS_FILE = "utmos_state_dict.pt"


def build_utmos(folder: Path) -> None:
    import torch
    from utmos_pytorch.utmos_torch import UTMOSModel

    torch.manual_seed(0)
    torch.save(UTMOSModel().state_dict(), folder / UTMOS_FILE)


def reference_utmos(folder: Path) -> Any:
    """utmos-pytorch's own loader: ``UTMOSScoreTorch(ckpt_path=...)``."""
    from utmos_pytorch.utmos_torch import UTMOSScoreTorch

    return UTMOSScoreTorch(ckpt_path=str(folder / UTMOS_FILE)).eval()


# ------------------------------------------------------------------------------------------------ audiobox
def build_audiobox(folder: Path) -> None:
    """``AesMultiOutput`` with the package's real encoder (``DEFAULT_AUDIO_CFG``: WavLM base, 12 layers) and the
    published head settings, ``save_pretrained`` (config.json + model.safetensors)."""
    import torch
    from audiobox_aesthetics.model import aes

    from rewardzoo.testing.audio import AUDIOBOX_TARGETS

    cfg = dict(
        proj_num_layer=1, proj_ln=False, proj_act_fn="gelu", proj_dropout=0.0,
        nth_layer=aes.DEFAULT_AUDIO_CFG.encoder_layers + 1, use_weighted_layer_sum=True, precision="32",
        normalize_embed=True, output_dim=1,
    )  # fmt: skip
    torch.manual_seed(0)
    model = aes.AesMultiOutput(**cfg, target_transform=copy.deepcopy(AUDIOBOX_TARGETS)).eval()
    model.save_pretrained(folder)


def reference_audiobox(folder: Path) -> Any:
    """The package's own loader (what its ``AesPredictor`` calls): ``AesMultiOutput.from_pretrained``."""
    from audiobox_aesthetics.model.aes import AesMultiOutput

    return AesMultiOutput.from_pretrained(str(folder)).eval()


_60S = "sample: one 60 s, 48 kHz stereo 16-bit WAV file (generated speech-like signal), given as its path"
AUDIO_IMPORTS = ("torch", "torchaudio", "soundfile", "numpy")

CASES = [
    Case(
        name="clap_score",
        reward="clap_score",
        build=build_clap,
        entry=lambda folder: {"model_path": str(folder)},
        reference=reference_clap,
        samples=lambda: [audio_sample(prompt=True)],
        imports=(*AUDIO_IMPORTS, "transformers"),
        layout="transformers save_pretrained: config.json + model.safetensors + processor files "
        "(laion/larger_clap_general)",
        notes=_60S + "; a character-level tokenizer stands in for RoBERTa's BPE (embedding rows are the real 50,265)",
    ),
    Case(
        name="utmos",
        reward="utmos",
        build=build_utmos,
        entry=lambda folder: {"model_path": str(folder / UTMOS_FILE)},
        reference=reference_utmos,
        samples=lambda: [audio_sample()],
        imports=(*AUDIO_IMPORTS, "utmos_pytorch"),
        layout="utmos_state_dict.pt: torch.save of UTMOSModel's state dict (Blinorot/UTMOS-PyTorch)",
        notes=_60S,
    ),
    Case(
        name="audiobox_aesthetics",
        reward="audiobox_aesthetics",
        build=build_audiobox,
        entry=lambda folder: {"model_path": str(folder)},
        reference=reference_audiobox,
        samples=lambda: [audio_sample()],
        imports=(*AUDIO_IMPORTS, "audiobox_aesthetics"),
        layout="PyTorchModelHubMixin save_pretrained: config.json + model.safetensors (facebook/audiobox-aesthetics)",
        notes=_60S + "; target means/stds made up (the real ones are in the hub config)",
    ),
]
