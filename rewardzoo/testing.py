"""Tiny random-init models saved to disk the way users hold real weights, for tests and benchmarks.

Every builder writes the files a real checkpoint ships (an open_clip hub directory, a transformers
``save_pretrained`` directory, a ``{"state_dict": ...}`` checkpoint, a LAION aesthetic head file),
so the reward under test loads them through its ordinary ``model_path`` code path, offline. Weights
are random but reproducible: each builder calls ``torch.manual_seed(seed)`` right before it constructs
its model(s), in a fixed order, so two calls with the same seed give bit-identical files and a
reference model built in memory (``tiny_open_clip_model``, ``reference_aesthetic_head``) matches
the saved one. The sizes are tiny (seconds on a CPU); the ``model_cfg``/``config`` keywords take
full-size configurations for benchmarks, where speed does not depend on the weight values.

Importing this module is light: torch, open_clip and transformers are imported inside the functions
that need them (``image``, ``video``, ``audio`` or ``text`` extras)::

    from rewardzoo.testing import tiny_open_clip_dir, aesthetic_head_file
    clip_dir = tiny_open_clip_dir(tmp_path / "clip")
    head = aesthetic_head_file(tmp_path / "head.safetensors")
    reward = LaionAesthetic(model_path=str(head), clip_model=str(clip_dir))
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

__all__ = [
    "IMAGE_SIZE", "EMBED_DIM", "TINY_OPEN_CLIP", "TINY_VIDEO_OPEN_CLIP", "CLIP_PREPROCESS",
    "tiny_open_clip_dir", "tiny_open_clip_model", "clip_tokenizer", "tiny_hf_clip_config", "tiny_hf_clip_dir",
    "hps_checkpoint", "reference_aesthetic_head", "aesthetic_head_file",
    "linear_aesthetic_head_file",
    "tiny_dino_dirs", "tiny_clap_dir", "tiny_wavlm_xvector_dir", "tiny_whisper_dir", "tiny_wav2vec2_ctc_dir",
    "tiny_audiobox_wavlm_config", "AUDIOBOX_TARGETS", "tiny_audiobox_checkpoint",
    "WORDS", "SPECIALS", "VOCAB", "CHAT_TEMPLATE", "word_tokenizer", "gpt2_config", "llama_config",
    "tiny_text_models",
    "QWEN_SPECIAL_TOKENS", "QWEN2_VL_CHAT_TEMPLATE", "QWEN3_VL_CHAT_TEMPLATE", "VLM_CORPUS", "VLM_FAMILIES",
    "tiny_vlm_tokenizer", "tiny_vlm_config", "tiny_vlm_processor", "tiny_vlm_dir",
]  # plus ReferenceAestheticMLP, a torch class defined on first access (kept out of `import *`, which stays light)

# ---------------------------------------------------------------------------------------------------------------
# CLIP (open_clip and transformers), HPS, LAION aesthetic head
# ---------------------------------------------------------------------------------------------------------------

IMAGE_SIZE = 64
EMBED_DIM = 768  # the LAION aesthetic head reads 768-d ViT-L/14 embeddings

TINY_OPEN_CLIP: dict = {
    "embed_dim": EMBED_DIM,
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
# The video tests' variant: the same image tower, one text layer.
TINY_VIDEO_OPEN_CLIP: dict = {
    "embed_dim": EMBED_DIM,
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
CLIP_PREPROCESS: dict = {"mean": [0.48145466, 0.4578275, 0.40821073],
                         "std": [0.26862954, 0.26130258, 0.27577711],
                         "interpolation": "bicubic", "resize_mode": "shortest"}


def tiny_open_clip_model(*, seed: int = 0, model_cfg: dict | None = None):
    """Build the random-init ``open_clip.CLIP`` that :func:`tiny_open_clip_dir` saves, in memory.

    ``torch.manual_seed(seed)`` is called right before ``open_clip.CLIP(**model_cfg)``, so the result
    has exactly the weights of ``tiny_open_clip_dir(path, seed=seed, model_cfg=model_cfg)``; use it as
    the reference a test compares a reward against. ``model_cfg`` defaults to :data:`TINY_OPEN_CLIP`
    (any open_clip ``model_cfg`` works, e.g. ``open_clip.get_model_config("ViT-B-32")`` for a
    full-size benchmark model). The model is returned in train mode, as constructed.
    """
    import open_clip
    import torch

    cfg = copy.deepcopy(TINY_OPEN_CLIP if model_cfg is None else model_cfg)
    torch.manual_seed(seed)
    return open_clip.CLIP(**cfg)


def tiny_open_clip_dir(path, *, seed: int = 0, model_cfg: dict | None = None,
                       preprocess_cfg: dict | None = None) -> Path:
    """Write a random-init open_clip model as a hub-style directory and return the directory.

    The directory holds ``open_clip_config.json`` (``{"model_cfg": ..., "preprocess_cfg": ...}``)
    and ``open_clip_model.safetensors``, the layout of the open_clip models on the Hugging Face hub, so
    it loads with ``open_clip.create_model_and_transforms(f"local-dir:{path}")`` and as the
    ``model_path``/``clip_model`` of the CLIP-based rewards. ``path`` is created (with parents) if
    missing. ``model_cfg`` defaults to :data:`TINY_OPEN_CLIP` and ``preprocess_cfg`` to
    :data:`CLIP_PREPROCESS`; the weights are those of ``tiny_open_clip_model(seed=seed, model_cfg=...)``.
    """
    from safetensors.torch import save_file

    cfg = TINY_OPEN_CLIP if model_cfg is None else model_cfg
    model = tiny_open_clip_model(seed=seed, model_cfg=cfg)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": cfg, "preprocess_cfg": CLIP_PREPROCESS if preprocess_cfg is None else preprocess_cfg}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path / "open_clip_model.safetensors"))
    return path


def clip_tokenizer():
    """A transformers ``CLIPTokenizer`` over the BPE vocabulary that open_clip ships (no download).

    The vocabulary (49408 tokens: byte symbols, their ``</w>`` forms, the 48894 merges, then
    ``<|startoftext|>`` and ``<|endoftext|>``) and the merges are rebuilt from open_clip's bundled
    ``bpe_simple_vocab_16e6.txt.gz`` exactly as OpenAI's tokenizer defines them, so token ids agree
    with ``openai/clip-vit-*`` tokenizers and with open_clip's own tokenizer. Needs open_clip and
    transformers; works with ``HF_HUB_OFFLINE=1``.
    """
    from open_clip.tokenizer import bytes_to_unicode, default_bpe
    from transformers import CLIPTokenizer

    with gzip.open(default_bpe()) as f:
        lines = f.read().decode("utf-8").split("\n")
    merges = lines[1:49152 - 256 - 2 + 1]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges])


def tiny_hf_clip_config():
    """The tiny transformers ``CLIPConfig`` that :func:`tiny_hf_clip_dir` uses by default.

    Text tower: vocabulary 49408 (the CLIP BPE), width 32, 2 layers, 2 heads, 77 positions, BOS 49406
    and EOS/pad 49407; vision tower: width 32, 1 layer, 2 heads, :data:`IMAGE_SIZE` pixels, patch 16;
    projection 48 and the usual ``logit_scale`` initial value 2.6592. A fresh config object each call.
    """
    from transformers import CLIPConfig

    return CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77, "bos_token_id": 49406,
                     "eos_token_id": 49407, "pad_token_id": 49407},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": IMAGE_SIZE, "patch_size": 16},
        projection_dim=48, logit_scale_init_value=2.6592)


def tiny_hf_clip_dir(path, *, seed: int = 1, config=None, image_processor=None) -> Path:
    """Write a random-init transformers ``CLIPModel`` plus its ``CLIPProcessor`` and return the directory.

    The directory is what ``CLIPModel.from_pretrained``/``CLIPProcessor.from_pretrained`` read: model
    config and safetensors weights, the :func:`clip_tokenizer` files and an image-processor config
    (resize and centre-crop to :data:`IMAGE_SIZE` by default). ``torch.manual_seed(seed)`` is called
    before the model is built from ``config`` (default :func:`tiny_hf_clip_config`; pass
    ``transformers.CLIPConfig()`` and ``CLIPImageProcessor()`` for ViT-B/32 sizes). Tip: torchmetrics'
    ``CLIPScore`` only accepts local paths whose name contains ``openai``, so name the directory
    accordingly (e.g. ``tmp / "openai-tiny-clip"``) when comparing against it.
    """
    import torch
    from transformers import CLIPImageProcessor, CLIPModel, CLIPProcessor

    config = tiny_hf_clip_config() if config is None else config
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    path = Path(path)
    model.save_pretrained(path)
    if image_processor is None:
        image_processor = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE},
                                             crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    CLIPProcessor(image_processor=image_processor, tokenizer=clip_tokenizer()).save_pretrained(path)
    return path


def hps_checkpoint(path, *, seed: int = 123, model_cfg: dict | None = None):
    """Save an HPS-style checkpoint ``{"state_dict": ...}`` (``torch.save``) and return ``(path, model)``.

    HPSv2 publishes ``HPS_v2.1_compressed.pt``, a torch checkpoint whose ``state_dict`` holds the
    fine-tuned weights of an open_clip model; this writes one for the open_clip architecture
    ``model_cfg`` (default :data:`TINY_OPEN_CLIP`, i.e. that of :func:`tiny_open_clip_dir`) with random
    weights from ``seed`` (different from the backbone directory's, so a test can tell the checkpoint
    was loaded). ``path`` is the file to write (parents created); ``model`` is the same network in
    eval mode, the reference to compare against.
    """
    import torch

    model = tiny_open_clip_model(seed=seed, model_cfg=model_cfg)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict()}, path)
    return path, model.eval()


_REFERENCE_AESTHETIC_MLP = None


def _reference_aesthetic_mlp_class():
    """Define (once) and return the reference LAION aesthetic head class; torch is imported here."""
    global _REFERENCE_AESTHETIC_MLP
    if _REFERENCE_AESTHETIC_MLP is None:
        import torch

        class ReferenceAestheticMLP(torch.nn.Module):
            """The improved-aesthetic-predictor head as its repository defines it (attribute ``layers``).

            ``Linear(input_size, 1024), Dropout(0.2), Linear(1024, 128), Dropout(0.2), Linear(128, 64),
            Dropout(0.1), Linear(64, 16), Linear(16, 1)`` in a ``Sequential`` named ``layers``, so the
            parameter names are those of ``sac+logos+ava1-l14-linearMSE.pth`` (``layers.0`` ... ``layers.7``)
            and ``forward`` returns ``(B, 1)`` scores like the original.
            """

            def __init__(self, input_size: int = EMBED_DIM):
                super().__init__()
                nn = torch.nn
                self.layers = nn.Sequential(nn.Linear(input_size, 1024), nn.Dropout(0.2), nn.Linear(1024, 128),
                                            nn.Dropout(0.2), nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16),
                                            nn.Linear(16, 1))

            def forward(self, x):
                return self.layers(x)

        ReferenceAestheticMLP.__module__ = __name__
        ReferenceAestheticMLP.__qualname__ = "ReferenceAestheticMLP"
        _REFERENCE_AESTHETIC_MLP = ReferenceAestheticMLP
    return _REFERENCE_AESTHETIC_MLP


def __getattr__(name: str) -> Any:
    """Module attribute hook: ``ReferenceAestheticMLP`` is a torch class, so it is defined on first use."""
    if name == "ReferenceAestheticMLP":
        return _reference_aesthetic_mlp_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """Module listing hook: the module's names plus the lazily defined ``ReferenceAestheticMLP``."""
    return sorted(set(globals()) | {"ReferenceAestheticMLP"})


