"""Latent rewards: they score the generator's latent (a sample's ``latent`` field) with no VAE decode.

- ``dina_lrm`` — DiNa-LRM (HKUST-C4G/diffusion-rm): a reward head on the first blocks of SD3.5-Medium's
  transformer (``dina_head``: the head itself).
- ``lrm`` — LRM (Kwai-Kolors/LPO): a fine-tuned SD1.5 / SDXL UNet's down and mid features of the noisy latent
  against the prompt's CLIP features.

Imports as every reward family does (see :mod:`rewardzoo.rewards`): the contract, the models floor
(:mod:`rewardzoo.rewards.models`, the SD3 parts in ``models.sd3``), :mod:`rewardzoo.shared` and
:mod:`rewardzoo.errors`; never another family. torch at module level (imported only when a latent reward is built);
diffusers and transformers inside the floor's loaders.
"""
