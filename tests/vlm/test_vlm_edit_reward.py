"""edit_reward: EditReward's published checkpoint layout onto a tiny Qwen2.5-VL, scores against a step-by-step
re-computation of the reference's forward.

The fixture (:func:`rewardzoo.testing.tiny_edit_reward_dirs`) writes what EditReward publishes, at toy size: a
Qwen2.5-VL base directory and ``model.safetensors`` with transformers-4.57 key names and ``rm_heads.head_{0,1}``.
The reference below follows TIGER-AI-Lab/EditReward edb027e (``EditReward/inference_edit.py``
``EditRewardInferencer.prepare_batch`` / ``reward`` and ``EditReward/model/qwen2_5_vl_trainer.py``
``Qwen2_5_VLRewardModelBT_MultiHead``): per dimension one batch of [source, edited, instruction text], the model's
hidden state at ``<|Reward|>``, that dimension's head applied by hand, the heads' outputs averaged
(``pooling_strategy: mean``), the reward ``logits[:, 0]``. It runs one pair at a time (the reference's loop).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.vlm import edit_reward as er
from rewardzoo.testing import EDIT_REWARD_HEADS, tiny_edit_reward_dirs

# EditReward's vendored fetch_image resizes PIL images as qwen-vl-utils does (HPSv3's test writes it from the source)
from .test_vlm_hpsv3 import _qwen_vl_utils_resize

PIXELS = 112 * 112  # the test's min = max pixels (EditReward's own: 256 * 28 * 28)
SIZES = [(64, 80), (100, 60), (56, 56), (90, 120)]  # (h, w): mixed sizes, one batch
PROMPTS = ["add a cat on the mat", "make the car red", "remove the dog", "turn day into night"]

# TIGER-AI-Lab/EditReward edb027edde6080b8a9521ef8e87049b3797f8374, EditReward/dataset/prompts.py
# (INSTRUCTION_EDIT_FOLLOWING, INSTRUCTION_EDIT_QUALITY) and EditReward/dataset/data_collator_qwen_edit.py
# (prompt_with_special_token), quoted as they stand there.
REF_FOLLOWING = """
You are tasked with evaluating an edited image **in comparison with the original source image** based on **Instruction Following & Semantic Fidelity**, and assigning a score from 1 to 4, with 1 being the worst and 4 being the best.  
This dimension focuses on how accurately, completely, and exclusively the model executed the given text instruction.

**Inputs Provided:**  
- Source Image (before editing)  
- Edited Image (after applying the instruction)  
- Text Instruction  

**Sub-Dimensions to Evaluate:**

- **Semantic Accuracy:**  
  Assess whether the edited content accurately captures the semantics of the instruction. The edited result should precisely match the intended meaning. For example, if the instruction is "replace apples with oranges," the object must clearly be oranges, not other fruits.

- **Completeness of Editing:**  
  Check whether **all parts** of the instruction are fully executed. For multi-step edits (e.g., "replace a red car with a blue bicycle"), both the color change and the object replacement must be done without omissions.

- **Exclusivity of Edit (No Over-Editing):**  
  Ensure that only the requested parts are changed. The rest of the image (as seen in the source) should remain unaltered. For example, if the instruction only involves replacing an object, the background, lighting, and unrelated objects should not be unnecessarily modified.

**Scoring Criteria:**
- **4 (Very Good):** Perfectly accurate, complete, and exclusive execution of the instruction.  
- **3 (Relatively Good):** Largely correct, but with minor omissions or slight over-editing.  
- **2 (Relatively Poor):** Major misinterpretation, incomplete edits, or noticeable unintended changes.  
- **1 (Very Poor):** Instruction ignored or completely wrong execution.

Text instruction - {text_prompt}
"""
REF_QUALITY = """
You are tasked with evaluating an edited image **in comparison with the original source image** based on **Visual Quality & Realism**, and assigning a score from 1 to 4, with 1 being the worst and 4 being the best.  
This dimension focuses on how realistic, artifact-free, and aesthetically appealing the edited image is, while remaining consistent with the source image.

**Inputs Provided:**  
- Source Image (before editing)  
- Edited Image (after applying the instruction)  
- Text Instruction  

**Sub-Dimensions to Evaluate:**

- **Plausibility & Physical Consistency:**  
  Check whether the edit aligns with the laws of physics and the scene context. Lighting, shadows, reflections, perspective, size, and interactions with the environment should all appear natural compared to the source image.

- **Artifact-Free Quality:**  
  Look for technical flaws such as blur, distortions, pixel misalignment, unnatural textures, or seams around edited regions. High-quality results should be free from such visible artifacts.

- **Aesthetic Quality:**  
  Evaluate the overall harmony and visual appeal. The image should look natural, balanced, and pleasant. Colors, composition, and atmosphere should enhance the image rather than degrade it.

