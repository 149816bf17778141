"""EditReward (TIGER-AI-Lab, 2025): a Qwen2.5-VL-7B reward model for instruction-guided image editing.

The released model (``EditReward-Qwen2.5-7B-VL.yaml``: ``rm_head_type: ranknet_multi_head``,
``pooling_strategy: mean``, ``output_dim: 2``, the special reward token) reads each edit twice, once per
dimension: the source image, the edited image, then the dimension's instruction (``INSTRUCTION_EDIT_FOLLOWING``
for head 0, ``INSTRUCTION_EDIT_QUALITY`` for head 1, the edit instruction inserted) and the rating request
ending in ``<|Reward|>``. Each head (``Linear(d, 1024) - ReLU - Dropout - Linear(1024, 16) - ReLU -
Linear(16, 2)``, float32; HPSv3's :class:`~rewardzoo.rewards.vlm.hpsv3.RankNetHead`) reads the last hidden
state at ``<|Reward|>`` and gives ``(mu, log sigma)``; the model's output is the mean of the two heads'
outputs, and the reward is its first entry. Both images are resized as the reference does (qwen-vl-utils'
smart resize, ``min_pixels = max_pixels = 256 * 28 * 28``, PIL bicubic), with the token positions ``0 .. L-1``
its forward gives the decoder (see :mod:`rewardzoo.rewards.models.vlm.reward_models`).

Here the two dimensions of every sample go through the backbone as one batch (the reference runs one forward
per dimension), its rows right-aligned without a padding mask (:func:`~rewardzoo.rewards.models.vlm.reward_models.right_aligned`:
exact for the causal decoder, and the fast causal attention kernel); batching does not change a score (positions
are per row, the reward token is read per row).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...errors import ConfigError, InputError
from ...shared.editing import edit_inputs
from ...shared.media import to_pil_rgb
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.vlm.backbone import PixelBounds, VLMBackbone, VLMQuery
from ..models.vlm.options import RewardModelOptions
from ..models.vlm.reward_models import (
    check_prompt_text,
    read_checkpoint,
    resize_image,
    reward_backbone,
    reward_processor,
    right_aligned,
)
from ..models.weights import resolve_weights_file
from .hpsv3 import RATING_REQUEST, REWARD_TOKEN, RankNetHead

#: ``INSTRUCTION_EDIT_FOLLOWING`` (``EditReward/dataset/prompts.py``), read by head 0; ``{text_prompt}`` = the
#: edit instruction.
INSTRUCTION_FOLLOWING = """
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

