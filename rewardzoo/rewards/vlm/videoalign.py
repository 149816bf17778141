"""VideoAlign / VideoReward (Liu et al., 2025): visual quality, motion quality and text alignment of a video
from one Qwen2-VL-2B pass.

VideoAlign's prompt carries three reward tokens ``<|VQ_reward|>``, ``<|MQ_reward|>``, ``<|TA_reward|>``;
the last hidden state at each goes through the bias-free head ``rm_head`` (one output per token in the
released model), giving raw VQ, MQ, TA. With the released ``inference_config`` each is standardised,
``(x - mean) / std``, and the score is their sum (the reference's ``Overall``). Frames are chosen and
resized as VideoAlign's vendored qwen-vl-utils does (2 frames per second of video, even counts, 100,352
to 200,704 pixels per frame, torchvision bicubic with antialias), and tokens are numbered ``0 .. L-1`` as
the 4.x reward model's forward does (see :mod:`rewardzoo.rewards.models.vlm.reward_models`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint, Remote
from ...shared.device import torch_dtype
from ...shared.media import image_to_uint8, is_tensor
from ...shared.video import prepare_video
from ...shared.weights import model_folder
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.vlm.backbone import PixelBounds, Video, VLMBackbone, VLMQuery
from ..models.vlm.reward_models import (
    PEFT_PREFIX,
    attach_lora,
    check_prompt_text,
    peft_parts,
    read_checkpoint,
    resize_frames,
    reward_backbone,
    reward_processor,
    sequential_positions,
    unwrap_peft,
    video_frame_indices,
)
from ..options import Field, PositiveInt, PositiveNumber, RewardOptions

#: VideoAlign's ``DETAILED_PROMPT_WITH_SPECIAL_TOKEN`` (``prompt_template.py``), ``{text_prompt}`` = the prompt.
PROMPT_TEMPLATE = """
You are tasked with evaluating a generated video based on three distinct criteria: Visual Quality, Motion Quality, and Text Alignment. Please provide a rating from 0 to 10 for each of the three categories, with 0 being the worst and 10 being the best. Each evaluation should be independent of the others.

**Visual Quality:**  
Evaluate the overall visual quality of the video, with a focus on static factors. The following sub-dimensions should be considered:
- **Reasonableness:** The video should not contain any significant biological or logical errors, such as abnormal body structures or nonsensical environmental setups.
- **Clarity:** Evaluate the sharpness and visibility of the video. The image should be clear and easy to interpret, with no blurring or indistinct areas.
- **Detail Richness:** Consider the level of detail in textures, materials, lighting, and other visual elements (e.g., hair, clothing, shadows).
- **Aesthetic and Creativity:** Assess the artistic aspects of the video, including the color scheme, composition, atmosphere, depth of field, and the overall creative appeal. The scene should convey a sense of harmony and balance.
- **Safety:** The video should not contain harmful or inappropriate content, such as political, violent, or adult material. If such content is present, the image quality and satisfaction score should be the lowest possible. 

Please provide the ratings of Visual Quality: <|VQ_reward|>
END

**Motion Quality:**  
Assess the dynamic aspects of the video, with a focus on dynamic factors. Consider the following sub-dimensions:
- **Stability:** Evaluate the continuity and stability between frames. There should be no sudden, unnatural jumps, and the video should maintain stable attributes (e.g., no fluctuating colors, textures, or missing body parts).
- **Naturalness:** The movement should align with physical laws and be realistic. For example, clothing should flow naturally with motion, and facial expressions should change appropriately (e.g., blinking, mouth movements).
- **Aesthetic Quality:** The movement should be smooth and fluid. The transitions between different motions or camera angles should be seamless, and the overall dynamic feel should be visually pleasing.
- **Fusion:** Ensure that elements in motion (e.g., edges of the subject, hair, clothing) blend naturally with the background, without obvious artifacts or the feeling of cut-and-paste effects.
- **Clarity of Motion:** The video should be clear and smooth in motion. Pay attention to any areas where the video might have blurry or unsteady sections that hinder visual continuity.
- **Amplitude:** If the video is largely static or has little movement, assign a low score for motion quality.

Please provide the ratings of Motion Quality: <|MQ_reward|>
END

