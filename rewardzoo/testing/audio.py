"""Tiny audio models on disk, each in its published layout: CLAP (``clap_score``), a WavLM x-vector speaker model
(``speaker_similarity``), Whisper and a wav2vec2 CTC model (``asr``'s two backends) and an audiobox-aesthetics
``AesMultiOutput`` (``audiobox_aesthetics``), the loaders of :mod:`rewardzoo.rewards.audio`.

Tokenizers are written offline (character or byte vocabularies, no merges). Imports: the standard library and
:mod:`.common` at module level; torch, transformers and audiobox_aesthetics inside the builders.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from .common import made_dir


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

    path = made_dir(path)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault("\u0120" + ch, len(vocab))
    vocab.setdefault("\u0120", len(vocab))
    (path / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = RobertaTokenizer(vocab=vocab, merges=[])
    text = dict(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        projection_dim=16,
    )
    audio = dict(
        depths=[1, 1],
        num_attention_heads=[1, 2],
        patch_embeds_hidden_size=8,
        hidden_size=16,
        projection_dim=16,
        window_size=8,
        spec_size=256,
        num_mel_bins=64,
        enable_fusion=False,
    )
    torch.manual_seed(seed)
    ClapModel(ClapConfig(text_config=text, audio_config=audio, projection_dim=16)).eval().save_pretrained(path)
    ClapProcessor(
        feature_extractor=ClapFeatureExtractor(truncation="rand_trunc", padding="repeatpad"), tokenizer=tokenizer
    ).save_pretrained(path)
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

    path = made_dir(path)
    config = WavLMConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="group",
        num_buckets=16,
        max_bucket_distance=64,
        tdnn_dim=(16, 16, 32),
        tdnn_kernel=(3, 3, 1),
        tdnn_dilation=(1, 2, 1),
        xvector_output_dim=8,
        apply_spec_augment=False,
    )
    torch.manual_seed(seed)
    WavLMForXVector(config).eval().save_pretrained(path)
    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=True
    ).save_pretrained(path)
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


WHISPER_SPECIALS = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|de|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nospeech|>",
    "<|notimestamps|>",
)


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
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    path = made_dir(path)
    vocab = {ch: i for i, ch in enumerate(_byte_alphabet())}
    for token in WHISPER_SPECIALS:
        vocab[token] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = WhisperTokenizer(str(path / "vocab.json"), str(path / "merges.txt"))
    tokenizer.add_special_tokens({"additional_special_tokens": list(WHISPER_SPECIALS[1:])})
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=num_mel_bins), tokenizer=tokenizer
    )
    end = vocab["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=len(vocab),
        num_mel_bins=num_mel_bins,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_source_positions=1500,
        max_target_positions=64,
        pad_token_id=end,
        bos_token_id=end,
        eos_token_id=end,
        decoder_start_token_id=vocab["<|startoftranscript|>"],
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
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
    cfg.update(
        encoder_layers=2,
        encoder_embed_dim=16,
        encoder_ffn_embed_dim=32,
        encoder_attention_heads=2,
        conv_feature_layers="[(8,10,5)] + [(8,3,2)] * 4 + [(8,2,2)] * 2",
        conv_pos=16,
        conv_pos_groups=2,
        num_buckets=16,
        max_distance=64,
        encoder_layerdrop=0.0,
        dropout=0.0,
        attention_dropout=0.0,
        dropout_input=0.0,
        dropout_features=0.0,
    )
    return WavLMConfig(cfg)


AUDIOBOX_TARGETS = {
    "CE": {"mean": 5.5, "std": 1.5},
    "CU": {"mean": 6.0, "std": 1.2},
    "PC": {"mean": 3.0, "std": 1.1},
    "PQ": {"mean": 7.0, "std": 1.3},
}


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
    cfg = dict(
        proj_num_layer=1,
        proj_ln=False,
        proj_act_fn="gelu",
        proj_dropout=0.0,
        nth_layer=aes.DEFAULT_AUDIO_CFG.encoder_layers + 1,
        use_weighted_layer_sum=True,
        precision="32",
        normalize_embed=True,
        output_dim=1,
    )
    torch.manual_seed(seed)
    model = aes.AesMultiOutput(**cfg, target_transform=copy.deepcopy(AUDIOBOX_TARGETS)).eval()
    with torch.no_grad():  # distinct layer weights per axis, so the softmax mix matters
        for p in model.layer_weights.values():
            p.copy_(torch.randn_like(p))
    if layout == "hub":
        model.save_pretrained(path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_cfg": cfg,
            "target_transform": copy.deepcopy(AUDIOBOX_TARGETS),
        },
        path,
    )
    return path


def tiny_wav2vec2_ctc_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random-init ``Wav2Vec2ForCTC`` with a ``Wav2Vec2Processor`` (character
    ``Wav2Vec2CTCTokenizer``: ``<pad>`` (the CTC blank), ``<s>``, ``</s>``, ``<unk>``, ``|`` (word
    delimiter), a-z and the apostrophe; a 16 kHz feature extractor with attention masks); return the
    directory. Two conv layers (one frame per 20 samples), width 16, one transformer layer.
    ``torch.manual_seed(seed)`` precedes the model.
    """
    import torch
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    path = made_dir(path)
    vocab = {tok: i for i, tok in enumerate(["<pad>", "<s>", "</s>", "<unk>", "|", *"abcdefghijklmnopqrstuvwxyz'"])}
    (path / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(path / "vocab.json"))
    extractor = Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    config = Wav2Vec2Config(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        pad_token_id=0,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        apply_spec_augment=False,
    )
    torch.manual_seed(seed)
    Wav2Vec2ForCTC(config).eval().save_pretrained(path)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(path)
    return path