**Scoring Criteria:**
- **4 (Very Good):** Perfectly realistic, artifact-free, seamless, and aesthetically pleasing.  
- **3 (Relatively Good):** Mostly realistic and clean, with only minor flaws that do not significantly distract.  
- **2 (Relatively Poor):** Noticeable physical inconsistencies or visible artifacts that make the edit unnatural.  
- **1 (Very Poor):** Severe artifacts, incoherent composition, or visually unusable result.

Text instruction - {text_prompt}
"""
REF_WITH_SPECIAL_TOKEN = """
Please provide the overall ratings of this image: <|Reward|>

END
"""


def test_templates_equal_the_reference_source():
    assert er.INSTRUCTION_FOLLOWING == REF_FOLLOWING
    assert er.VISUAL_QUALITY == REF_QUALITY
    assert er.RATING_REQUEST == REF_WITH_SPECIAL_TOKEN
    assert er.edit_reward_text("x", 0) == REF_FOLLOWING.format(text_prompt="x") + REF_WITH_SPECIAL_TOKEN
    assert er.edit_reward_text("x", 1) == REF_QUALITY.format(text_prompt="x") + REF_WITH_SPECIAL_TOKEN


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(base dir, checkpoint dir, reference model, reference heads, processor with <|Reward|>)."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoProcessor, Qwen2_5_VLForConditionalGeneration

    base, ckpt = tiny_edit_reward_dirs(tmp_path_factory.mktemp("edit_reward"), seed=3)
    state = load_file(str(ckpt / "model.safetensors"))
    processor = AutoProcessor.from_pretrained(base)
    processor.tokenizer.add_special_tokens({"additional_special_tokens": ["<|Reward|>"]})
    config = AutoConfig.from_pretrained(base)
    config.text_config.vocab_size = len(processor.tokenizer)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.load_state_dict({k: v for k, v in state.items() if not k.startswith("rm_heads.")}, strict=True)
    heads = {
        name: {k[len(f"rm_heads.{name}.") :]: v for k, v in state.items() if k.startswith(f"rm_heads.{name}.")}
        for name in EDIT_REWARD_HEADS
    }
    return base, ckpt, model, heads, processor


@pytest.fixture(scope="module")
def reward(published):
    base, ckpt, *_ = published
    return er.EditReward(model_path=str(ckpt), base_model=str(base), pixels=PIXELS)


def _images(seed, sizes=SIZES):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]


def _head(state, x):
    """The ``ranknet`` head by hand: Linear-ReLU-(Dropout)-Linear-ReLU-Linear, entries 0, 3, 5."""
    x = torch.relu(x @ state["0.weight"].T + state["0.bias"])
    x = torch.relu(x @ state["3.weight"].T + state["3.bias"])
    return x @ state["5.weight"].T + state["5.bias"]


def _reference(published, source, edited, prompt):
    """(mean of the heads' (mu, log sigma), per-head mu) for one pair, as the reference computes it."""
    _, _, model, heads, processor = published
    instructions = (REF_FOLLOWING, REF_QUALITY)
    outs = []
    for name, instruction in zip(EDIT_REWARD_HEADS, instructions):
        text = instruction.format(text_prompt=prompt) + REF_WITH_SPECIAL_TOKEN
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": text}]}]
        rendered = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        batch = processor(
            text=[rendered],
            images=[_qwen_vl_utils_resize(source, PIXELS), _qwen_vl_utils_resize(edited, PIXELS)],
            return_tensors="pt",
        )
        # transformers 4.57's Qwen2_5_VLModel, called with inputs_embeds and no position_ids, numbers the tokens
        # from the attention mask's running count: 0 .. L-1 for one unpadded sample
        positions = torch.arange(batch["input_ids"].shape[1])[None]
        with torch.no_grad():
            hidden = model.model(**batch, position_ids=positions).last_hidden_state[0]
        at = (batch["input_ids"][0] == processor.tokenizer.convert_tokens_to_ids("<|Reward|>")).nonzero().flatten()
        assert len(at) == 1
        outs.append(_head(heads[name], hidden[at[0]].float()))
    stacked = torch.stack(outs)
    fused = stacked.mean(dim=0)
    return float(fused[0]), float(fused[1]), [float(o[0]) for o in outs]


def test_matches_the_reference_one_pair_at_a_time(reward, published):
    sources, edited = _images(0), _images(1)
    out = reward(prompt=PROMPTS, image=edited, condition_images=[[s] for s in sources])
    expected = [_reference(published, s, e, p) for s, e, p in zip(sources, edited, PROMPTS)]
    np.testing.assert_allclose(np.asarray(out.rewards), [e[0] for e in expected], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["log_sigma"]), [e[1] for e in expected], atol=1e-5, rtol=0)
    for d, name in enumerate(("instruction_following", "visual_quality")):
        np.testing.assert_allclose(np.asarray(out.extras[name]), [e[2][d] for e in expected], atol=1e-5, rtol=0)
    assert np.ptp([e[0] for e in expected]) > 1e-4  # the inputs give different scores


