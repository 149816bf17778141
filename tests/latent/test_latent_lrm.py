"""lrm against LPO's latent reward model, step by step, on tiny SD1.5- and SDXL-shaped checkpoints.

Kwai-Kolors/LPO is not on PyPI and CI cannot reach GitHub, so :class:`_Reference` recomputes the reference's
``get_preference_score`` from diffusers' and transformers' own modules, one step per cited line of
Kwai-Kolors/LPO@9c2e8b8 (``lpo/lpo/preference_models/models/sd15_preference_model.py`` = ``sd15``,
``sdxl_base_preference_model.py`` = ``sdxl``, ``unet_2d_condition_reward.py`` = ``unet``): the *full* diffusers UNet
forward with hooks on its down blocks and mid block (rewardzoo runs its own down + mid pass without the up blocks),
the residual indices the reference hard-codes, DDPMScheduler's own ``add_noise``.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("open_clip")
F = torch.nn.functional

from rewardzoo import RewardProcessor, Sample
from rewardzoo.core.api import load_reward
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.testing.latent import tiny_lrm_dir, tiny_sd_dir

PROMPTS = [
    "a red cat sitting on the wooden floor",
    "a girl walking in the street",
    "a red cat sitting on the wooden floor",
]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lrm")
    out = {}
    for xl in (False, True):
        base = tiny_sd_dir(root / f"base{int(xl)}", xl=xl, seed=0)
        out[xl] = base, tiny_lrm_dir(root / f"lrm{int(xl)}" / ("lrm_sdxl" if xl else "lrm_sd15"), base, xl=xl, seed=1)
    return out


def _load(dirs, xl=False, **kwargs):
    base, ckpt = dirs[xl]
    options = {"base_model_path": str(base), **kwargs}
    return load_reward({"name": "lrm", "model_path": str(ckpt), "device": "cpu", "dtype": "float32", "kwargs": options})


@pytest.fixture(scope="module")
def reward(dirs):
    return _load(dirs)


@pytest.fixture(scope="module")
def latents():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(4, 8, 8, generator=g), torch.randn(4, 8, 16, generator=g), torch.randn(4, 8, 8, generator=g)]


# ---------------------------------------------------------------------------------------- the reference, re-stepped
class _Reference:
    """SD15PreferenceModel / SDXLBasePreferenceModel after ``load(ft_model_path)`` (sd15 200-212, sdxl 261-279)."""

    def __init__(self, base, ckpt, xl, guidance_scale=7.5):
        from diffusers import DDPMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

        self.xl, self.g = xl, guidance_scale
        self.tokenizers = [CLIPTokenizer.from_pretrained(base / "tokenizer")]  # sd15 37, sdxl 44-46
        self.encoders = [CLIPTextModel.from_pretrained(ckpt / "text_encoder").eval()]  # sd15 204
        if xl:
            self.tokenizers.append(CLIPTokenizer.from_pretrained(base / "tokenizer_2"))
            self.encoders.append(CLIPTextModelWithProjection.from_pretrained(ckpt / "text_encoder_2").eval())
        self.unet = UNet2DConditionModel.from_pretrained(ckpt / "unet").eval()  # sd15 201
        self.scheduler = DDPMScheduler.from_pretrained(base / "scheduler")  # sd15 40 (lrm_15 43)
        state = torch.load(ckpt / "state_dict.pt", weights_only=True)  # sd15 208-211
        self.visual = state["visual_projection"]["weight"]
        self.text_projection = None if xl else state["text_projection"]["weight"]
        self.logit_scale = torch.as_tensor(state["logit_scale"])
        self.height = self.unet.config.sample_size * 8  # sdxl 71-74

    def ids(self, prompts):  # sd15 214-222, sdxl 282-297; the negative prompt "" (sd15 80-86)
        return [
            t(
                prompts + [""] * len(prompts),
                padding="max_length",
                max_length=t.model_max_length,
                truncation=True,
                return_tensors="pt",
            ).input_ids
            for t in self.tokenizers
        ]

    def text(self, prompts):  # sd15 94-107, sdxl 125-146 (prompts then as many empty prompts)
        ids = self.ids(prompts)
        if not self.xl:
            hidden, pooled = self.encoders[0](ids[0], return_dict=False)[:2]
            return hidden, None, (pooled @ self.text_projection.T).chunk(2)[0]
        a = self.encoders[0](ids[0], output_hidden_states=True)
        b = self.encoders[1](ids[1], output_hidden_states=True)
        hidden = torch.cat([a.hidden_states[-2], b.hidden_states[-2]], dim=-1)  # sdxl 137-140
        return hidden, b[0], b[0].chunk(2)[0]  # sdxl 134-145

    def features(self, hidden, pooled, latents, t):  # sd15 109-166, sdxl 149-220
        x = torch.cat([latents] * 2)  # sd15 110-112
        t = torch.cat([t] * 2)
        got = {}
        hooks = [
            blk.register_forward_hook(lambda m, i, o, k=k: got.__setitem__(k, o[1]))
            for k, blk in enumerate(self.unet.down_blocks)
        ]
        hooks.append(self.unet.mid_block.register_forward_hook(lambda m, i, o: got.__setitem__("mid", o)))
        added = None
        if self.xl:  # sdxl 154-172
            ids = torch.tensor([[self.height, self.height, 0, 0, self.height, self.height]], dtype=hidden.dtype)
            added = {"text_embeds": pooled, "time_ids": ids.repeat(t.shape[0], 1)}
        self.unet(x, t, encoder_hidden_states=hidden, added_cond_kwargs=added)  # the full forward, up blocks too
        for h in hooks:
            h.remove()
        res = (None,) + tuple(r for k in range(len(self.unet.down_blocks)) for r in got[k])  # conv_in's output first
        stages = [2, 5, 8, 11] if not self.xl else [2, 5, 8]  # sd15 117-120, sdxl 179-181
        pooled_stages = [F.adaptive_avg_pool2d(res[i], 1).squeeze(-1).squeeze(-1).chunk(2)[0] for i in stages]
        mid_c, mid_u = F.adaptive_avg_pool2d(got["mid"], 1).squeeze(-1).squeeze(-1).chunk(2)  # sd15 126-129
        mid = mid_u + self.g * (mid_c - mid_u)
        return torch.cat([*pooled_stages, mid], dim=-1) @ self.visual.T  # sd15 156-157 (multi_scale_cfg False)

    def score(self, prompts, latents, timestep=1, noise=None):  # sd15 244-263, sdxl 319-338
        x = torch.stack(latents)
        t = torch.full((x.shape[0],), timestep, dtype=torch.long)
        if noise is not None:  # lrm_15 sd15_preference_model.py 110-115
            x = self.scheduler.add_noise(x, noise, t)
        hidden, pooled, text = self.text(prompts)
        image = self.features(hidden, pooled, x, t)
        image = image / torch.norm(image, dim=-1, keepdim=True)
        text = text / torch.norm(text, dim=-1, keepdim=True)
        return self.logit_scale.exp() * (image * text).sum(dim=-1)


@pytest.fixture(scope="module")
def reference(dirs):
    return _Reference(*dirs[False], xl=False)


def _by_shape(ref, prompts, latents, **kw):
    with torch.no_grad():
        return torch.stack([ref.score([p], [x], **kw)[0] for p, x in zip(prompts, latents)])


# -------------------------------------------------------------------------------------------------------- tests
def test_sd15_scores_match_the_reference(reward, reference, latents):
    expected = _by_shape(reference, PROMPTS, latents)
    out = reward(prompt=PROMPTS, latent=latents).rewards
    torch.testing.assert_close(out, expected.float(), rtol=1e-4, atol=1e-5)
    assert reward.taps == [2, 5, 8, 11] and out.abs().min() > 1e-2 and len(set(out.tolist())) == 3


def test_sdxl_scores_match_the_reference(dirs, latents):
    xl = _load(dirs, xl=True, subfolder=None)
    with torch.no_grad():
        expected = _by_shape(_Reference(*dirs[True], xl=True), PROMPTS[:2], latents[:2])
    torch.testing.assert_close(
        xl(prompt=PROMPTS[:2], latent=latents[:2]).rewards, expected.float(), rtol=1e-4, atol=1e-5
    )
    assert xl.backbone == "sdxl" and xl.taps == [2, 5, 8]


def test_the_timestep_the_noise_and_the_guidance_each_change_the_score(dirs, reward, reference, latents):
    ours = reward(prompt=PROMPTS[:1], latent=latents[:1]).rewards
    later = _load(dirs, timestep=501)
    noised = _load(dirs, timestep=501, add_noise=True, noise_seed=3)
    plain = _load(dirs, guidance_scale=1.0)
    others = [m(prompt=PROMPTS[:1], latent=latents[:1]).rewards for m in (later, noised, plain)]
    for other in others:
        assert (ours - other).abs().max() > 1e-3
    noise = torch.randn(latents[0].shape, generator=torch.Generator().manual_seed(3))[None]
    torch.testing.assert_close(
        others[0], _by_shape(reference, PROMPTS[:1], latents[:1], timestep=501), rtol=1e-4, atol=1e-5
    )
    with torch.no_grad():
        expected = reference.score(PROMPTS[:1], latents[:1], timestep=501, noise=noise)
    torch.testing.assert_close(others[1], expected, rtol=1e-4, atol=1e-5)


def test_scores_do_not_depend_on_the_batch_and_the_latent_field_flows_through_the_processor(dirs, reward, latents):
    alone = [float(reward(prompt=[p], latent=[x]).rewards[0]) for p, x in zip(PROMPTS, latents)]
    base, ckpt = dirs[False]
    proc = RewardProcessor(
        [{"name": "lrm", "model_path": str(ckpt), "batch_size": 2, "kwargs": {"base_model_path": str(base)}}]
    )
    res = proc(
        [Sample(prompt=p, latent=x.numpy() if i == 1 else x[None]) for i, (p, x) in enumerate(zip(PROMPTS, latents))]
    )
    torch.testing.assert_close(torch.as_tensor(res.rewards["lrm"]), torch.tensor(alone), rtol=1e-5, atol=1e-6)


def test_bad_latents_and_checkpoints_are_named(dirs, reward, latents, tmp_path):
    with pytest.raises(InputError, match=r"\(4, H, W\)") as info:
        reward(prompt=PROMPTS[:2], latent=[latents[0], torch.randn(16, 8, 8)])
    assert (info.value.field, info.value.sample) == ("latent", 1)
    with pytest.raises(InputError, match="NaN"):
        reward(prompt=PROMPTS[:1], latent=[torch.full((4, 8, 8), float("nan"))])
    with pytest.raises(ConfigError, match="lrm_sdxl"):  # the parent folder: its sub-folder is named
        load_reward({"name": "lrm", "model_path": str(dirs[True][1].parent)})
    with pytest.raises(ConfigError, match="state_dict.pt"):
        load_reward({"name": "lrm", "model_path": str(tmp_path)})


def test_the_plan_counts_the_unet_it_holds_and_the_text_encoders(dirs, reward):
    from rewardzoo.registry import resolve
    from rewardzoo.shared.checkpoints import checkpoint_bytes

    ckpt = dirs[False][1]
    parts = resolve("lrm").weight_files(str(ckpt), {})
    assert [p.missing for p in parts] == [None] * 3
    state, unet, text = parts
    held = sum(t.numel() * t.element_size() for t in reward.unet.state_dict().values())
    assert checkpoint_bytes(unet.files, "float32", exclude=unet.exclude).total == held  # up blocks not counted
    assert text.files[0].parent == ckpt / "text_encoder" and state.files[0].name == "state_dict.pt"
    xl = resolve("lrm").weight_files(str(dirs[True][1].parent), {"subfolder": "lrm_sdxl"})
    assert [p.missing for p in xl] == [None] * 4
