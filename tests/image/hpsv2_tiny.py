"""The ``hpsv2`` package's scoring over the tiny open_clip of the tests (``rewardzoo.testing``): rewardzoo's
reference wrapper with the package's own model factory (its vendored open_clip) building the tiny architecture in
place of ViT-H-14 (``img_score.initialize_model`` builds only that, and downloads its LAION weights)."""

from __future__ import annotations

import json
from pathlib import Path

from rewardzoo.rewards.references.hpsv2 import ReferenceHPSv2

#: The name the tiny architecture is registered under in the package's model configs.
TINY = "rewardzoo-tiny"


class TinyReferenceHPSv2(ReferenceHPSv2):
    """``clip_model``: a directory of ``rewardzoo.testing.tiny_open_clip_dir`` (its ``open_clip_config.json``)."""

    def install_model(self, img_score, clip_model):
        from hpsv2.src.open_clip import factory

        config = json.loads((Path(clip_model) / "open_clip_config.json").read_text())
        factory._MODEL_CONFIGS[TINY] = config["model_cfg"]
        # the arguments of the package's initialize_model, but the tiny architecture and no pretrained tower
        model, _, preprocess_val = factory.create_model_and_transforms(
            TINY,
            None,
            precision="fp32",
            device=img_score.device,
            jit=False,
            force_quick_gelu=False,
            force_custom_text=False,
            force_patch_dropout=False,
            force_image_size=None,
            pretrained_image=False,
            image_mean=None,
            image_std=None,
            light_augmentation=True,
            aug_cfg={},
            output_dict=True,
            with_score_predictor=False,
            with_region_predictor=False,
        )
        img_score.model_dict.update(model=model, preprocess_val=preprocess_val)
