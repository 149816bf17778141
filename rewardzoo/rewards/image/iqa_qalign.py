"""Q-Align and DeQA-Score: pyiqa's mPLUG-Owl2 network (its ``pyiqa.archs.q_align`` code, installed from PyPI,
no ``trust_remote_code``) asked for a rating word, scored as the expected level.

``score = sum_k softmax(l)_k * w_k``: ``l`` the logits, at the last position of the prompt
``USER: How would you rate the {task} of this image?\\n<|image|>\\nASSISTANT: The {task} of the image is``,
of the five level words ``excellent, good, fair, poor, bad`` (the last token of each), ``w = (5, 4, 3, 2, 1)``
(Q-Align's ``score``; DeQA-Score's ``Scorer`` is the same prompt and formula on its own weights). The image is
padded to a square with CLIP's mean colour, then the checkpoint's ``CLIPImageProcessor`` runs (448-pixel resize
and crop, CLIP normalisation). Images of any size run as one batch: the prompt has no padding, so each row is
the one-image forward.

A video (Q-Align's ``QAlignVideoScorer``, pyiqa's ``score(..., input_="video")``) asks the same question of
``this video`` / ``the video``; each of its frames is squared and processed as an image, and the visual tokens
of all its frames, in order, stand where the one ``<|image|>`` is. Videos with the same number of frames have
prompts of one length and run as one batch (each row is the one-video forward); other counts run apart, since
mPLUG-Owl2 pads shorter rows on the right and the last position would then be padding.

pyiqa 0.1.16's code needs ``PreTrainedModel.invert_attention_mask``, which transformers 5.17 removed, and imports
``icecream`` (not among pyiqa's requirements): with a newer transformers it runs in its own environment
(:data:`REQUIREMENTS`). Importing it replaces transformers' Llama classes process-wide
(``replace_llama_modality_adaptive``); :func:`pyiqa_owl2` applies that only while the network is built and puts
transformers back as found, so other Llama models of the same process are untouched.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.resources import Resources
from ...shared.weights import load_state_dict, model_folder

#: The environment pyiqa's Q-Align code runs in (the parent's torch and pyiqa seen through system_site_packages).
REQUIREMENTS = ("transformers>=5.0,<5.17", "icecream")
LEVELS = ("excellent", "good", "fair", "poor", "bad")
LEVEL_VALUES = (5.0, 4.0, 3.0, 2.0, 1.0)
IMAGE_TOKEN = -200  # mPLUG-Owl2's placeholder id where the visual tokens go
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_MODULE = "pyiqa.archs.q_align.modeling_mplug_owl2"
_LOCK = threading.Lock()


def environment_hint() -> str:
    reqs = ", ".join(repr(r) for r in REQUIREMENTS)
    return f"environment: {{requirements: [{reqs}], system_site_packages: true}}"


def check_runtime(reward: str) -> None:
    """ConfigError (with the ``environment:`` that runs it) where pyiqa's Q-Align code cannot run here."""
    from transformers import PreTrainedModel, __version__

    if not hasattr(PreTrainedModel, "invert_attention_mask"):
        raise ConfigError(
            f"{reward}: pyiqa's Q-Align code calls PreTrainedModel.invert_attention_mask, which transformers 5.17 "
            f"removed (this process has {__version__}): run this entry in its own environment, {environment_hint()}",
            field="environment",
        )
    if importlib.util.find_spec("pyiqa") is None:
        raise MissingExtraError(reward, "pyiqa", "iqa")
    if importlib.util.find_spec("icecream") is None:
        raise ConfigError(
            f"{reward}: pyiqa's Q-Align module imports 'icecream', which pyiqa does not require and is not installed: "
            f"pip install icecream, or {environment_hint()}",
            field="environment",
        )


@contextmanager
def llama_left_as_found() -> Iterator[None]:
    """On exit, transformers' Llama modules and the two forwards pyiqa's ``replace_llama_modality_adaptive``
    patches are as they were on entry (names added since are removed, replaced ones put back)."""
    from transformers.models.llama import configuration_llama, modeling_llama

    modules = {m: dict(vars(m)) for m in (configuration_llama, modeling_llama)}
    forwards = {c: c.__dict__["forward"] for c in (modeling_llama.LlamaModel, modeling_llama.LlamaForCausalLM)}
    try:
        yield
    finally:
        for module, before in modules.items():
            for key in set(vars(module)) - set(before):
                delattr(module, key)
            for key, value in before.items():
                if vars(module).get(key) is not value:
                    setattr(module, key, value)
        for cls, forward in forwards.items():
            cls.forward = forward


@contextmanager
def pyiqa_owl2() -> Iterator[Any]:
    """pyiqa's mPLUG-Owl2 module with its Llama replacement applied; on exit transformers' Llama module, its two
    patched forwards and ``sys.path`` are as they were (the built network keeps pyiqa's layers and forward)."""
    with _LOCK, llama_left_as_found():
        path = list(sys.path)
        try:
            module = importlib.import_module(_MODULE)
            llama2 = importlib.import_module("pyiqa.archs.q_align.modeling_llama2")
            llama2.replace_llama_modality_adaptive()  # again when the module was imported (and undone) before
            module.MPLUGOwl2LlamaModel.forward = llama2.model_forward  # its own, once transformers' is back
            yield module
        finally:
            sys.path[:] = path


