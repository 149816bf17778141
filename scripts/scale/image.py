"""Image flagships at their real size (cases for ``scripts/scale_check.py``; interface in ``common.py``).

Architectures from the references' published configurations: open_clip's shipped ``model_configs`` (ViT-B-32,
ViT-L-14, ViT-H-14), transformers' ``CLIPConfig`` with laion/CLIP-ViT-H-14-laion2B-s32B-b79K's numbers (the
configuration PickScore_v1 publishes), BLIP ViT-L + BERT-base ``med_config.json`` (ImageReward), timm's
``vit_large_patch16_dinov3.lvd1689m``. Random weights, seeded; file layouts as the hub repositories publish them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from scale.common import Case

PROMPT = "a photograph of an astronaut riding a horse on the moon, highly detailed, golden hour"
OPEN_CLIP_IMPORTS = ("torch", "open_clip", "safetensors.torch")
HF_IMPORTS = ("torch", "transformers", "safetensors.torch")
DINOV3 = "vit_large_patch16_dinov3.lvd1689m"
AESTHETIC_HEAD_URL = (
    "https://github.com/christophschuhmann/improved-aesthetic-predictor/raw/main/sac+logos+ava1-l14-linearMSE.pth"
)


def image_sample(size: int = 1024, seed: int = 0, group: str | None = None) -> dict[str, Any]:
    """One generated image at the size text-to-image RL trains at (1024x1024 RGB uint8: SD3.5 / FLUX) and its
    prompt."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sample: dict[str, Any] = {"image": rng.integers(0, 256, (size, size, 3), dtype=np.uint8), "prompt": PROMPT}
    if group is not None:
        sample["group_id"] = group
    return sample


# ------------------------------------------------------------------------------------------------ 4K files
UHD = (3840, 2160)
UHD_FILES = ("png", "png", "jpg", "jpg")  # the batch: two PNG and two JPEG files (decoded: 4 x 24.9 MB)


def uhd_file(index: int, fmt: str) -> Path:
    """A generated 3840x2160 image file (cached under the scratch folder): a gradient scene with a few shapes and
    sensor noise, so PNG and JPEG compress it as they compress a photograph (PNG ~0.6x, JPEG q90 ~0.06x the decoded size)."""
    from scale.common import SCRATCH

    path = SCRATCH / "media" / f"uhd_{UHD[0]}x{UHD[1]}_{index}.{fmt}"
    if path.is_file():
        return path

    import numpy as np
    from PIL import Image

    w, h = UHD
    rng = np.random.default_rng(100 + index)
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
    img = np.empty((h, w, 3), np.float32)
    img[..., 0] = 80 + 120 * y + 30 * x + 20 * index
    img[..., 1] = 130 + 60 * y - 40 * x
    img[..., 2] = 220 - 150 * y
    cx, cy, r = (0.3 + 0.1 * index) * w, 0.55 * h, 0.12 * h
    img[(x * w - cx) ** 2 + (y * h - cy) ** 2 < r * r] = (200, 40, 30)
    img[int(0.7 * h) : int(0.8 * h), int(0.5 * w) : int(0.75 * w)] = (40, 60, 150)
    img += rng.normal(0, 5, img.shape).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.{fmt}")
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(tmp, **({"quality": 90} if fmt == "jpg" else {}))
    tmp.replace(path)
    return path


def uhd_samples() -> list[dict[str, Any]]:
    return [{"image": str(uhd_file(i, fmt))} for i, fmt in enumerate(UHD_FILES)]


# ------------------------------------------------------------------------------------------------ image_quality
TOPIQ_FILE = "cfanet_nr_koniq_res50-9a73138b.pth"  # pyiqa's release file of topiq_nr (its default metric)
TOPIQ_URL = f"https://huggingface.co/chaofengc/IQA-PyTorch-Weights/resolve/main/{TOPIQ_FILE}"


def _topiq_build(folder: Path) -> None:
    """pyiqa's CFANet as ``topiq_nr`` builds it (ResNet-50 backbone, its DEFAULT_CONFIGS options), random init,
    saved as pyiqa's release files are: ``torch.save({'params': state_dict})``."""
    import torch
    from pyiqa.archs.topiq_arch import CFANet
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    options = {k: v for k, v in DEFAULT_CONFIGS["topiq_nr"]["metric_opts"].items() if k != "type"}
    torch.manual_seed(0)
    net = CFANet(**options, pretrained=False, backbone_pretrain=False)
    torch.save({"params": net.state_dict()}, folder / TOPIQ_FILE)