def reference_aesthetic_head(*, seed: int = 7, input_size: int = EMBED_DIM):
    """A random-init reference LAION aesthetic head (``ReferenceAestheticMLP``) in eval mode.

    ``torch.manual_seed(seed)`` is called right before construction, so this is exactly the head that
    ``aesthetic_head_file(path, seed=seed, input_size=input_size)`` writes; a test scores with it as the
    reference. It has the same layer order (and so the same weights for a seed) as rewardzoo's own
    ``rewardzoo.rewards.image.aesthetic.AestheticHead``, but ``forward`` keeps the trailing ``1`` dim.
    """
    import torch

    torch.manual_seed(seed)
    return _reference_aesthetic_mlp_class()(input_size).eval()


def aesthetic_head_file(path, *, seed: int = 7, input_size: int = EMBED_DIM) -> Path:
    """Write a random-init LAION aesthetic v2 head with the reference parameter names and return the path.

    The format follows the suffix of ``path``: ``.pth``/``.pt`` is a plain ``torch.save`` of the state
    dict (like the published ``sac+logos+ava1-l14-linearMSE.pth``, loadable with
    ``weights_only=True``), ``.safetensors`` a safetensors file; anything else is a ``ValueError``.
    The keys are ``layers.{0,2,4,6,7}.{weight,bias}`` and the weights those of
    ``reference_aesthetic_head(seed=seed, input_size=input_size)``. Parent directories are created.
    """
    import torch

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".pth", ".pt", ".safetensors"):
        raise ValueError(f"aesthetic_head_file: unknown format '{path.name}' (use a .pth, .pt or .safetensors name)")
    state = reference_aesthetic_head(seed=seed, input_size=input_size).state_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# Video: DINO ViT and DINOv2
