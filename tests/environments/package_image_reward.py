"""The ``image-reward`` package's own ImageReward, run in a worker whose environment satisfies its real imports
(transformers 4, timm 0.6.13, OpenAI ``clip`` from clip-anytorch, fairscale, diffusers), on the tiny checkpoint
of tests/verifiers/test_verifiers_image_reward.py: its ViT and med.py BERT built at the checkpoint's sizes (the
package's constructor builds only the published large sizes), its ``score`` method, preprocessing and MLP."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from rewardzoo.rewards.base import Inputs, PointwiseReward, RewardOutput


class PackageImageReward(PointwiseReward):
    inputs = Inputs(("image", "prompt"))
    score_range = (-1e6, 1e6)

    def __init__(self, model_path=None, device="cpu", dtype="float32", size: int = 32, width: int = 128):
        super().__init__(model_path, device, dtype)
        import torch
        import transformers
        from transformers import BertTokenizer

        import ImageReward  # noqa: F401  the package as published: its __init__ imports clip and ReFL (diffusers)
        from ImageReward.models.BLIP import med, vit

        ir = importlib.import_module("ImageReward.ImageReward")
        path = Path(model_path)
        text = json.loads((path / "med_config.json").read_text())
        blip = torch.nn.Module()
        blip.visual_encoder = vit.VisionTransformer(img_size=size, patch_size=16, embed_dim=width, depth=2,
                                                    num_heads=2)
        blip.text_encoder = med.BertModel(med.BertConfig(**text), add_pooling_layer=False)
        blip.vision_proj, blip.text_proj = torch.nn.Linear(width, 8), torch.nn.Linear(text["hidden_size"], 8)
        tokenizer = BertTokenizer(str(path / "vocab.txt"))
        tokenizer.add_special_tokens({"bos_token": "[DEC]"})  # as the package's init_tokenizer does
        tokenizer.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
        blip.tokenizer = tokenizer
        model = ir.ImageReward.__new__(ir.ImageReward)
        torch.nn.Module.__init__(model)
        model.device, model.blip, model.mlp = "cpu", blip, ir.MLP(text["hidden_size"])
        model.preprocess = ir._transform(size)
        model.mean, model.std = 0.16717362830052426, 1.0333394966054072  # the package's constants
        model.load_state_dict(torch.load(path / "ImageReward.pt", weights_only=True), strict=True)
        self.model, self.torch, self.versions = model.eval(), torch, f"{transformers.__version__}"

    def __call__(self, image, prompt):
        with self.torch.no_grad():
            scores = [float(self.model.score(p, img)) for p, img in zip(prompt, image)]
        return RewardOutput(scores, {"transformers": [self.versions] * len(scores)})