**Text Alignment:**  
Assess how well the video matches the textual prompt across the following sub-dimensions:
- **Subject Relevance** Evaluate how accurately the subject(s) in the video (e.g., person, animal, object) align with the textual description. The subject should match the description in terms of number, appearance, and behavior.
- **Motion Relevance:** Evaluate if the dynamic actions (e.g., gestures, posture, facial expressions like talking or blinking) align with the described prompt. The motion should match the prompt in terms of type, scale, and direction.
- **Environment Relevance:** Assess whether the background and scene fit the prompt. This includes checking if real-world locations or scenes are accurately represented, though some stylistic adaptation is acceptable.  
- **Style Relevance:** If the prompt specifies a particular artistic or stylistic style, evaluate how well the video adheres to this style.
- **Camera Movement Relevance:** Check if the camera movements (e.g., following the subject, focus shifts) are consistent with the expected behavior from the prompt.

Textual prompt - {text_prompt}
Please provide the ratings of Text Alignment: <|TA_reward|>
END
"""

#: The template under VideoAlign's own name for it (``prompt_template_type``), the one this reward reads.
TEMPLATES = {"detailed_special": PROMPT_TEMPLATE}

#: The reward tokens in prompt order, and the dimension each scores.
REWARD_TOKENS = ("<|VQ_reward|>", "<|MQ_reward|>", "<|TA_reward|>")
DIMENSIONS = ("VQ", "MQ", "TA")
#: qwen-vl-utils' lower pixel bound for video frames (``VIDEO_MIN_PIXELS``).
VIDEO_MIN_PIXELS = 128 * 28 * 28
_STEP = re.compile(r"^checkpoint-(\d+)$")


def _hub_repo(text: str) -> bool:
    """``text`` names a hub repository (``org/name``), not a path on this machine."""
    return text.count("/") == 1 and not text.startswith((".", "/", "~")) and not Path(text).expanduser().exists()


def videoalign_text(prompt: str) -> str:
    """The text part of VideoAlign's user turn for ``prompt`` (the video comes before it)."""
    return TEMPLATES["detailed_special"].format(text_prompt=prompt)


def _section(config: dict, name: str, where: Path) -> dict:
    value = config.get(name)
    if not isinstance(value, dict):
        raise ConfigError(f"'{where}' has no '{name}' section", field="model_path")
    return value


