"""LLaVA-OneVision on the VLM layer: an original LLaVA-NeXT checkpoint mapped on load, checked against
transformers' own conversion, and the layer's prompts, token ids and answers against transformers called
directly on the same weights in its own layout (the tiny build of :mod:`rewardzoo.testing.llava`)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoProcessor, LlavaOnevisionForConditionalGeneration

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.vlm.backbone import VLMQuery, load_vlm
from rewardzoo.testing import tiny_llava_onevision_dirs

# transformers src/transformers/models/llava_onevision/convert_llava_onevision_weights_to_hf.py
# @ 01080c629600d4ff3121446bb4f4a2e240c2cf41: KEYS_TO_MODIFY_MAPPING, applied in order to every key that holds
# the pattern (convert_state_dict_to_hf); it writes transformers' earlier layout, which from_pretrained renames.
KEYS_TO_MODIFY_MAPPING = {
    "model.vision_tower.": "",
    "model.mm_projector": "multi_modal_projector",
    "model": "model.model",
    "vision_model.model": "vision_model",
    "lm_head": "language_model.lm_head",
    "model.model": "language_model.model",
    "multi_modal_projector.0": "multi_modal_projector.linear_1",
    "multi_modal_projector.2": "multi_modal_projector.linear_2",
    "language_model.model.image_newline": "image_newline",
}


def script_key(key: str) -> str:
    for old, new in KEYS_TO_MODIFY_MAPPING.items():
        if old in key:
            key = key.replace(old, new)
    return key


def llava_qwen_prompt(question: str, system: str = "You are a helpful assistant.") -> str:
    """LLaVA-NeXT llava/conversation.py @ 19ddd2e3d3093691cb9affe2bd506942685579b8, ``conv_templates["qwen_1_5"]``
    (``conv_qwen``: system ``"<|im_start|>system\\n" + system``, roles ``<|im_start|>user`` / ``assistant``,
    sep ``<|im_end|>``) with the question and an empty assistant turn, through ``get_prompt``'s CHATML branch."""
    sep = "<|im_end|>"
    ret = "<|im_start|>system\n" + system + sep + "\n"
    ret += "<|im_start|>user" + "\n" + question + sep + "\n"
    return ret + "<|im_start|>assistant" + "\n"


@pytest.fixture(scope="module")
def llava_dirs(tmp_path_factory):
    return {k: str(v) for k, v in tiny_llava_onevision_dirs(tmp_path_factory.mktemp("llava"), seed=3).items()}


@pytest.fixture(scope="module")
def direct(llava_dirs):
    """transformers alone on the transformers-layout directory: (model, processor)."""
    model = LlavaOnevisionForConditionalGeneration.from_pretrained(llava_dirs["transformers"]).eval()
    return model, AutoProcessor.from_pretrained(llava_dirs["transformers"])


def direct_answer(direct, prompt: str, image, max_new_tokens: int) -> tuple[list[int], str]:
    model, processor = direct
    batch = processor(text=[prompt], images=[image], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False)
    new = out[0, batch["input_ids"].shape[1] :]
    return batch["input_ids"][0].tolist(), processor.decode(new, skip_special_tokens=True).strip()


def test_the_original_layout_loads_as_the_conversion_script_and_transformers_map_it(llava_dirs, tmp_path):
    original = load_file(f"{llava_dirs['llava']}/model.safetensors")
    assert "model.vision_tower.vision_tower.vision_model.post_layernorm.weight" in original  # LLaVA-NeXT's names
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    shutil.copy(f"{llava_dirs['transformers']}/config.json", legacy / "config.json")
    save_file({script_key(k): v for k, v in original.items()}, str(legacy / "model.safetensors"))
    want = LlavaOnevisionForConditionalGeneration.from_pretrained(str(legacy)).state_dict()
    got = load_vlm(llava_dirs["llava"], cache=False).model.state_dict()
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)
    saved = LlavaOnevisionForConditionalGeneration.from_pretrained(llava_dirs["transformers"]).state_dict()
    assert all(torch.equal(got[k], saved[k]) for k in saved)  # the weights the tiny build started from


def test_the_tower_loses_its_last_layer_and_the_tokenizer_gains_the_image_token(llava_dirs):
    backbone = load_vlm(llava_dirs["llava"], cache=False)
    tower = json.loads(open(f"{llava_dirs['llava']}/siglip/config.json").read())
    config = backbone.model.config
    assert config.vision_config.num_hidden_layers == tower["num_hidden_layers"] - 1
    assert (config.vision_feature_layer, config.vision_feature_select_strategy) == (-1, "full")
    assert backbone.tokenizer.convert_tokens_to_ids("<image>") == config.image_token_id
    assert backbone.model_type == "llava_onevision"


def test_prompts_token_ids_and_answers_match_transformers_called_directly(llava_dirs, direct, images):
    backbone = load_vlm(llava_dirs["llava"])
    queries = [VLMQuery((img, f"Describe image {i}: a cat on a mat.")) for i, img in enumerate(images[:3])]
    batch = backbone.encode(queries)
    expected = []
    for row, (query, img) in enumerate(zip(queries, images)):
        prompt = llava_qwen_prompt("<image>\n" + query.content[1])
        assert backbone.render(query) == prompt
        ids, answer = direct_answer(direct, prompt, img, max_new_tokens=8)
        assert batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist() == ids  # left padding
        expected.append(answer)
    assert backbone.generate(queries, max_new_tokens=8) == expected
    assert len(set(expected)) > 1  # the answers depend on the input
    assert load_vlm(llava_dirs["transformers"]).generate(queries, max_new_tokens=8) == expected  # its own layout too


def test_a_system_prompt_replaces_the_default_one(llava_dirs):
    backbone = load_vlm(llava_dirs["llava"])
    query = VLMQuery(("Hello",), system="Judge carefully.")
    assert backbone.render(query) == llava_qwen_prompt("Hello", system="Judge carefully.")


def test_a_checkpoint_that_does_not_fit_is_a_config_error(llava_dirs, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(llava_dirs["llava"], broken)
    state = load_file(str(broken / "model.safetensors"))
    state["model.mm_projector.4.weight"] = torch.zeros(2, 2)
    save_file(state, str(broken / "model.safetensors"))
    with pytest.raises(
        ConfigError,
        match=r"does not fit LLaVA-OneVision: missing \[\], unexpected "
        r"\['model.language_model.mm_projector.4.weight'\]",
    ):
        load_vlm(str(broken), cache=False)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "mm_projector_type": "linear"}))
    with pytest.raises(ConfigError, match="mm_projector_type: 'linear'"):
        load_vlm(str(broken), cache=False)


def test_pixel_bounds_of_the_qwen_resize_are_refused_for_llava(llava_dirs):
    from rewardzoo.rewards.models.vlm.backend import build_backend

    with pytest.raises(ConfigError, match="LLaVA-OneVision .* tiles each image"):
        build_backend("judge", model_path=llava_dirs["llava"], device="cpu", dtype="float32", max_pixels=4096)