# ---------------------------------------------------------------------------------------------------------------


def linear_aesthetic_head_file(path, *, seed: int = 11, input_size: int = EMBED_DIM) -> Path:
    """Write a random-init LAION aesthetic **v1** head (``Linear(input_size, 1)``) as a ``torch.save`` state dict
    with the published key names ``weight`` / ``bias`` (as ``sa_0_4_vit_l_14_linear.pth``); return the path.

    ``torch.manual_seed(seed)`` precedes the ``nn.Linear`` construction. Parent directories are created.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    layer = torch.nn.Linear(input_size, 1)
    torch.save({k: v.detach().clone() for k, v in layer.state_dict().items()}, path)
    return path


def tiny_dino_dirs(root, *, seed: int = 0, vit_config: dict | None = None,
                   dinov2_config: dict | None = None) -> dict[str, str]:
    """Save a tiny random-init DINO-style ViT (patch 16) and DINOv2 (patch 14); return ``{"vit", "dinov2"}`` paths.

    Both are transformers ``save_pretrained`` directories (``ViTModel`` without pooler,
    ``Dinov2Model``) under ``root``, which is what the subject-consistency reward loads as
    ``model_path``. Defaults: width 32, 2 layers, 2 heads, 224 pixels, and ``initializer_range=0.5`` so
    random features are far apart and consistency scores are not all about 1. ``vit_config`` /
    ``dinov2_config`` are keyword overrides of those configs (e.g. ViT-B/16 sizes for a benchmark).
    ``torch.manual_seed(seed)`` is called once, then the ViT and the DINOv2 are built in that order.
    """
    import torch
    from transformers import Dinov2Config, Dinov2Model, ViTConfig, ViTModel

    root = Path(root)
    vit_kw = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=224,
                  patch_size=16, initializer_range=0.5)
    vit_kw.update(vit_config or {})
    dinov2_kw = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=224,
                     patch_size=14, initializer_range=0.5)
    dinov2_kw.update(dinov2_config or {})
    torch.manual_seed(seed)
    ViTModel(ViTConfig(**vit_kw), add_pooling_layer=False).save_pretrained(root / "vit")
    Dinov2Model(Dinov2Config(**dinov2_kw)).save_pretrained(root / "dinov2")
    return {"vit": str(root / "vit"), "dinov2": str(root / "dinov2")}


# ---------------------------------------------------------------------------------------------------------------
# Audio: CLAP
# ---------------------------------------------------------------------------------------------------------------


def tiny_clap_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random-init ``ClapModel`` (HTSAT + RoBERTa) with its ``ClapProcessor``; return the directory.

    The tokenizer is a small character-level ``RobertaTokenizer`` (lower-case letters, with and
    without the ``Ġ`` word-start marker, no merges), so no vocabulary is downloaded. Text tower:
    width 16, 1 layer; audio tower: 2 tiny Swin stages, 64 mel bins, no fusion; projection 16. The
    feature extractor uses ``truncation="rand_trunc"`` and ``padding="repeatpad"``, the settings of the
    unfused LAION checkpoints (one mel view per clip). ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor, RobertaTokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault("\u0120" + ch, len(vocab))
    vocab.setdefault("\u0120", len(vocab))
    (path / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = RobertaTokenizer(vocab=vocab, merges=[])
    text = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=64, projection_dim=16)
    audio = dict(depths=[1, 1], num_attention_heads=[1, 2], patch_embeds_hidden_size=8, hidden_size=16,
                 projection_dim=16, window_size=8, spec_size=256, num_mel_bins=64, enable_fusion=False)
    torch.manual_seed(seed)
    ClapModel(ClapConfig(text_config=text, audio_config=audio, projection_dim=16)).eval().save_pretrained(path)
    ClapProcessor(feature_extractor=ClapFeatureExtractor(truncation="rand_trunc", padding="repeatpad"),
                  tokenizer=tokenizer).save_pretrained(path)
    return path


def tiny_wavlm_xvector_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random-init ``WavLMForXVector`` with a ``Wav2Vec2FeatureExtractor`` (16 kHz,
    ``do_normalize``, attention masks); return the directory.

    Two conv layers (strides 5 and 4, kernels 10 and 8: one frame per 20 samples), width 16, one
    transformer layer with 2 heads, a 3-layer TDNN (kernels 3, 3, 1), x-vector dimension 8.
    ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = WavLMConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=2, feat_extract_norm="group", num_buckets=16,
                         max_bucket_distance=64, tdnn_dim=(16, 16, 32), tdnn_kernel=(3, 3, 1),
                         tdnn_dilation=(1, 2, 1), xvector_output_dim=8, apply_spec_augment=False)
    torch.manual_seed(seed)
    WavLMForXVector(config).eval().save_pretrained(path)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                             return_attention_mask=True).save_pretrained(path)
    return path


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: the 256 byte values as printable characters (printable Latin-1
    bytes stand for themselves, the others are shifted past 255), in byte order."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, shift = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + shift))
            shift += 1
    return out


WHISPER_SPECIALS = ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|translate|>", "<|transcribe|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")


def tiny_whisper_dir(path, *, seed: int = 0, num_mel_bins: int = 80, d_model: int = 16, layers: int = 1) -> Path:
    """Save a tiny random-init ``WhisperForConditionalGeneration`` with a ``WhisperProcessor``; return the dir.

    The tokenizer is a byte-level ``WhisperTokenizer`` written offline: the 256 byte symbols, no merges,
    then Whisper's special tokens (``<|endoftext|>``, ``<|startoftranscript|>``, ``<|en|>``, ``<|de|>``,
    ``<|translate|>``, ``<|transcribe|>``, ..., ``<|notimestamps|>``). The feature extractor is the default
    ``WhisperFeatureExtractor`` (16 kHz, 30 s, ``num_mel_bins`` mels). Model: width ``d_model``,
    ``layers`` encoder and decoder layers, 2 heads, 64 target positions, no suppressed or forced tokens.
    ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from transformers import (WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration,
                              WhisperProcessor, WhisperTokenizer)

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = {ch: i for i, ch in enumerate(_byte_alphabet())}
    for token in WHISPER_SPECIALS:
        vocab[token] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = WhisperTokenizer(str(path / "vocab.json"), str(path / "merges.txt"))
    tokenizer.add_special_tokens({"additional_special_tokens": list(WHISPER_SPECIALS[1:])})
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=num_mel_bins),
                                 tokenizer=tokenizer)
    end = vocab["<|endoftext|>"]
    config = WhisperConfig(vocab_size=len(vocab), num_mel_bins=num_mel_bins, d_model=d_model, encoder_layers=layers,
                           decoder_layers=layers, encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model, max_source_positions=1500,
                           max_target_positions=64, pad_token_id=end, bos_token_id=end, eos_token_id=end,
                           decoder_start_token_id=vocab["<|startoftranscript|>"], suppress_tokens=[],
                           begin_suppress_tokens=[])
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config.forced_decoder_ids = None
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def tiny_audiobox_wavlm_config():
    """A tiny ``audiobox_aesthetics`` ``WavLMConfig`` (2 layers, width 16, 8-channel conv front end with the
    published strides: one frame per 320 samples). The package's ``AesMultiOutput`` builds its encoder from
    the module-level ``audiobox_aesthetics.model.aes.DEFAULT_AUDIO_CFG``: set that to this config (e.g.
    with pytest's ``monkeypatch``) while saving and loading a tiny checkpoint."""
    from audiobox_aesthetics.model.aes import DEFAULT_AUDIO_CFG
    from audiobox_aesthetics.model.wavlm import WavLMConfig

    cfg = dict(vars(DEFAULT_AUDIO_CFG))
    cfg.update(encoder_layers=2, encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_attention_heads=2,
               conv_feature_layers="[(8,10,5)] + [(8,3,2)] * 4 + [(8,2,2)] * 2", conv_pos=16, conv_pos_groups=2,
               num_buckets=16, max_distance=64, encoder_layerdrop=0.0, dropout=0.0, attention_dropout=0.0,
               dropout_input=0.0, dropout_features=0.0)
    return WavLMConfig(cfg)