def _topiq_reference(folder: Path):
    """pyiqa's own loader: ``create_metric('topiq_nr', pretrained_model_path=file)`` (``load_pretrained_network``,
    weight key ``params``); timm's ImageNet backbone download, which the file's weights replace, turned off."""
    from unittest import mock

    import pyiqa
    import timm

    create = timm.create_model
    with mock.patch.object(timm, "create_model", lambda *a, **k: create(*a, **{**k, "pretrained": False})):
        metric = pyiqa.create_metric("topiq_nr", device="cpu", pretrained_model_path=str(folder / TOPIQ_FILE))
    return metric.net.eval()


def _one_image(proc: Any, reward: Any, samples: list[dict[str, Any]]):
    """The working set: the same processor call on ONE of the 4K files (its decoding, its float conversion and pyiqa's
    network on it); the batch's call may add only its other images' 8-bit bytes and slack (the media rule)."""
    from scale.common import _score

    return lambda: _score(proc, samples[:1])


# ------------------------------------------------------------------------------------------------ open_clip
def _open_clip_dir(folder: Path, arch: str) -> None:
    """open_clip's hub layout (``open_clip_config.json`` + ``open_clip_model.safetensors``, as
    timm/vit_base_patch32_clip_224.openai ships it) of ``arch`` with random weights."""
    import open_clip

    from rewardzoo.testing.clip import CLIP_PREPROCESS, tiny_open_clip_dir

    tiny_open_clip_dir(folder, model_cfg=open_clip.get_model_config(arch), preprocess_cfg=CLIP_PREPROCESS)


def _open_clip_reference(arch: str, file: str):
    def load(folder: Path):
        import open_clip

        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=str(folder / file))
        return model.eval()

    return load


def _hps_build(folder: Path) -> None:
    import open_clip

    from rewardzoo.testing.clip import hps_checkpoint

    hps_checkpoint(folder / "HPS_v2.1_compressed.pt", model_cfg=open_clip.get_model_config("ViT-H-14"))


# ------------------------------------------------------------------------------------------------ PickScore
def pickscore_config():
    """transformers ``CLIPConfig`` of PickScore_v1 (= laion/CLIP-ViT-H-14-laion2B-s32B-b79K's config.json)."""
    from transformers import CLIPConfig

    return CLIPConfig(
        text_config={
            "vocab_size": 49408,
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "max_position_embeddings": 77,
            "hidden_act": "gelu",
            "bos_token_id": 49406,
            "eos_token_id": 49407,
            "pad_token_id": 1,
        },
        vision_config={
            "hidden_size": 1280,
            "intermediate_size": 5120,
            "num_hidden_layers": 32,
            "num_attention_heads": 16,
            "image_size": 224,
            "patch_size": 14,
            "hidden_act": "gelu",
        },
        projection_dim=1024,
        logit_scale_init_value=2.6592,
    )


def _pickscore_build(folder: Path) -> None:
    import torch
    from transformers import CLIPImageProcessor, CLIPModel, CLIPProcessor

    from rewardzoo.testing.clip import clip_tokenizer

    torch.manual_seed(0)
    model = CLIPModel(pickscore_config()).eval()
    model.save_pretrained(folder, max_shard_size="20GB")  # PickScore_v1: one model.safetensors (3.94 GB)
    del model
    processor = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    CLIPProcessor(image_processor=processor, tokenizer=clip_tokenizer()).save_pretrained(folder)


def _pickscore_reference(folder: Path):
    from transformers import CLIPModel

    return CLIPModel.from_pretrained(folder).eval()  # PickScore's README: AutoModel.from_pretrained(...).eval()


# ------------------------------------------------------------------------------------------------ LAION aesthetic
def _aesthetic_build(folder: Path) -> None:
    from rewardzoo.testing.aesthetic import aesthetic_head_file

    _open_clip_dir(folder / "clip", "ViT-L-14")
    aesthetic_head_file(folder / "sac+logos+ava1-l14-linearMSE.pth")


def _aesthetic_reference(folder: Path):
    import torch

    from rewardzoo.testing.aesthetic import ReferenceAestheticMLP

    clip = _open_clip_reference("ViT-L-14", "open_clip_model.safetensors")(folder / "clip")
    head = ReferenceAestheticMLP(768)  # the predictor's simple_inference.py: MLP(768), torch.load, load_state_dict
    head.load_state_dict(torch.load(folder / "sac+logos+ava1-l14-linearMSE.pth", map_location="cpu", weights_only=True))
    return clip, head.eval()