def test_batched_equals_one_at_a_time_and_the_mask_is_not_read(reward):
    sources, edited = _images(2), _images(3)
    batched = np.asarray(reward(prompt=PROMPTS, image=edited, condition_images=[[s] for s in sources]).rewards)
    single = [
        float(reward(prompt=[p], image=[e], condition_images=[[s]]).rewards[0])
        for s, e, p in zip(sources, edited, PROMPTS)
    ]
    np.testing.assert_allclose(batched, single, atol=1e-5, rtol=0)
    masks = [[s, Image.new("L", s.size, 255)] for s in sources]
    with_mask = np.asarray(reward(prompt=PROMPTS, image=edited, condition_images=masks).rewards)
    np.testing.assert_allclose(with_mask, batched, atol=1e-6, rtol=0)


def test_the_source_matters(reward):
    sources, edited = _images(4, SIZES[:2]), _images(5, SIZES[:2])
    a = np.asarray(reward(prompt=PROMPTS[:2], image=edited, condition_images=[[s] for s in sources]).rewards)
    b = np.asarray(reward(prompt=PROMPTS[:2], image=edited, condition_images=[[e] for e in edited]).rewards)
    assert np.abs(a - b).max() > 1e-5


def test_bad_inputs_are_typed_errors_naming_the_sample(reward):
    sources, edited = _images(6, SIZES[:3]), _images(7, SIZES[:3])
    with pytest.raises(InputError) as info:
        reward(prompt=PROMPTS[:3], image=edited, condition_images=None)
    assert info.value.field == "condition_images"
    with pytest.raises(InputError) as info:
        reward(prompt=PROMPTS[:3], image=edited, condition_images=[[sources[0]], [], [sources[2]]])
    assert (info.value.field, info.value.sample) == ("condition_images", 1)
    wrong = Image.new("L", (sources[2].size[0] + 1, sources[2].size[1]), 255)
    with pytest.raises(InputError) as info:
        reward(prompt=PROMPTS[:3], image=edited, condition_images=[[sources[0]], [sources[1]], [sources[2], wrong]])
    assert (info.value.field, info.value.sample) == ("condition_images", 2)
    assert "same size" in info.value.message
    with pytest.raises(InputError) as info:
        reward(prompt=["ok", "a <|Reward|> b", "ok"], image=edited, condition_images=[[s] for s in sources])
    assert (info.value.field, info.value.sample) == ("prompt", 1)


def test_checkpoint_problems_are_config_errors(published, tmp_path):
    from safetensors.torch import load_file, save_file

    base, ckpt, *_ = published
    with pytest.raises(ConfigError) as info:
        er.EditReward(model_path=None, base_model=str(base))
    assert info.value.field == "model_path"
    state = load_file(str(ckpt / "model.safetensors"))
    one_head = {k: v for k, v in state.items() if not k.startswith("rm_heads.head_1.")}
    save_file(one_head, str(tmp_path / "model.safetensors"))
    with pytest.raises(ConfigError, match="head_0 and head_1"):
        er.EditReward(model_path=str(tmp_path), base_model=str(base), pixels=PIXELS)


def test_pairwise_form_is_the_winrate_of_the_scores(published):
    """The reference's pairwise inference scores both edits and compares: pairwise_winrate over edit_reward."""
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.core.processor import RewardProcessor

    base, ckpt, *_ = published
    spec = {
        "reward_model": "edit_reward",
        "model_path": str(ckpt),
        "kwargs": {"base_model": str(base), "pixels": PIXELS},
    }
    proc = RewardProcessor(
        [{"name": "point", **spec}, {"name": "win", "reward_model": "pairwise_winrate", "kwargs": {"base": spec}}],
        RewardLoader(),
    )
    sources, edited = _images(8, [(64, 64)] * 4), _images(9, [(64, 64)] * 4)
    samples = [
        {"prompt": "add a hat", "image": e, "condition_images": [sources[i // 2]], "group_id": i // 2}
        for i, e in enumerate(edited)
    ]
    res = proc(samples)
    point = np.asarray(res.rewards["point"], dtype=np.float64)
    expected = [float(point[i] > point[i ^ 1]) + 0.5 * float(point[i] == point[i ^ 1]) for i in range(4)]
    np.testing.assert_allclose(np.asarray(res.rewards["win"], dtype=np.float64), expected)
