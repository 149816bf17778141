"""HPSv3 (Ma et al., ICCV 2025): a Qwen2-VL-7B human preference model with an uncertainty-aware head; and HPSv3++
(its capability- and RL-iteration-aware successor on Qwen3-VL-8B), ``version: v3++``.

The image and HPSv3's rating instruction (the prompt inserted) go through Qwen2-VL; the last hidden
state at the reward token ``<|Reward|>`` goes through the head ``Linear(d, 1024) - ReLU - Dropout -
Linear(1024, 16) - ReLU - Linear(16, 2)`` (float32), giving ``(mu, sigma)``; the score is ``mu`` and
``sigma`` is an extra. Images are resized as HPSv3 does: qwen-vl-utils' smart resize with
``min_pixels = max_pixels = 256 * 28 * 28`` (PIL bicubic), token positions ``0 .. L-1`` as the 4.x
reward model's forward numbers them (see :mod:`rewardzoo.rewards.models.vlm.reward_models`).

HPSv3++ (PlantPotatoOnMoon/HPSv3-PlusPlus 7bdbebc, ``hpsv3/model/qwen3vl_rm.py``
``Qwen3VLRewardModelFiLMHybrid``, ``hpsv3/inference.py``): the same resize (factor 28), then the Qwen3-VL
processor's own (factor 32, its default bounds); its instruction without the text-alignment block; Qwen3-VL's
M-RoPE positions; the hidden state ``h`` at ``<|Reward|>`` is conditioned before the head: the capability
``c = sigmoid(w_o . (W_p h + b_p) + b_o)`` (``CapabilityEncoder`` over one image: its attention pool over one
member is that member), ``e = cond_encoder([c, t])`` (``t`` the RL iteration in [0, 1], ``rl_iteration``),
``(gamma, beta) = film_gen(e)``, ``mu, sigma = head(h * (1 + gamma) + beta)`` in float32. The extras add
``capability``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

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
from ..options import Field, Number

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

#: HPSv3++'s instruction (7bdbebc ``hpsv3/dataset/data_collator_qwen.py``): HPSv3's without its text-alignment block.
INSTRUCTION_PLUSPLUS = (
    INSTRUCTION[: INSTRUCTION.index("\n**Text Alignment:**")] + "Textual prompt - {text_prompt}\n\n\n"
)

#: What follows the instruction (HPSv3's ``prompt_with_special_token``).
RATING_REQUEST = """
Please provide the overall ratings of this image: <|Reward|>

