"""A tiny random-init Qwen2.5-Omni thinker (``speech_judge``) and its processor, saved with ``save_pretrained``:
what ``Qwen2_5OmniThinkerForConditionalGeneration`` / ``Qwen2_5OmniProcessor.from_pretrained`` read. Imports: the
standard library and :mod:`.common` at module level; torch and transformers inside the builder.
"""

from __future__ import annotations

from pathlib import Path

from .common import made_dir

#: Qwen2.5-Omni's own special tokens, by the names its processor reads from the tokenizer.
OMNI_TOKENS = {
    "audio_token": "<|AUDIO|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
}
#: The chat template, shortened to text and audio parts (each clip ``<|audio_bos|><|AUDIO|><|audio_eos|>``).
OMNI_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'audio' %}"
    "<|audio_bos|><|AUDIO|><|audio_eos|>{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_omni_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random ``Qwen2_5OmniThinkerForConditionalGeneration`` (audio encoder, vision encoder and
    text model each one layer, 32 wide) and a ``Qwen2_5OmniProcessor`` over the tiny Qwen BPE under ``path``."""
    import torch
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
        Qwen2VLImageProcessor,
        WhisperFeatureExtractor,
    )
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from .vlm import tiny_vlm_tokenizer

    backend = tiny_vlm_tokenizer().backend_tokenizer
    backend.add_special_tokens(list(OMNI_TOKENS.values()))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", extra_special_tokens=OMNI_TOKENS
    )
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in OMNI_TOKENS.items()}
    processor = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(),
        video_processor=Qwen2VLVideoProcessor(),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=OMNI_CHAT_TEMPLATE,
    )
    config = Qwen2_5OmniThinkerConfig(
        audio_config={
            "d_model": 32,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "output_dim": 32,
            "num_mel_bins": 128,
            "n_window": 100,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [0],
        },
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 2, 4]},
            "max_position_embeddings": 4096,
        },
        audio_token_index=ids["audio_token"],
        image_token_index=ids["image_token"],
        video_token_index=ids["video_token"],
        audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"],
        vision_start_token_id=ids["vision_bos_token"],
        vision_end_token_id=ids["vision_eos_token"],
    )
    torch.manual_seed(seed)
    model = Qwen2_5OmniThinkerForConditionalGeneration(config)
    out = made_dir(path)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