AUDIOBOX_TARGETS = {"CE": {"mean": 5.5, "std": 1.5}, "CU": {"mean": 6.0, "std": 1.2},
                    "PC": {"mean": 3.0, "std": 1.1}, "PQ": {"mean": 7.0, "std": 1.3}}


def tiny_audiobox_checkpoint(path, *, seed: int = 0, layout: str = "hub") -> Path:
    """Save a random-init ``AesMultiOutput`` in the published layout (``layout="hub"``: a directory with
    ``config.json`` and ``model.safetensors`` from ``save_pretrained``; ``"pth"``: a training checkpoint
    ``{"state_dict", "model_cfg", "target_transform"}`` with ``model.``-prefixed keys) and return its path.

    Same key names as the real checkpoint (``wavlm_model.*``, ``proj_layer.{CE,CU,PC,PQ}.*``,
    ``layer_weights.*``); the encoder is whatever ``DEFAULT_AUDIO_CFG`` says when called (see
    :func:`tiny_audiobox_wavlm_config`), with ``nth_layer`` = its layers + 1 and made-up target means/stds
    (:data:`AUDIOBOX_TARGETS`). ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from audiobox_aesthetics.model import aes

    path = Path(path)
    cfg = dict(proj_num_layer=1, proj_ln=False, proj_act_fn="gelu", proj_dropout=0.0,
               nth_layer=aes.DEFAULT_AUDIO_CFG.encoder_layers + 1, use_weighted_layer_sum=True, precision="32",
               normalize_embed=True, output_dim=1)
    torch.manual_seed(seed)
    model = aes.AesMultiOutput(**cfg, target_transform=copy.deepcopy(AUDIOBOX_TARGETS)).eval()
    with torch.no_grad():  # distinct layer weights per axis, so the softmax mix matters
        for p in model.layer_weights.values():
            p.copy_(torch.randn_like(p))
    if layout == "hub":
        model.save_pretrained(path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "model_cfg": cfg,
                "target_transform": copy.deepcopy(AUDIOBOX_TARGETS)}, path)
    return path


def tiny_wav2vec2_ctc_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random-init ``Wav2Vec2ForCTC`` with a ``Wav2Vec2Processor`` (character
    ``Wav2Vec2CTCTokenizer``: ``<pad>`` (the CTC blank), ``<s>``, ``</s>``, ``<unk>``, ``|`` (word
    delimiter), a-z and the apostrophe; a 16 kHz feature extractor with attention masks); return the
    directory. Two conv layers (one frame per 20 samples), width 16, one transformer layer.
    ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from transformers import (Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC,
                              Wav2Vec2Processor)

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = {tok: i for i, tok in enumerate(["<pad>", "<s>", "</s>", "<unk>", "|", *"abcdefghijklmnopqrstuvwxyz'"])}
    (path / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(path / "vocab.json"))
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                         return_attention_mask=True)
    config = Wav2Vec2Config(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, pad_token_id=0,
                            feat_extract_norm="layer", do_stable_layer_norm=True, apply_spec_augment=False)
    torch.manual_seed(seed)
    Wav2Vec2ForCTC(config).eval().save_pretrained(path)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# Text: a word-level tokenizer, GPT-2 / Llama configs, saved causal LMs and classifiers
# ---------------------------------------------------------------------------------------------------------------

WORDS = ("the a cat dog sat on mat ran fast slow good bad answer is yes no one two three four five six seven eight "
         "nine ten what why how because so then <user> <assistant> question reward model").split()
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
VOCAB = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}"
                 "{% if add_generation_prompt %}<assistant> {% endif %}")


def word_tokenizer(bos: bool = True):
    """A word-level ``PreTrainedTokenizerFast`` over :data:`VOCAB` (whitespace split, offline).

    Ids: ``<pad>`` 0, ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3, then :data:`WORDS` in order; unknown
    words map to ``<unk>``. With ``bos=True`` a template post-processor prepends ``<bos>`` when special
    tokens are added (the default of ``tokenizer(text)``). :data:`CHAT_TEMPLATE` is set, rendering
    messages as ``<role> content`` and the generation prompt as ``<assistant>``. A new object each call.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                           special_tokens=[("<bos>", VOCAB["<bos>"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                   eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def gpt2_config(**overrides):
    """A tiny ``GPT2Config`` matching :func:`word_tokenizer`, with keyword ``overrides`` applied on top.

    Defaults: vocabulary ``len(VOCAB)``, 64 positions, width 32, 2 layers, 4 heads, BOS 2 / EOS 3 /
    pad 0 (the word tokenizer's ids) and all dropouts 0 so train and eval forwards agree. Any
    ``GPT2Config`` field can be overridden, e.g. ``num_labels=1`` for a sequence classifier or
    ``vocab_size=4096, n_embd=128`` for a benchmark model.
    """
    from transformers import GPT2Config

    base = dict(vocab_size=len(VOCAB), n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=2,
                eos_token_id=3, pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    base.update(overrides)
    return GPT2Config(**base)


def llama_config(**overrides):
    """A tiny ``LlamaConfig`` matching :func:`word_tokenizer`, with keyword ``overrides`` applied on top.

    Defaults: vocabulary ``len(VOCAB)``, width 32, MLP 64, 2 layers, 4 attention heads with 2
    key/value heads (grouped-query attention), 64 positions, BOS 2 / EOS 3 / pad 0. Any
    ``LlamaConfig`` field can be overridden.
    """
    from transformers import LlamaConfig

    base = dict(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, bos_token_id=2,
                eos_token_id=3, pad_token_id=0)
    base.update(overrides)
    return LlamaConfig(**base)


def _save_pretrained(model, tokenizer, path: Path) -> str:
    """Save ``model`` and ``tokenizer`` into ``path`` (a hub-style directory) and return it as a string."""
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tiny_text_models(root, *, seed: int = 0, tokenizer=None) -> dict[str, str]:
    """Save tiny random-init text models with the word tokenizer under ``root``; return their paths by name.

    Keys (each a ``save_pretrained`` directory ``root / key`` with model and tokenizer files):
    ``gpt2_policy`` and ``gpt2_ref`` (``GPT2LMHeadModel``), ``llama_policy`` and ``llama_ref``
    (``LlamaForCausalLM``), ``gpt2_cls`` and ``gpt2_cls3`` (``GPT2ForSequenceClassification`` with 1
    and 3 labels). ``torch.manual_seed(seed)`` is called once and the models are built in that order,
    so policy and reference differ. ``tokenizer`` defaults to ``word_tokenizer()``.
    """
    import torch
    from transformers import GPT2ForSequenceClassification, GPT2LMHeadModel, LlamaForCausalLM

    root = Path(root)
    tokenizer = word_tokenizer() if tokenizer is None else tokenizer
    torch.manual_seed(seed)
    return {
        "gpt2_policy": _save_pretrained(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_policy"),
        "gpt2_ref": _save_pretrained(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_ref"),
        "llama_policy": _save_pretrained(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_policy"),
        "llama_ref": _save_pretrained(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_ref"),
        "gpt2_cls": _save_pretrained(GPT2ForSequenceClassification(gpt2_config(num_labels=1)), tokenizer,
                                     root / "gpt2_cls"),
        "gpt2_cls3": _save_pretrained(GPT2ForSequenceClassification(gpt2_config(num_labels=3)), tokenizer,
                                      root / "gpt2_cls3"),
    }


# ---------------------------------------------------------------------------------------------------------------
# Vision-language models: Qwen2-VL, Qwen2.5-VL and Qwen3-VL, tiny, with a real processor
# ---------------------------------------------------------------------------------------------------------------

#: The Qwen special tokens the processors and chat templates use, in id order (ids 0..7).
QWEN_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                       "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
#: The Qwen2-VL / Qwen2.5-VL chat template, shortened (no tool calls, no numbered images): ChatML turns, a default
#: system prompt, each image as ``<|vision_start|><|image_pad|><|vision_end|>`` and each video with ``<|video_pad|>``.
QWEN2_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}"
    "<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
#: Qwen3-VL's template has no default system prompt (its processor adds the frame timestamps of videos).
QWEN3_VL_CHAT_TEMPLATE = QWEN2_VL_CHAT_TEMPLATE.replace(
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}", "")
#: Text the tiny byte-level BPE is trained on, so prompt words, answers and numbers are short token sequences.
VLM_CORPUS = (
    'Does this figure show "a cat on a mat"? Please answer Yes or No. Yes No yes no',
    "You are a helpful assistant. system user assistant image video frame",
    "Final Score: 3.5 Image 1 is better Image 2 is better score 0 1 2 3 4 5 6 7 8 9 . , : ; ! ?",
    "<think> reasoning </think> <answer> </answer> Alignment Coherence Style prompt photo of a dog",
)
VLM_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")


def tiny_vlm_tokenizer(vocab_size: int = 400):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with the Qwen special tokens (ids 0-7), trained offline.

    Trained on :data:`VLM_CORPUS` repeated (deterministic: the BPE trainer breaks ties by order), with
    pad ``<|endoftext|>`` and eos ``<|im_end|>`` as Qwen's. Any text encodes (byte fallback).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(QWEN_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(VLM_CORPUS) * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIAL_TOKENS[1:])})
    return fast


def tiny_vlm_config(family: str = "qwen2_vl", *, vocab_size: int, max_position_embeddings: int = 4096,
                    initializer_range: float = 0.2, text: dict | None = None, vision: dict | None = None):
    """A tiny ``Qwen2VLConfig`` / ``Qwen2_5_VLConfig`` / ``Qwen3VLConfig`` over :func:`tiny_vlm_tokenizer` ids.

    Text: width 32, 2 layers, 4 heads (2 key/value), head dim 8 with M-RoPE sections (1, 1, 2); vision:
    width 32, 1 block (Qwen2.5-VL: 2, one windowed), patch 14 (Qwen3-VL: 16), merge 2, temporal patch 2.
    ``initializer_range`` 0.2 (not 0.02) so the random model's next-token distribution is far from uniform
    and scores differ between inputs. ``text`` / ``vision`` override text- and vision-config fields (e.g. a
    larger model for a memory benchmark; keep M-RoPE sections summing to head_dim / 2, and the vision output
    width, ``hidden_size`` for Qwen2-VL or ``out_hidden_size`` otherwise, equal to the text width).
    """
    ids = {t: i for i, t in enumerate(QWEN_SPECIAL_TOKENS)}
    text_overrides, vision_overrides = dict(text or {}), dict(vision or {})
    text = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_position_embeddings,
                initializer_range=initializer_range, bos_token_id=ids["<|endoftext|>"],
                eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]})
    special = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                   vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig

        vision = dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, initializer_range=initializer_range)
        return Qwen2VLConfig(text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides},
                             **special)
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1],
                      initializer_range=initializer_range)
        return Qwen2_5_VLConfig(text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides},
                                **special)
    if family == "qwen3_vl":
        from transformers import Qwen3VLConfig

        text = dict(text, head_dim=8, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                       "mrope_section": [1, 1, 2], "mrope_interleaved": True})
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32, patch_size=16,
                      spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                      deepstack_visual_indexes=[0], initializer_range=initializer_range)
        return Qwen3VLConfig(text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides},
                             **special)
    raise ValueError(f"family must be one of {VLM_FAMILIES}, got {family!r}")