END
"""

#: HPSv3's user text as one template (``{text_prompt}`` = the prompt), under the key its pairing row names.
TEMPLATES = {"hpsv3": INSTRUCTION + RATING_REQUEST, "hpsv3++": INSTRUCTION_PLUSPLUS + RATING_REQUEST}

REWARD_TOKEN = "<|Reward|>"
#: The layer indices of HPSv3's ``ranknet`` head (``nn.Sequential``: Linear, ReLU, Dropout, Linear, ReLU, Linear).
HEAD_LINEARS = (0, 3, 5)


def hpsv3_text(prompt: str, version: str = "v3") -> str:
    """The text part of HPSv3's (``v3++``: HPSv3++'s) user turn for ``prompt`` (the image comes before it)."""
    return TEMPLATES["hpsv3" if version == "v3" else "hpsv3++"].format(text_prompt=prompt)


@dataclass(frozen=True)
class Version:
    """What one published HPSv3 generation is: its checkpoint, base model, backbone family and conditioning."""

    repo: str
    weights_file: str
    base: str
    model_type: str
    film: bool  # HPSv3++'s capability and RL-iteration conditioning before the head


VERSIONS = {
    "v3": Version("MizzenAI/HPSv3", "HPSv3.safetensors", "Qwen/Qwen2-VL-7B-Instruct", "qwen2_vl", False),
    "v3++": Version("Junjun2333/HPSv3-PlusPlus", "hpsv3++.pth", "Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl", True),
}
#: HPSv3++'s conditioning modules beside the backbone and head (``cap_encoder`` at the backbone's precision, as
#: the reference's ``model.to(bfloat16)`` leaves it; the others float32).
FILM_PARTS = ("cap_encoder.", "cond_encoder.", "film_gen.")


class Conditioning(torch.nn.Module):
    """HPSv3++'s FiLM hybrid conditioning (module docstring), built from the checkpoint's tensors."""

    def __init__(self, hidden: int, cond_dim: int) -> None:
        super().__init__()
        self.cap_encoder = torch.nn.ModuleDict(
            {
                "proj": torch.nn.Linear(hidden, cond_dim),
                "pool_attn": torch.nn.Linear(cond_dim, 1),
                "out_proj": torch.nn.Linear(cond_dim, 1),
            }
        )
        self.cond_encoder = torch.nn.Sequential(
            torch.nn.Linear(2, cond_dim), torch.nn.GELU(), torch.nn.Linear(cond_dim, cond_dim)
        )
        self.film_gen = torch.nn.Sequential(
            torch.nn.Linear(cond_dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2 * hidden)
        )

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], hidden: int, dtype: torch.dtype, where: str) -> Conditioning:
        proj = state.get("cap_encoder.proj.weight")
        if proj is None or proj.dim() != 2 or int(proj.shape[1]) != hidden:
            raise ConfigError(
                f"'{where}' has no HPSv3++ capability encoder of width {hidden} (cap_encoder.proj.weight: "
                f"{None if proj is None else tuple(proj.shape)})",
                field="model_path",
            )
        module = cls(hidden, int(proj.shape[0]))
        want = set(module.state_dict())
        if set(state) != want:
            raise ConfigError(
                f"'{where}' has conditioning keys {sorted(set(state) ^ want)[:4]} beyond or missing from HPSv3++'s "
                "cap_encoder / cond_encoder / film_gen",
                field="model_path",
            )
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ConfigError(f"'{where}': HPSv3++'s conditioning does not load: {exc}", field="model_path") from None
        module.float().eval().requires_grad_(False)
        module.cap_encoder.to(dtype)
        return module

    def forward(self, pooled: torch.Tensor, iteration: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(conditioned float32 features, capability) of pooled hidden states (B, d), each image on its own."""
        cap = self.cap_encoder
        x = cap["proj"](pooled.to(cap["proj"].weight.dtype))  # (B, cond_dim): one image, a group of one
        capability = torch.sigmoid(cap["out_proj"](x)).squeeze(-1).float()
        cond = torch.stack([capability, torch.full_like(capability, float(iteration))], dim=-1)
        gamma, beta = self.film_gen(self.cond_encoder(cond)).chunk(2, dim=-1)
        return pooled.float() * (1.0 + gamma) + beta, capability


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
    repository holding it (default ``MizzenAI/HPSv3``; ``version: v3++``: ``hpsv3++.pth`` of
    ``Junjun2333/HPSv3-PlusPlus``). Options: :class:`Options` (``base_model`` default ``Qwen/Qwen2-VL-7B-Instruct``,
    ``v3++``: ``Qwen/Qwen3-VL-8B-Instruct``); ``v3++`` adds the extra ``capability``.
    """

    inputs = Inputs(("image", "prompt"), images="pil")
    default_repo: ClassVar[str] = VERSIONS["v3"].repo
    template: ClassVar[str] = TEMPLATES["hpsv3"]

    class Options(RewardModelOptions):
        version: Literal["v3", "v3++"] = "v3"
        """``v3``: HPSv3 (``MizzenAI/HPSv3`` on Qwen2-VL-7B); ``v3++``: HPSv3++ (``Junjun2333/HPSv3-PlusPlus``'s
        ``hpsv3++.pth`` on Qwen3-VL-8B, capability- and RL-iteration-conditioned)."""
        rl_iteration: Number = Field(0.0, ge=0.0, le=1.0)
        """``v3++``: the RL-iteration condition ``min(1, step / 1000)`` of the images scored (its inferencer's
        ``iter_step``; 0: before RL, the reference's default for preference scoring)."""

    options: Options

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The checkpoint as this reward holds it: the backbone at the entry's dtype without ``lm_head`` (dropped
        on load), the ``rm_head`` (and HPSv3++'s conditioning but its capability encoder) in float32."""
        version = VERSIONS[cls.configured(kwargs, "version")]
        source = model_path or version.repo
        path = Path(source).expanduser()
        if path.is_dir() and (path / version.weights_file).is_file():
            source = str(path / version.weights_file)
        elif not path.exists() and source.count("/") == 1:
            source = f"{source}/{version.weights_file}"
        float_parts = ("rm_head.", "cond_encoder.", "film_gen.") if version.film else ("rm_head.",)
        parts = []
        for part in super().weight_files(source, kwargs):
            parts += [
                replace(part, exclude=("lm_head.", *float_parts)),
                replace(part, include=float_parts, dtype="float32"),
            ]
        return parts

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        self.version, self.iteration = VERSIONS[o.version], o.rl_iteration
        family = "HPSv3" if o.version == "v3" else "HPSv3++"
        self.text_version, self.pixels = o.version, o.pixels
        base = str(o.base_model or self.version.base)
        checkpoint = resolve_weights_file(model_path or self.version.repo, filename=self.version.weights_file)
        processor, (self.reward_token_id,), config = reward_processor(
            base, [REWARD_TOKEN], family=family, model_type=self.version.model_type
        )
        state = read_checkpoint(checkpoint)
        film_state = {k: state.pop(k) for k in [k for k in state if k.startswith(FILM_PARTS)]}
        if self.version.film != bool(film_state):
            raise ConfigError(
                f"'{checkpoint}' is {'not ' if self.version.film else ''}an HPSv3++ checkpoint "
                f"({'no ' if self.version.film else ''}cap_encoder / cond_encoder / film_gen tensors); set "
                f"version: {'v3' if self.version.film else 'v3++'}",
                field="kwargs.version",
            )
        model, head_state = reward_backbone(
            state,
            processor,
            config,
            checkpoint=checkpoint,
            base=base,
            family=family,
            dtype=self.dtype,
            device=device,
            attn_implementation=o.attn_implementation,
        )
        hidden = config.text_config.hidden_size
        self.head = RankNetHead.from_state(head_state, hidden, checkpoint).to(device)
        self.conditioning = (
            Conditioning.from_state(film_state, hidden, self.dtype, str(checkpoint)).to(device)
            if self.version.film
            else None
        )
        self.vlm = VLMBackbone(model, processor, source=checkpoint, device=device, dtype=self.dtype)
        self.hold(self.vlm, files=[checkpoint, base])
        self.hold(self.head, files=[checkpoint])
        if self.conditioning is not None:
            self.hold(self.conditioning, files=[checkpoint])

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        prompts = check_prompt_text(prompt, self.vlm.tokenizer)
        resized = []
        for i, img in enumerate(image):
            try:
                resized.append(resize_image(to_pil_rgb(img), min_pixels=self.pixels, max_pixels=self.pixels))
            except InputError as exc:
                raise exc.located(field="image", sample=i) from None
        queries = [VLMQuery.of(hpsv3_text(p, self.text_version), image=img) for p, img in zip(prompts, resized)]
        areas = [img.size[0] * img.size[1] for img in resized]
        # v3: the images are at their final size (factor 28): bounds around them keep the processor from resizing
        # again; v3++: Qwen3-VL's processor resizes them once more (factor 32, its own bounds), as the reference's
        bounds = PixelBounds() if self.version.film else PixelBounds(min_pixels=min(areas), max_pixels=max(areas))
        batch = self.vlm.encode(queries, pixels=bounds)
        at = batch["input_ids"] == self.reward_token_id
        if not bool((at.sum(dim=1) == 1).all()):
            raise InputError(
                f"expected one {REWARD_TOKEN} token per sample",
                field="prompt",
                sample=int(torch.nonzero(at.sum(dim=1) != 1)[0]),
            )
        # v3: the 4.x reward model's positions 0 .. L-1; v3++: Qwen3-VL's own M-RoPE positions
        positions = None if self.version.film else sequential_positions(batch["attention_mask"])
        with torch.no_grad():
            hidden = self.vlm.forward(batch, position_ids=positions, use_cache=False).last_hidden_state
            pooled = hidden[at]
            if self.conditioning is None:
                mu_sigma = self.head(pooled.float())
                return RewardOutput(mu_sigma[:, 0].cpu(), extras={"sigma": mu_sigma[:, 1].cpu()})
            conditioned, capability = self.conditioning(pooled, self.iteration)
            mu_sigma = self.head(conditioned)
        extras = {"sigma": mu_sigma[:, 1].cpu(), "capability": capability.cpu()}
        return RewardOutput(mu_sigma[:, 0].cpu(), extras=extras)