# ------------------------------------------------------------------------------------------------ ImageReward
#: BLIP ViT-L as ImageReward builds it (``BLIP_Pretrain(image_size=224, vit='large')``: ``create_vit('large')``).
BLIP_VIT_L = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 16,
    "layer_norm_eps": 1e-6,
}
#: rewardzoo names -> the published ImageReward.pt names (BLIP's timm ViT, med.py BERT, the MLP's Sequential)
PUBLISHED = [
    (r"^visual_encoder\.embeddings\.class_embedding$", "blip.visual_encoder.cls_token"),
    (r"^visual_encoder\.embeddings\.position_embedding$", "blip.visual_encoder.pos_embed"),
    (r"^visual_encoder\.embeddings\.patch_embedding\.", "blip.visual_encoder.patch_embed.proj."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.layer_norm1\.", r"blip.visual_encoder.blocks.\1.norm1."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.layer_norm2\.", r"blip.visual_encoder.blocks.\1.norm2."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.self_attn\.qkv\.", r"blip.visual_encoder.blocks.\1.attn.qkv."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.self_attn\.projection\.", r"blip.visual_encoder.blocks.\1.attn.proj."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.mlp\.", r"blip.visual_encoder.blocks.\1.mlp."),
    (r"^visual_encoder\.post_layernorm\.", "blip.visual_encoder.norm."),
    (r"^text_encoder\.", "blip.text_encoder."),
    (r"^mlp\.", "mlp.layers."),
]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *PROMPT.replace(",", " ,").split()]


def _image_reward_build(folder: Path) -> None:
    import torch
    from transformers import BertTokenizer, BlipTextConfig, BlipVisionConfig

    from rewardzoo.rewards.image.image_reward import MED_CONFIG, ImageRewardModel

    torch.manual_seed(0)
    model = ImageRewardModel(BlipVisionConfig(**BLIP_VIT_L), BlipTextConfig(**MED_CONFIG, encoder_hidden_size=1024))
    state = {}
    for key, value in model.state_dict().items():
        name = next((re.sub(p, r, key) for p, r in PUBLISHED if re.search(p, key)), None)
        if name is None:
            raise AssertionError(f"no published name for {key}")
        state[name] = value
    del model
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(MED_CONFIG["max_position_embeddings"])[None]
    state["blip.vision_proj.weight"], state["blip.vision_proj.bias"] = torch.randn(256, 1024) * 0.02, torch.zeros(256)
    state["blip.text_proj.weight"], state["blip.text_proj.bias"] = torch.randn(256, 768) * 0.02, torch.zeros(256)
    torch.save(state, folder / "ImageReward.pt")  # THUDM/ImageReward: ImageReward.pt (a plain state dict) + med_config
    (folder / "med_config.json").write_text(
        json.dumps({**MED_CONFIG, "add_cross_attention": True, "encoder_width": 1024, "architectures": ["BertModel"]})
    )
    (folder / "vocab.txt").write_text("\n".join(dict.fromkeys(VOCAB)) + "\n")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))


def _image_reward_reference(folder: Path):
    """ImageReward's own ``load``: ``torch.load`` of the state dict, then ``load_state_dict(strict=False)`` into
    the package's BLIP (its ViT-L and med.py BERT) + MLP, where the ``image-reward`` package imports (its model
    modules, as tests/verifiers/image_reward_tiny.py imports them beside transformers 5)."""
    import torch

    from tests.verifiers.image_reward_tiny import package_modules

    vit, med, ir = package_modules()
    state = torch.load(folder / "ImageReward.pt", map_location="cpu", weights_only=True)
    config = med.BertConfig(**json.loads((folder / "med_config.json").read_text()))
    blip = torch.nn.Module()
    blip.visual_encoder = vit.VisionTransformer(img_size=224, patch_size=16, embed_dim=1024, depth=24, num_heads=16)
    blip.text_encoder = med.BertModel(config, add_pooling_layer=False)
    blip.vision_proj, blip.text_proj = torch.nn.Linear(1024, 256), torch.nn.Linear(768, 256)
    model = torch.nn.Module()
    model.blip, model.mlp = blip, ir.MLP(768)
    model.load_state_dict(state, strict=False)
    del state
    return model.eval()


# ------------------------------------------------------------------------------------------------ GARDO DINOv3
def _dinov3_build(folder: Path) -> None:
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model(DINOV3, pretrained=False)
    # timm/vit_large_patch16_dinov3.lvd1689m: config.json + model.safetensors
    timm.models.save_for_hf(model, str(folder), safe_serialization=True)


def _dinov3_reference(folder: Path):
    import timm

    return timm.create_model(f"local-dir:{folder}", pretrained=True).eval()  # GARDO: create_model(pretrained=True)