def load_weights(root: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the directory's ``*.safetensors`` files, else of its ``pytorch_model*.bin`` shards
    (``torch.load(weights_only=True)``)."""
    files = sorted(root.glob("*.safetensors")) or sorted(root.glob("pytorch_model*.bin"))
    if not files:
        raise ConfigError(f"'{root}' holds no .safetensors or pytorch_model*.bin weights", field="model_path")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            state.update(load_state_dict(path))
        except InputError as exc:
            raise ConfigError(exc.message, field="model_path") from None
    return state


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Parameters created in ``dtype`` (as transformers' ``from_pretrained(dtype=...)`` builds them)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


class Given:
    """Stands in for a class whose ``from_pretrained`` pyiqa calls with a hub id: returns what was loaded here."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def from_pretrained(self, *_: Any, **__: Any) -> Any:
        return self.value


def prompt_ids(tokenizer: Any, task: str, medium: str = "image") -> list[int]:
    """The prompt's ids (about ``this image`` or ``this video``) with :data:`IMAGE_TOKEN` where ``<|image|>``
    stands; the text after it loses its BOS."""
    before, after = (
        f"USER: How would you rate the {task} of this {medium}?\n",
        f"\nASSISTANT: The {task} of the {medium} is",
    )
    head, tail = tokenizer(before).input_ids, tokenizer(after).input_ids
    bos = bool(head) and head[0] == tokenizer.bos_token_id
    return [*head, IMAGE_TOKEN, *(tail[1:] if bos else tail)]


def square_image(image: torch.Tensor) -> Any:
    """A float (3, H, W) image in [0, 1] as 8-bit PIL (truncated, as torchvision's ``to_pil_image``), centred
    on a square of CLIP's mean colour."""
    from PIL import Image

    array = image.detach().float().cpu().mul(255).to(torch.uint8).permute(1, 2, 0).numpy()
    pil = Image.fromarray(array)
    side = max(pil.size)
    canvas = Image.new("RGB", (side, side), tuple(int(c * 255) for c in CLIP_MEAN))
    canvas.paste(pil, ((side - pil.width) // 2, (side - pil.height) // 2))
    return canvas


class QAlignScorer:
    """pyiqa's ``MPLUGOwl2LlamaForCausalLM`` built from ``model_path`` (strict, safe weights) with the
    checkpoint's tokenizer and image processor; ``scorer(images)`` is the expected level of each image."""

    def __init__(self, model_path: str, task: str, device: str, dtype: torch.dtype, reward: str) -> None:
        check_runtime(reward)
        from transformers import CLIPImageProcessor, LlamaTokenizer
        from transformers.initialization import no_init_weights

        root = model_folder(model_path, ["*.json", "*.model", "*.safetensors", "pytorch_model*.bin"])
        try:
            tokenizer = LlamaTokenizer.from_pretrained(str(root))
            self.processor = CLIPImageProcessor.from_pretrained(str(root))
        except OSError as exc:
            raise ConfigError(f"'{model_path}': {exc}", field="model_path") from None
        state = load_weights(root)
        with pyiqa_owl2() as owl2:
            config = owl2.MPLUGOwl2Config.from_pretrained(str(root))
            with (
                mock.patch.object(owl2, "LlamaTokenizer", Given(tokenizer)),
                mock.patch.object(owl2, "CLIPImageProcessor", Given(self.processor)),
                no_init_weights(),
                default_dtype(dtype),
            ):
                model = owl2.MPLUGOwl2LlamaForCausalLM(config)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ConfigError(f"'{model_path}' does not fit mPLUG-Owl2: {str(exc)[:400]}", field="model_path") from None
        self.model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
        self.resources = Resources()  # what a reward scoring with it holds (``reward.hold(scorer)``)
        self.resources.hold(self.model, files=[str(root)])
        self.device, self.dtype = torch.device(device), dtype
        self.input_ids = torch.tensor(prompt_ids(tokenizer, task), device=self.device)[None]
        self.video_ids = torch.tensor(prompt_ids(tokenizer, task, "video"), device=self.device)[None]
        self.level_ids = [ids[-1] for ids in tokenizer(list(LEVELS)).input_ids]
        self.values = torch.tensor(LEVEL_VALUES, dtype=torch.float64)

    def pixels(self, images: Sequence[torch.Tensor]) -> torch.Tensor:
        """Float images (3, H, W) in [0, 1], squared and processed: (N, 3, S, S) on the model's device and dtype."""
        pixels = self.processor.preprocess([square_image(img) for img in images], return_tensors="pt")
        return pixels["pixel_values"].to(self.device, self.dtype)

    def expected(self, input_ids: torch.Tensor, images: torch.Tensor | list[torch.Tensor]) -> torch.Tensor:
        """``softmax(level logits at the last position) @ LEVEL_VALUES`` of each row, float64 on the CPU: computed in
        the model's dtype when that is half precision (float16 on CUDA, as pyiqa's Q-Align computes it), else in
        float64."""
        with torch.inference_mode():
            logits = self.model(input_ids.expand(len(images), -1), images=images)["logits"]
            levels = logits[:, -1, self.level_ids]
            if levels.dtype not in (torch.float16, torch.bfloat16):
                return torch.softmax(levels.double().cpu(), dim=-1) @ self.values
            expected = torch.softmax(levels, dim=-1) @ self.values.to(levels)
        return expected.double().cpu()

    def __call__(self, images: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.expected(self.input_ids, self.pixels(images))

    def videos(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        """Each float video (T, 3, H, W) in [0, 1] rated as one, T >= 1: the video question with its T frames'
        visual tokens in the image's place; videos with the same T in one forward."""
        out = torch.empty(len(videos), dtype=torch.float64)
        by_count: dict[int, list[int]] = {}
        for i, video in enumerate(videos):
            by_count.setdefault(int(video.shape[0]), []).append(i)
        for idx in by_count.values():
            frames = self.pixels([frame for i in idx for frame in videos[i].unbind(0)])
            out[idx] = self.expected(self.video_ids, list(frames.split(len(frames) // len(idx))))
        return out