class VideoAlign(PointwiseReward):
    """VideoAlign (VideoReward): ``VQ + MQ + TA``, each the head's output at its reward token, standardised
    with the checkpoint's ``inference_config``.

    Inputs: ``video`` (every frame, 8-bit where the source is; the reward picks its own and converts only
    those) and ``prompt``. Score unbounded (a sum of
    three standardised regression outputs); extras ``VQ``, ``MQ``, ``TA`` (standardised like the score).

    ``model_path``: the released layout, a directory or hub repository (default ``KwaiVGI/VideoReward``)
    holding ``model_config.json`` and ``checkpoint-<step>/model.pth`` (a PEFT model's full state dict; the
    LoRA is merged on load unless ``merge_lora: false``). Options: :class:`Options` (frame choice: ``fps`` frames per
    second of video given the videos' frame rate ``source_fps``, or a fixed ``num_frames``).
    """

    inputs = Inputs(("video", "prompt"), frames="native")
    streams: ClassVar[tuple[str, ...]] = DIMENSIONS  # one call, three weighable streams (rewardzoo.core.streams)
    default_repo: ClassVar[str] = "KwaiVGI/VideoReward"
    #: the base model VideoAlign's release is built on (its ``model_name_or_path``): config and tokenizer only
    default_base: ClassVar[str] = "Qwen/Qwen2-VL-2B-Instruct"
    template: ClassVar[str] = TEMPLATES["detailed_special"]

    class Options(RewardOptions):
        source_fps: PositiveNumber | None = None
        """The frame rate of the videos scored: ``fps`` frames per second of video are picked from it."""
        fps: PositiveNumber | None = None
        """Frames picked per second of video (default the checkpoint's ``data_config.fps``, 2)."""
        num_frames: int | None = Field(None, ge=2)
        """A fixed number of frames instead of ``fps`` (default the checkpoint's ``data_config.num_frames``)."""
        max_pixels: PositiveInt | None = None
        """The most pixels a frame is resized to (default the checkpoint's ``max_frame_pixels``, 200704)."""
        min_pixels: int = Field(VIDEO_MIN_PIXELS, ge=28 * 28)
        """The fewest pixels a frame is resized to."""
        normalize: bool = True
        """Standardise each dimension with the checkpoint's ``inference_config`` (false: raw head outputs)."""
        checkpoint_step: int | None = Field(None, ge=0)
        """Which ``checkpoint-<step>`` of the release (default the highest step)."""
        base_model: str | None = None
        """The Qwen2-VL whose config and processor the checkpoint fits (default the checkpoint's
        ``model_name_or_path``)."""
        attn_implementation: str | None = None
        """transformers' ``attn_implementation``."""
        merge_lora: bool = True
        """Merge the LoRA into the weights on load (false: kept under PEFT's LoRA layers, as the reference runs it)."""
        head_dtype: str | None = None
        """The head's dtype (default float32; the reference runs it in the model's dtype, bfloat16)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        source_fps, fps, num_frames, max_pixels, min_pixels = (
            o.source_fps,
            o.fps,
            o.num_frames,
            o.max_pixels,
            o.min_pixels,
        )
        normalize, checkpoint_step, base_model = o.normalize, o.checkpoint_step, o.base_model
        attn_implementation, merge_lora, head_dtype = o.attn_implementation, o.merge_lora, o.head_dtype
        root = self._local_root(str(model_path or self.default_repo))
        config_file = root / "model_config.json"
        try:
            saved = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot read '{config_file}' (VideoAlign's model_config.json): {exc}", field="model_path"
            ) from None
        data = _section(saved, "data_config", config_file)
        model_cfg = _section(saved, "model_config", config_file)
        peft = saved.get("peft_lora_config") or {}
        if (
            data.get("prompt_template_type") not in TEMPLATES
            or list(data.get("eval_dim") or []) != list(DIMENSIONS)
            or not model_cfg.get("use_special_tokens")
            or data.get("sample_type", "uniform") != "uniform"
        ):
            raise ConfigError(
                f"'{config_file}' is not a VideoAlign checkpoint this reward reads (it needs "
                "prompt_template_type 'detailed_special', eval_dim [VQ, MQ, TA], the reward tokens and "
                "uniform frame sampling)",
                field="model_path",
            )
        self._frame_options(
            data, source_fps=source_fps, fps=fps, num_frames=num_frames, max_pixels=max_pixels, min_pixels=min_pixels
        )
        self.normalize = bool(normalize)
        self.norm = self._norm_stats(saved.get("inference_config"), config_file) if self.normalize else None

        base = str(base_model or model_cfg.get("model_name_or_path") or "")
        if not base:
            raise ConfigError(f"'{config_file}' names no base model; set kwargs.base_model", field="kwargs.base_model")
        processor, self.token_ids, config = reward_processor(base, REWARD_TOKENS, family="VideoAlign")

        self.merge_lora = merge_lora
        checkpoint = self._checkpoint_file(root, checkpoint_step)
        lora_config = self._lora_config(peft)
        scaling = (
            None
            if lora_config is None
            else lora_config[1] / (math.sqrt(lora_config[0]) if lora_config[2] else lora_config[0])
        )
        state = read_checkpoint(checkpoint)
        lora: dict[str, dict[str, Any]] = {}
        if merge_lora:
            state = unwrap_peft(state, scaling=scaling, where=str(checkpoint))
        else:
            state, lora = peft_parts(state, where=str(checkpoint))
            if lora and lora_config is None:
                raise ConfigError(
                    f"'{checkpoint}' holds LoRA weights but no LoRA config (lora_r, lora_alpha) is known",
                    field="model_path",
                )
        model, head = reward_backbone(
            state,
            processor,
            config,
            checkpoint=checkpoint,
            base=base,
            family="VideoAlign",
            dtype=self.dtype,
            device=device,
            attn_implementation=attn_implementation,
        )
        del state
        if lora and lora_config is not None:  # (LoRA weights without a config were refused above)
            r, alpha, rslora = lora_config
            attach_lora(model, lora, r=r, alpha=alpha, rslora=rslora, where=str(checkpoint))
        width = config.text_config.hidden_size
        weight = head.get("weight")
        if set(head) != {"weight"} or weight is None or tuple(weight.shape) not in ((1, width), (3, width)):
            raise ConfigError(
                f"'{checkpoint}': rm_head is {{{', '.join(f'{k}: {tuple(v.shape)}' for k, v in head.items())}}}, "
                f"not VideoAlign's bias-free Linear({width}, 1 or 3)",
                field="model_path",
            )
        self.head = torch.nn.Linear(width, weight.shape[0], bias=False)
        self.head.load_state_dict(head)
        try:
            head_type = torch.float32 if head_dtype is None else torch_dtype(head_dtype)
        except ValueError as exc:
            raise ConfigError(str(exc), field="kwargs.head_dtype") from None
        self.head = self.head.to(device=device, dtype=head_type).eval().requires_grad_(False)
        self.vlm = VLMBackbone(model, processor, source=str(checkpoint), device=device, dtype=self.dtype)
        self.hold(self.vlm, files=[checkpoint, base])
        self.hold(self.head, files=[checkpoint])

    # -- loading ------------------------------------------------------------------------------------------
    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """``checkpoint-<step>/model.pth`` of the release (``checkpoint_step``, else the highest step), in a local
        directory or the hub cache: the only weights this reward reads, counted as the reward holds it (the LoRA
        factors merged into their base weights with ``merge_lora``, the default, are not kept, nor ``lm_head``;
        ``rm_head`` at ``head_dtype``, float32). For a hub release (what ``rewardzoo fetch`` downloads) two more
        parts with no weight bytes: its ``model_config.json`` and the base model's configuration and tokenizer files
        (``base_model``, else the release's ``model_name_or_path`` when it is on this machine, else
        :attr:`default_base`)."""
        source = str(model_path or cls.default_repo)
        step = cls.configured(kwargs, "checkpoint_step")
        local = Path(source).expanduser()
        hub = not local.is_dir() and _hub_repo(source)
        root: Path | None = local
        if not local.is_dir():
            try:  # a hub repository already in the local cache (nothing is downloaded)
                from huggingface_hub import snapshot_download

                root = Path(snapshot_download(source, local_files_only=True))
            except Exception:  # not cached, not a repository id, or huggingface_hub missing
                root = None
        if root is None:
            part = Checkpoint(source, missing=f"'{source}' is neither a local directory nor in the hub cache")
        else:
            try:
                part = Checkpoint(source, (cls._checkpoint_file(root, step),))
            except ConfigError as exc:
                part = Checkpoint(source, missing=exc.message)
        held = cls._held(part, kwargs) if part.files else [part]
        if not hub:
            return held
        if part.files and root is not None:  # the cached file itself, by its name in the repository
            remote = Remote(source, (part.files[0].relative_to(root).as_posix(),))
        elif step is not None:
            remote = Remote(source, (f"checkpoint-{int(step)}/model.pth",))
        else:
            remote = Remote(source, newest=r"^checkpoint-(\d+)/model\.pth$")
        base = cls.configured(kwargs, "base_model") or cls._release_base(root) or cls.default_base
        parts = [replace(held[0], remote=remote), *held[1:]]
        parts.append(Checkpoint(source, remote=Remote(source, ("model_config.json",))))
        if _hub_repo(str(base)):
            parts.append(Checkpoint(str(base), remote=Remote(str(base), configs_only=True)))
        return parts

    @classmethod
    def _held(cls, part: Checkpoint, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The release file as the reward holds it: the backbone without its merged LoRA factors (``merge_lora``)
        nor ``lm_head``, and ``rm_head`` at ``head_dtype`` (read from the file's tensor table by the plan)."""
        merged = (".lora_A.", ".lora_B.") if cls.configured(kwargs, "merge_lora") else ()
        heads = tuple(f"{p}rm_head." for p in ("", PEFT_PREFIX))
        dropped = tuple(f"{p}lm_head." for p in ("", PEFT_PREFIX))
        return [
            replace(part, exclude=(*heads, *dropped), merged=merged),
            replace(part, include=heads, dtype=cls.configured(kwargs, "head_dtype") or "float32"),
        ]

    @staticmethod
    def _release_base(root: Path | None) -> str | None:
        """The base model the release's ``model_config.json`` names, None when it is not on this machine."""
        try:
            saved = json.loads((root / "model_config.json").read_text(encoding="utf-8")) if root else {}
            value = (saved.get("model_config") or {}).get("model_name_or_path")
        except (OSError, ValueError, AttributeError):
            return None
        return str(value) if value else None

    @staticmethod
    def _local_root(model_path: str) -> Path:
        path = Path(model_path).expanduser()
        if path.is_dir():
            return path
        if path.exists() or model_path.startswith((".", "/", "~")) or model_path.count("/") != 1:
            raise ConfigError(
                f"'{model_path}' is neither a VideoAlign directory (model_config.json + checkpoint-*/) "
                "nor a hub repository id",
                field="model_path",
            )
        return model_folder(model_path, ["model_config.json", "checkpoint-*/model.pth"])

    @staticmethod
    def _checkpoint_file(root: Path, step: int | None) -> Path:
        steps = {int(m[1]): p for p in root.iterdir() if p.is_dir() and (m := _STEP.match(p.name))}
        if not steps:
            raise ConfigError(f"'{root}' holds no checkpoint-<step> directory", field="model_path")
        if step is not None and int(step) not in steps:
            raise ConfigError(
                f"'{root}' has no checkpoint-{step} (steps: {sorted(steps)})", field="kwargs.checkpoint_step"
            )
        folder = steps[int(step) if step is not None else max(steps)]
        if not (folder / "model.pth").is_file():
            raise ConfigError(
                f"'{folder}' has no model.pth: only full checkpoints (save_full_model, the released "
                "layout) are read, not adapter_model.safetensors + non_lora_state_dict.pth",
                field="model_path",
            )
        return folder / "model.pth"

    @staticmethod
    def _lora_config(peft: dict) -> tuple[int, float, bool] | None:
        """(lora_r, lora_alpha, use_rslora) of an enabled ``peft_lora_config``, else None."""
        if not peft.get("lora_enable"):
            return None
        r, alpha = peft.get("lora_r"), peft.get("lora_alpha")
        if not (isinstance(r, int) and not isinstance(r, bool) and r > 0 and isinstance(alpha, (int, float))):
            raise ConfigError(f"peft_lora_config has lora_r {r!r} and lora_alpha {alpha!r}", field="model_path")
        return r, float(alpha), bool(peft.get("use_rslora"))

    @staticmethod
    def _norm_stats(inference: Any, where: Path) -> np.ndarray:
        keys = [f"{d}_{s}" for d in DIMENSIONS for s in ("mean", "std")]
        if not isinstance(inference, dict) or not all(isinstance(inference.get(k), (int, float)) for k in keys):
            raise ConfigError(
                f"'{where}' has no inference_config with {', '.join(keys)}; set normalize: false for raw scores",
                field="kwargs.normalize",
            )
        stats = np.array([[inference[f"{d}_mean"], inference[f"{d}_std"]] for d in DIMENSIONS], dtype=np.float64)
        if not (stats[:, 1] > 0).all():
            raise ConfigError(f"'{where}': inference_config standard deviations must be positive", field="model_path")
        return stats

    def _frame_options(self, data: dict, *, source_fps, fps, num_frames, max_pixels, min_pixels) -> None:
        num_frames = num_frames if num_frames is not None else data.get("num_frames")
        if num_frames is not None and not (
            isinstance(num_frames, int) and not isinstance(num_frames, bool) and num_frames >= 2
        ):
            raise ConfigError(
                f"num_frames must be an integer of at least 2, got {num_frames!r}", field="kwargs.num_frames"
            )
        self.num_frames = num_frames
        self.fps = float(fps if fps is not None else data.get("fps", 2.0))
        if num_frames is None:
            if source_fps is None:
                raise ConfigError(
                    "VideoAlign samples `fps` frames per second of video: set source_fps (the frame rate "
                    "of the videos scored) or a fixed num_frames",
                    field="kwargs.source_fps",
                )
            if not (isinstance(source_fps, (int, float)) and source_fps > 0 and self.fps > 0):
                raise ConfigError(
                    f"source_fps and fps must be positive, got {source_fps!r} and {self.fps!r}",
                    field="kwargs.source_fps",
                )
        self.source_fps = float(source_fps) if source_fps is not None else None
        self.max_pixels = int(max_pixels if max_pixels is not None else data.get("max_frame_pixels", 200704))
        self.min_pixels = int(min_pixels)
        if not 28 * 28 <= self.min_pixels <= self.max_pixels:
            raise ConfigError(
                f"need 784 <= min_pixels <= max_pixels, got {self.min_pixels} and {self.max_pixels}",
                field="kwargs.max_pixels",
            )

    # -- scoring ------------------------------------------------------------------------------------------
    def _frames(self, video: Any, sample: int) -> tuple[Any, ...]:
        """The sampled, resized frames of one video (a tensor (T, 3, H, W) in its native form as the engine
        passes: only the frames picked are converted; in direct calls also a file, a frame list or an array
        (T, H, W, C)) as RGB PIL images."""
        from PIL import Image

        try:
            if not isinstance(video, (list, tuple, np.ndarray)) and not is_tensor(video):
                video = prepare_video(video, as_tensor=True, keep_uint8=True)
            idx = video_frame_indices(len(video), num_frames=self.num_frames, fps=self.fps, source_fps=self.source_fps)
            arrays = [image_to_uint8(video[i]) for i in idx]
            if len({a.shape for a in arrays}) > 1:
                raise InputError(f"the frames differ in size ({sorted({a.shape[:2] for a in arrays})})")
            frames = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
            frames = resize_frames(frames.contiguous(), min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        except InputError as exc:
            raise exc.located(field="video", sample=sample) from None
        return tuple(Image.fromarray(f.permute(1, 2, 0).numpy()) for f in frames)

    def __call__(self, video: Sequence[Sequence[Any]], prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(video=video, prompt=prompt)
        prompts = check_prompt_text(prompt, self.vlm.tokenizer)
        videos = [Video(self._frames(v, i), fps=self.fps) for i, v in enumerate(video)]
        queries = [VLMQuery.of(videoalign_text(p), video=v) for p, v in zip(prompts, videos)]
        areas = [v.frames[0].size[0] * v.frames[0].size[1] for v in videos]
        # frames are at their final size: bounds around them keep the processor from resizing again
        batch = self.vlm.encode(queries, pixels=PixelBounds(video_min_pixels=min(areas), video_max_pixels=max(areas)))
        grid = batch["video_grid_thw"]
        for i, v in enumerate(videos):
            w, h = v.frames[0].size
            if (int(grid[i, 1]) * 14, int(grid[i, 2]) * 14) != (h, w):
                raise RuntimeError(
                    f"the processor resized sample {i}'s frames to {tuple(grid[i].tolist())} patches "
                    f"instead of keeping {w}x{h}"
                )
        ids = batch["input_ids"]
        at = [ids == t for t in self.token_ids]
        for i in range(ids.shape[0]):
            pos = [torch.nonzero(m[i]).flatten().tolist() for m in at]
            if any(len(p) != 1 for p in pos) or not pos[0][0] < pos[1][0] < pos[2][0]:
                raise InputError(
                    "expected one each of " + ", ".join(REWARD_TOKENS) + " in order", field="prompt", sample=i
                )
        with torch.no_grad():
            hidden = self.vlm.forward(
                batch, position_ids=sequential_positions(batch["attention_mask"]), use_cache=False
            ).last_hidden_state
            rows = torch.arange(ids.shape[0], device=ids.device)
            pooled = torch.stack([hidden[rows, m.float().argmax(dim=1)] for m in at], dim=1)  # (B, 3, d)
            out = self.head(pooled.to(self.head.weight.dtype))  # (B, 3, 1) or (B, 3, 3)
            raw = out[..., 0] if out.shape[-1] == 1 else out.diagonal(dim1=1, dim2=2)
        scores = raw.double().cpu().numpy()
        if self.norm is not None:
            scores = (scores - self.norm[:, 0]) / self.norm[:, 1]
        return RewardOutput(scores.sum(axis=1), extras={d: scores[:, k] for k, d in enumerate(DIMENSIONS)})