#: ``INSTRUCTION_EDIT_QUALITY`` (same file), read by head 1.
VISUAL_QUALITY = """
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

#: The dimensions in head order: (extra name, instruction).
DIMENSIONS = (("instruction_following", INSTRUCTION_FOLLOWING), ("visual_quality", VISUAL_QUALITY))
#: The one template (the two instructions, in head order), keyed as the reference-pairing table names it.
TEMPLATES = {"edit_reward": (INSTRUCTION_FOLLOWING, VISUAL_QUALITY)}
#: The checkpoint files the reference's inferencer looks for in a checkpoint directory, in its order.
CHECKPOINT_FILES = ("model.pth", "model.safetensors")
#: Both images' pixel count (``min_pixels = max_pixels``), as ``prepare_batch`` sets it.


def edit_reward_text(instruction: str, dimension: int) -> str:
    """The text part of the user turn for one dimension (0: instruction following, 1: visual quality)."""
    return DIMENSIONS[dimension][1].format(text_prompt=instruction) + RATING_REQUEST


def checkpoint_file(model_path: str) -> str:
    """The weights file of ``model_path``: a file, or a directory holding ``model.pth`` or ``model.safetensors``
    (the reference's order), or a hub repository holding ``model.safetensors``."""
    path = Path(model_path).expanduser()
    if path.is_dir():
        for name in CHECKPOINT_FILES:
            if (path / name).is_file():
                return str(path / name)
    return resolve_weights_file(model_path, filename=CHECKPOINT_FILES[-1])


class EditReward(PointwiseReward):
    """EditReward: the mean over its two heads of ``mu`` at ``<|Reward|>`` (module docstring).

    Inputs: ``prompt`` (the edit instruction), ``image`` (the edited result) and ``condition_images`` (the
    source first, read by :func:`rewardzoo.shared.editing.edit_inputs`; a mask, if given, is checked and not
    used: the model sees the whole images). Score unbounded (a regression output); extras
    ``instruction_following`` and ``visual_quality`` (each head's ``mu``) and ``log_sigma`` (the mean of the
    heads' second outputs, as the model returns it).

    ``model_path`` (required): the released checkpoint (``model.pth`` / ``model.safetensors``, or the directory
    or hub repository holding it). Options:
    :class:`~rewardzoo.rewards.models.vlm.options.RewardModelOptions` (``base_model`` default
    ``Qwen/Qwen2.5-VL-7B-Instruct``; ``pixels`` for both images).
    """

    inputs = Inputs(("prompt", "image", "condition_images"), images="pil")
    default_base: ClassVar[str] = "Qwen/Qwen2.5-VL-7B-Instruct"
    #: The instructions every sample is read with (fixed: the heads were trained on them).
    template: ClassVar[tuple[str, str]] = TEMPLATES["edit_reward"]

    Options = RewardModelOptions
    options: RewardModelOptions

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        base_model, pixels, attn_implementation = o.base_model, o.pixels, o.attn_implementation
        if model_path is None:
            raise ConfigError(
                "edit_reward: set model_path to the released checkpoint (model.pth / "
                "model.safetensors, or its directory or hub repository)",
                field="model_path",
            )
        self.pixels = pixels
        base = str(base_model or self.default_base)
        checkpoint = checkpoint_file(model_path)
        state = read_checkpoint(checkpoint)
        if isinstance(state.get("model"), dict):  # the reference unwraps a {"model": state_dict} file
            state = state["model"]
        processor, (self.reward_token_id,), config = reward_processor(
            base, [REWARD_TOKEN], family="EditReward", model_type="qwen2_5_vl"
        )
        model, head_state = reward_backbone(
            state,
            processor,
            config,
            checkpoint=checkpoint,
            base=base,
            family="EditReward",
            dtype=self.dtype,
            device=device,
            attn_implementation=attn_implementation,
            head_prefix="rm_heads.",
        )
        names = sorted({key.split(".", 1)[0] for key in head_state})
        if names != ["head_0", "head_1"]:
            raise ConfigError(
                f"'{checkpoint}' has rm_heads {names}; EditReward's ranknet_multi_head has head_0 and head_1",
                field="model_path",
            )
        width = config.text_config.hidden_size
        self.heads = [
            RankNetHead.from_state(
                {k.split(".", 1)[1]: v for k, v in head_state.items() if k.startswith(f"{name}.")}, width, checkpoint
            ).to(device)
            for name in names
        ]
        self.vlm = VLMBackbone(model, processor, source=checkpoint, device=device, dtype=self.dtype)
        for head in self.heads:
            self.hold(head, files=[checkpoint])
        self.hold(self.vlm, files=[checkpoint, base])

    def _resized(self, img: Any, field: str, sample: int) -> Any:
        try:
            return resize_image(to_pil_rgb(img), min_pixels=self.pixels, max_pixels=self.pixels)
        except InputError as exc:
            raise InputError(exc.message, field=field, sample=sample) from None

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any], condition_images: Sequence[Any] | None = None, **_: Any
    ) -> RewardOutput:
        edits = edit_inputs(condition_images)
        n = check_pairs(prompt=prompt, image=image, condition_images=edits)
        prompts = check_prompt_text(prompt, self.vlm.tokenizer)
        pairs = [
            [self._resized(edits[i].source, "condition_images", i), self._resized(image[i], "image", i)]
            for i in range(n)
        ]
        # dimension-major: rows 0..n-1 for head 0, n..2n-1 for head 1
        queries = [
            VLMQuery.of(edit_reward_text(p, d), images=pair)
            for d in range(len(DIMENSIONS))
            for p, pair in zip(prompts, pairs)
        ]
        areas = [img.size[0] * img.size[1] for pair in pairs for img in pair]
        # the images are at their final size already: bounds around them keep the processor from resizing again
        batch = self.vlm.encode(queries, pixels=PixelBounds(min_pixels=min(areas), max_pixels=max(areas)))
        at = batch["input_ids"] == self.reward_token_id
        if not bool((at.sum(dim=1) == 1).all()):
            raise InputError(
                f"expected one {REWARD_TOKEN} token per sample",
                field="prompt",
                sample=int(torch.nonzero(at.sum(dim=1) != 1)[0]) % n,
            )
        moved, positions = right_aligned(batch)
        with torch.no_grad():
            hidden = self.vlm.forward(moved, position_ids=positions, use_cache=False).last_hidden_state
            rows = hidden[moved["input_ids"] == self.reward_token_id].float()
            per_head = torch.stack([head(rows[d * n : (d + 1) * n]) for d, head in enumerate(self.heads)])  # (2, n, 2)
            fused = per_head.mean(dim=0)
        extras = {name: per_head[d, :, 0].cpu() for d, (name, _) in enumerate(DIMENSIONS)}
        extras["log_sigma"] = fused[:, 1].cpu()
        return RewardOutput(fused[:, 0].cpu(), extras=extras)
