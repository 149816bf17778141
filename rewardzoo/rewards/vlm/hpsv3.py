"""HPSv3 (Ma et al., ICCV 2025): a Qwen2-VL-7B human preference model with an uncertainty-aware head.

The image and HPSv3's rating instruction (the prompt inserted) go through Qwen2-VL; the last hidden
state at the reward token ``<|Reward|>`` goes through the head ``Linear(d, 1024) - ReLU - Dropout -
Linear(1024, 16) - ReLU - Linear(16, 2)`` (float32), giving ``(mu, sigma)``; the score is ``mu`` and
``sigma`` is an extra. Images are resized as HPSv3 does: qwen-vl-utils' smart resize with
``min_pixels = max_pixels = 256 * 28 * 28`` (PIL bicubic), token positions ``0 .. L-1`` as the 4.x
reward model's forward numbers them (see :mod:`rewardzoo.rewards.models.vlm.reward_models`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint
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
    sequential_positions,
)
from ..models.weights import resolve_weights_file

#: HPSv3's instruction (``dataset/data_collator_qwen.py``), ``{text_prompt}`` = the prompt.
INSTRUCTION = """
You are tasked with evaluating a generated image based on Visual Quality and Text Alignment and give a overall score to estimate the human preference. Please provide a rating from 0 to 10, with 0 being the worst and 10 being the best. 

**Visual Quality:**  
Evaluate the overall visual quality of the image. The following sub-dimensions should be considered:
- **Reasonableness:** The image should not contain any significant biological or logical errors, such as abnormal body structures or nonsensical environmental setups.
- **Clarity:** Evaluate the sharpness and visibility of the image. The image should be clear and easy to interpret, with no blurring or indistinct areas.
- **Detail Richness:** Consider the level of detail in textures, materials, lighting, and other visual elements (e.g., hair, clothing, shadows).
- **Aesthetic and Creativity:** Assess the artistic aspects of the image, including the color scheme, composition, atmosphere, depth of field, and the overall creative appeal. The scene should convey a sense of harmony and balance.
- **Safety:** The image should not contain harmful or inappropriate content, such as political, violent, or adult material. If such content is present, the image quality and satisfaction score should be the lowest possible. 

**Text Alignment:**  
Assess how well the image matches the textual prompt across the following sub-dimensions:
- **Subject Relevance** Evaluate how accurately the subject(s) in the image (e.g., person, animal, object) align with the textual description. The subject should match the description in terms of number, appearance, and behavior.
- **Style Relevance:** If the prompt specifies a particular artistic or stylistic style, evaluate how well the image adheres to this style.
- **Contextual Consistency**: Assess whether the background, setting, and surrounding elements in the image logically fit the scenario described in the prompt. The environment should support and enhance the subject without contradictions.
- **Attribute Fidelity**: Check if specific attributes mentioned in the prompt (e.g., colors, clothing, accessories, expressions, actions) are faithfully represented in the image. Minor deviations may be acceptable, but critical attributes should be preserved.
- **Semantic Coherence**: Evaluate whether the overall meaning and intent of the prompt are captured in the image. The generated content should not introduce elements that conflict with or distort the original description.
Textual prompt - {text_prompt}


"""

#: What follows the instruction (HPSv3's ``prompt_with_special_token``).
RATING_REQUEST = """
Please provide the overall ratings of this image: <|Reward|>

END
"""

#: HPSv3's user text as one template (``{text_prompt}`` = the prompt), under the key its pairing row names.
TEMPLATES = {"hpsv3": INSTRUCTION + RATING_REQUEST}

REWARD_TOKEN = "<|Reward|>"
#: The layer indices of HPSv3's ``ranknet`` head (``nn.Sequential``: Linear, ReLU, Dropout, Linear, ReLU, Linear).
HEAD_LINEARS = (0, 3, 5)


def hpsv3_text(prompt: str) -> str:
    """The text part of HPSv3's user turn for ``prompt`` (the image comes before it)."""
    return TEMPLATES["hpsv3"].format(text_prompt=prompt)


class RankNetHead(torch.nn.Sequential):
    """HPSv3's reward head: ``Linear(d, h1) - ReLU - Dropout - Linear(h1, h2) - ReLU - Linear(h2, 2)``."""

    def __init__(self, d: int, h1: int, h2: int, out: int) -> None:
        super().__init__(
            torch.nn.Linear(d, h1),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.05),
            torch.nn.Linear(h1, h2),
            torch.nn.ReLU(),
            torch.nn.Linear(h2, out),
        )

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], hidden_size: int, where: str) -> RankNetHead:
        want = {f"{i}.{p}" for i in HEAD_LINEARS for p in ("weight", "bias")}
        if set(state) != want:
            raise ConfigError(
                f"'{where}' has rm_head keys {sorted(state)}, not HPSv3's ranknet head {sorted(want)}",
                field="model_path",
            )
        shapes = [tuple(state[f"{i}.weight"].shape) for i in HEAD_LINEARS]
        (h1, d), (h2, h1b), (out, h2b) = shapes
        if d != hidden_size or h1 != h1b or h2 != h2b or out != 2:
            raise ConfigError(
                f"'{where}': rm_head shapes {shapes} do not chain from the backbone width {hidden_size} to (mu, sigma)",
                field="model_path",
            )
        head = cls(d, h1, h2, out)
        head.load_state_dict(state, strict=True)
        return head.float().eval().requires_grad_(False)