CASES = [
    Case(
        name="image_quality",
        stands_for=(TOPIQ_URL,),
        matches={"metric": "topiq_nr"},
        reward="image_quality",
        build=_topiq_build,
        entry=lambda folder: {"model_path": str(folder / TOPIQ_FILE), "kwargs": {"metric": "topiq_nr"}},
        reference=_topiq_reference,
        samples=uhd_samples,
        offload_samples=lambda: uhd_samples()[:1],
        media_bytes=len(UHD_FILES) * UHD[0] * UHD[1] * 3,
        working_set=_one_image,
        calls=1,
        warmup=lambda: uhd_samples()[:1],
        imports=("torch", "timm", "pyiqa.archs.topiq_arch"),
        layout=f"{TOPIQ_FILE}: torch.save({{'params': state_dict}}) of pyiqa's CFANet (topiq_nr, ResNet-50), "
        "pyiqa's release file",
        notes="metric topiq_nr (the card's default); one call = 4 files of 3840x2160 (2 PNG, 2 JPEG q90; 99.5 MB "
        "decoded), scored at full resolution as pyiqa does (topiq_nr has no test-time resize); a warm-up call on one "
        "file, then the call of 4 (timed), then the working set: the call on one file; drop / cpu score the first "
        "file before and after the wake",
    ),
    Case(
        name="pickscore",
        stands_for=("yuvalkirstain/PickScore_v1",),
        reward="pickscore",
        build=_pickscore_build,
        entry=lambda folder: {"model_path": str(folder)},
        reference=_pickscore_reference,
        samples=lambda: [image_sample()],
        imports=HF_IMPORTS,
        layout="transformers CLIPModel directory, one model.safetensors + tokenizer/processor files "
        "(yuvalkirstain/PickScore_v1), CLIP ViT-H/14 986M parameters",
    ),
    Case(
        name="hpsv2",
        stands_for=("xswu/HPSv2",),
        reward="hpsv2",
        build=_hps_build,
        entry=lambda folder: {
            "model_path": str(folder / "HPS_v2.1_compressed.pt"),
            "kwargs": {"clip_model": "ViT-H-14"},
        },
        reference=_open_clip_reference("ViT-H-14", "HPS_v2.1_compressed.pt"),
        samples=lambda: [image_sample()],
        imports=OPEN_CLIP_IMPORTS,
        layout="torch.save({'state_dict': ...}) .pt of open_clip ViT-H-14 (xswu/HPSv2 HPS_v2.1_compressed.pt), float32",
    ),
    Case(
        name="clip_score",
        stands_for=("ViT-B-32",),
        reward="clip_score",
        build=lambda folder: _open_clip_dir(folder, "ViT-B-32"),
        entry=lambda folder: {"model_path": str(folder)},
        reference=_open_clip_reference("ViT-B-32", "open_clip_model.safetensors"),
        samples=lambda: [image_sample()],
        imports=OPEN_CLIP_IMPORTS,
        layout="open_clip hub directory: open_clip_config.json + open_clip_model.safetensors "
        "(timm/vit_base_patch32_clip_224.openai)",
    ),
    Case(
        name="laion_aesthetic",
        stands_for=(AESTHETIC_HEAD_URL,),
        reward="laion_aesthetic",
        build=_aesthetic_build,
        entry=lambda folder: {
            "model_path": str(folder / "sac+logos+ava1-l14-linearMSE.pth"),
            "kwargs": {"clip_model": str(folder / "clip"), "clip_pretrained": None},
        },
        reference=_aesthetic_reference,
        samples=lambda: [image_sample()],
        imports=OPEN_CLIP_IMPORTS,
        layout="open_clip ViT-L-14 hub directory (open_clip_model.safetensors, timm/vit_large_patch14_clip_224.openai) "
        "+ the head as a torch.save .pth (sac+logos+ava1-l14-linearMSE.pth)",
    ),
    Case(
        name="image_reward",
        stands_for=("THUDM/ImageReward",),
        reward="image_reward",
        build=_image_reward_build,
        entry=lambda folder: {"model_path": str(folder)},
        reference=_image_reward_reference,
        samples=lambda: [image_sample()],
        imports=HF_IMPORTS,
        layout="ImageReward.pt (torch.save of a plain state dict, float32) + med_config.json (THUDM/ImageReward); "
        "BLIP ViT-L/16 224 px + BERT-base with cross-attention + MLP",
        notes="vocab.txt is a small word list (the model's 30524-token embedding is full size)",
    ),
    Case(
        name="group_diversity.gardo",
        matches={"preset": "gardo"},
        stands_for=(DINOV3,),
        reward="group_diversity",
        build=_dinov3_build,
        entry=lambda folder: {"model_path": str(folder), "kwargs": {"preset": "gardo"}},
        reference=_dinov3_reference,
        samples=lambda: [image_sample(seed=i, group="g0") for i in range(4)],
        imports=("torch", "timm", "safetensors.torch"),
        layout="timm hub directory: config.json + model.safetensors (timm/vit_large_patch16_dinov3.lvd1689m)",
        notes="one group of 4 images per call (groupwise); figures per sample divide by 4",
    ),
]