def tiny_vlm_processor(family: str = "qwen2_vl", *, tokenizer=None, min_pixels: int = 28 * 28,
                       max_pixels: int = 112 * 112):
    """The family's real processor (``Qwen2VLProcessor`` / ``Qwen2_5_VLProcessor`` / ``Qwen3VLProcessor``) over
    :func:`tiny_vlm_tokenizer`, with pixel bounds small enough for a CPU test (images resized to at most
    ``max_pixels``) and the family's chat template (:data:`QWEN2_VL_CHAT_TEMPLATE` / :data:`QWEN3_VL_CHAT_TEMPLATE`)."""
    from transformers import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    tokenizer = tiny_vlm_tokenizer() if tokenizer is None else tokenizer
    if family == "qwen3_vl":
        from transformers import Qwen3VLProcessor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
        return Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(size=size, patch_size=16),
                                video_processor=Qwen3VLVideoProcessor(size=size, patch_size=16),
                                tokenizer=tokenizer, chat_template=QWEN3_VL_CHAT_TEMPLATE)
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor as Processor
    elif family == "qwen2_vl":
        from transformers import Qwen2VLProcessor as Processor
    else:
        raise ValueError(f"family must be one of {VLM_FAMILIES}, got {family!r}")
    return Processor(image_processor=Qwen2VLImageProcessor(min_pixels=min_pixels, max_pixels=max_pixels),
                     video_processor=Qwen2VLVideoProcessor(min_pixels=min_pixels, max_pixels=max_pixels),
                     tokenizer=tokenizer, chat_template=QWEN2_VL_CHAT_TEMPLATE)


def tiny_vlm_dir(path, family: str = "qwen2_vl", *, seed: int = 0, max_position_embeddings: int = 4096,
                 config=None, processor=None) -> Path:
    """Write a random-init Qwen-VL ``...ForConditionalGeneration`` and its processor with ``save_pretrained``.

    The directory is what ``AutoModelForImageTextToText`` / ``AutoProcessor.from_pretrained`` (and so
    :func:`rewardzoo.shared.vlm.load_vlm`, and every VLM reward's ``model_path``) read, as a hub checkpoint.
    ``torch.manual_seed(seed)`` is called right before the model is built from ``config`` (default
    :func:`tiny_vlm_config`), so equal seeds give equal weights. Returns the directory.
    """
    import torch
    from transformers import AutoModelForImageTextToText

    processor = tiny_vlm_processor(family) if processor is None else processor
    config = tiny_vlm_config(family, vocab_size=len(processor.tokenizer),
                             max_position_embeddings=max_position_embeddings) if config is None else config
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