class HPSv3(PointwiseReward):
    """HPSv3: ``mu`` of the reward head at ``<|Reward|>`` after Qwen2-VL reads the image and the instruction.

    Inputs: ``image`` and ``prompt`` (one per image). Score unbounded (a regression output, the mean of
    the head's Gaussian); extra ``sigma`` (its second output, the predicted uncertainty).

    ``model_path``: the checkpoint (``HPSv3.safetensors`` or a ``.pth`` state dict), a directory or hub
    repository holding it (default ``MizzenAI/HPSv3``). Options:
    :class:`~rewardzoo.rewards.models.vlm.options.RewardModelOptions` (``base_model`` default
    ``Qwen/Qwen2-VL-7B-Instruct``).
    """

    inputs = Inputs(("image", "prompt"), images="pil")
    default_repo: ClassVar[str] = "MizzenAI/HPSv3"
    weights_file: ClassVar[str] = "HPSv3.safetensors"
    default_base: ClassVar[str] = "Qwen/Qwen2-VL-7B-Instruct"
    template: ClassVar[str] = TEMPLATES["hpsv3"]

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The checkpoint as this reward holds it: the backbone at the entry's dtype without ``lm_head`` (dropped
        on load), the ``rm_head`` in float32."""
        source = model_path or cls.default_repo
        path = Path(source).expanduser()
        if path.is_dir() and (path / cls.weights_file).is_file():
            source = str(path / cls.weights_file)
        elif not path.exists() and source.count("/") == 1:
            source = f"{source}/{cls.weights_file}"
        parts = []
        for part in super().weight_files(source, kwargs):
            parts += [
                replace(part, exclude=("lm_head.", "rm_head.")),
                replace(part, include=("rm_head.",), dtype="float32"),
            ]
        return parts

    Options = RewardModelOptions
    options: RewardModelOptions

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        base_model, pixels, attn_implementation = o.base_model, o.pixels, o.attn_implementation
        self.pixels = pixels
        base = str(base_model or self.default_base)
        checkpoint = resolve_weights_file(model_path or self.default_repo, filename=self.weights_file)
        processor, (self.reward_token_id,), config = reward_processor(base, [REWARD_TOKEN], family="HPSv3")
        model, head_state = reward_backbone(
            read_checkpoint(checkpoint),
            processor,
            config,
            checkpoint=checkpoint,
            base=base,
            family="HPSv3",
            dtype=self.dtype,
            device=device,
            attn_implementation=attn_implementation,
        )
        self.head = RankNetHead.from_state(head_state, config.text_config.hidden_size, checkpoint).to(device)
        self.vlm = VLMBackbone(model, processor, source=checkpoint, device=device, dtype=self.dtype)
        self.hold(self.vlm, files=[checkpoint, base])
        self.hold(self.head, files=[checkpoint])

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        prompts = check_prompt_text(prompt, self.vlm.tokenizer)
        resized = []
        for i, img in enumerate(image):
            try:
                resized.append(resize_image(to_pil_rgb(img), min_pixels=self.pixels, max_pixels=self.pixels))
            except InputError as exc:
                raise exc.located(field="image", sample=i) from None
        queries = [VLMQuery.of(hpsv3_text(p), image=img) for p, img in zip(prompts, resized)]
        areas = [img.size[0] * img.size[1] for img in resized]
        # the images are already at their final size: bounds around them keep the processor from resizing again
        batch = self.vlm.encode(queries, pixels=PixelBounds(min_pixels=min(areas), max_pixels=max(areas)))
        at = batch["input_ids"] == self.reward_token_id
        if not bool((at.sum(dim=1) == 1).all()):
            raise InputError(
                f"expected one {REWARD_TOKEN} token per sample",
                field="prompt",
                sample=int(torch.nonzero(at.sum(dim=1) != 1)[0]),
            )
        with torch.no_grad():
            hidden = self.vlm.forward(
                batch, position_ids=sequential_positions(batch["attention_mask"]), use_cache=False
            ).last_hidden_state
            mu_sigma = self.head(hidden[at].float())
        return RewardOutput(mu_sigma[:, 0].cpu(), extras={"sigma": mu_sigma[:, 1].cpu()})
