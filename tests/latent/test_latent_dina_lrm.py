"""dina_lrm against DiNa-LRM's own inference, step by step, on a tiny SD3-shaped pipeline and checkpoint.

diffusion-rm is not on PyPI and CI cannot reach GitHub, so :func:`reference_raw` recomputes the reference's
inference from diffusers' and transformers' modules and PEFT, one step per cited line of
HKUST-C4G/diffusion-rm@af485b4 (``diffusion_rm/infer/inference.py`` ``DRMInferencer``,
``diffusion_rm/models/sd3_rm.py``, ``diffusion_rm/models/reward_head.py``): PEFT's own LoRA on the unmerged
backbone (rewardzoo merges it), the head as functions of the saved tensors (rewardzoo has a module), the noise the
reference draws with ``randn_like`` after seeding torch's generator.
"""

from __future__ import annotations

import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("peft")
pytest.importorskip("open_clip")
F = torch.nn.functional

from rewardzoo import RewardProcessor, Sample
from rewardzoo.core.api import load_reward
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.testing.latent import tiny_dina_lrm_dir, tiny_sd3_dir

PROMPTS = [
    "a red cat sitting on the wooden floor",
    "a girl walking in the street",
    "a red cat sitting on the wooden floor",
]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dina")
    base = tiny_sd3_dir(root / "sd3", seed=0)
    return base, tiny_dina_lrm_dir(root / "dina", base, seed=1)


@pytest.fixture(scope="module")
def reward(dirs):
    return load_reward({"name": "dina_lrm", "model_path": str(dirs[1]), "device": "cpu", "dtype": "float32"})


@pytest.fixture(scope="module")
def latents():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(16, 8, 8, generator=g), torch.randn(16, 8, 12, generator=g), torch.randn(16, 8, 8, generator=g)]


# ---------------------------------------------------------------------------------------- the reference, re-stepped
class _Reference:
    """DRMInferencer's state for one checkpoint: pipeline parts, the PEFT backbone with ``rm_lora``, head tensors."""

    def __init__(self, base, ckpt, *, lora: bool = True):
        import json

        from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel
        from peft import LoraConfig, get_peft_model
        from transformers import AutoTokenizer, CLIPTextModelWithProjection, T5EncoderModel

        self.config = json.loads((ckpt / "config.json").read_text())  # inference.py 28-35 (yaml.safe_load of JSON)
        model = self.config["model"]
        self.tokenizers = [AutoTokenizer.from_pretrained(base / p) for p in ("tokenizer", "tokenizer_2", "tokenizer_3")]
        self.encoders = [
            CLIPTextModelWithProjection.from_pretrained(base / "text_encoder").eval(),
            CLIPTextModelWithProjection.from_pretrained(base / "text_encoder_2").eval(),
            T5EncoderModel.from_pretrained(base / "text_encoder_3").eval(),
        ]
        transformer = SD3Transformer2DModel.from_pretrained(base / "transformer").eval()
        n = model["num_transformer_layers"]
        self.visual_idx, self.text_idx = model["visual_head_idx"], model["text_head_idx"]

        class SD3Backbone(torch.nn.Module):  # sd3_rm.py 143-156: embedders + transformer_blocks[:N]
            def __init__(self):
                super().__init__()
                self.pos_embed = transformer.pos_embed
                self.time_text_embed = transformer.time_text_embed
                self.context_embedder = transformer.context_embedder
                self.transformer_blocks = torch.nn.ModuleList(transformer.transformer_blocks[:n])

            def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep, visual, text):
                hidden_states = self.pos_embed(hidden_states)  # sd3_rm.py 171-173
                temb = self.time_text_embed(timestep, pooled_projections)
                encoder_hidden_states = self.context_embedder(encoder_hidden_states)
                vis = [hidden_states] if visual[0] == 0 else []  # sd3_rm.py 176-177
                txt = [encoder_hidden_states] if text[0] == 0 else []
                for index_block, block in enumerate(self.transformer_blocks):  # sd3_rm.py 178-189
                    encoder_hidden_states, hidden_states = block(
                        hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states, temb=temb
                    )
                    if index_block + 1 in visual:
                        vis.append(hidden_states)
                    if index_block + 1 in text:
                        txt.append(encoder_hidden_states)
                return temb, vis, txt

        backbone = SD3Backbone()
        if lora:
            targets = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"]
            cfg = model["lora_config"]  # sd3_rm.py 221-250 (exclude_modules None: the last text tap is block N)
            backbone = get_peft_model(
                backbone,
                LoraConfig(
                    r=cfg["r"],
                    lora_alpha=cfg["lora_alpha"],
                    init_lora_weights=cfg["init_lora_weights"],
                    target_modules=targets,
                    exclude_modules=None,
                ),
            )
            backbone.load_adapter(
                str(ckpt / "checkpoint" / "backbone_lora"), adapter_name="rm_lora"
            )  # inference.py 150
            backbone.set_adapter("rm_lora")  # inference.py 107
        self.backbone = backbone.eval()
        self.head = torch.load(ckpt / "checkpoint" / "rm_head.pt", weights_only=True)  # inference.py 155-159
        self.used: set[str] = set()
        # inference.py 70-71: a fresh scheduler of the pipeline's class from its config
        self.scheduler = FlowMatchEulerDiscreteScheduler.from_config(
            FlowMatchEulerDiscreteScheduler.load_config(str(base / "scheduler"))
        )

    def encode_prompt(self, prompts, max_sequence_length):  # sd3_rm.py 95-140
        clip_embeds, pooled = [], []
        for tok, enc in zip(self.tokenizers[:2], self.encoders[:2]):  # sd3_rm.py 56-92
            ids = tok(prompts, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
            out = enc(ids, output_hidden_states=True)
            pooled.append(out[0])
            clip_embeds.append(out.hidden_states[-2])
        ids = self.tokenizers[2](  # sd3_rm.py 16-53
            prompts,
            padding="max_length",
            max_length=max_sequence_length,
            truncation=True,
            add_special_tokens=True,
            return_tensors="pt",
        ).input_ids
        t5 = self.encoders[2](ids)[0]
        clip = torch.cat(clip_embeds, dim=-1)
        clip = F.pad(clip, (0, t5.shape[-1] - clip.shape[-1]))  # sd3_rm.py 135-138
        return torch.cat([clip, t5], dim=-2), torch.cat(pooled, dim=-1)

    def w(self, key):
        self.used.add(key)
        return self.head[key]

    def lin(self, x, prefix):
        return F.linear(x, self.w(prefix + ".weight"), self.w(prefix + ".bias"))

    def rms(self, x, prefix):  # nn.RMSNorm(dim), eps None: the dtype's eps
        return F.rms_norm(x, (x.shape[-1],), self.w(prefix + ".weight"))

    def film(self, x, t, prefix):  # reward_head.py 32-47 (proj_in Identity: in_dim == width, use_proj_in False)
        style = self.lin(F.silu(self.lin(t, prefix + ".cond_mlp.0")), prefix + ".cond_mlp.2")
        gamma, beta = style.chunk(2, dim=-1)
        x = x * (1 + gamma.unsqueeze(1)) + beta.unsqueeze(1)
        return self.lin(x + self.w(prefix + ".layer_embed"), prefix + ".proj")

    def sdpa(self, q, k, v, heads):  # reward_head.py 125-145
        b, n, d = q.shape
        sh = [x.view(b, x.shape[1], heads, d // heads).transpose(1, 2) for x in (q, k, v)]
        return F.scaled_dot_product_attention(*sh).transpose(1, 2).reshape(b, n, d)

    def cross(self, queries, vis, text, prefix, heads, gated):  # reward_head.py 147-189
        q = self.lin(self.rms(queries, prefix + ".norm_q"), prefix + ".to_q")
        vis = self.rms(vis, prefix + ".norm_v")
        v = self.lin(vis, prefix + ".to_v_vis")
        if gated:
            v = v * torch.sigmoid(self.lin(F.silu(self.lin(vis, prefix + ".gate_vis.0")), prefix + ".gate_vis.2"))
        h = self.sdpa(q, self.lin(vis, prefix + ".to_k_vis"), v, heads)
        if text is not None:
            text = self.rms(text, prefix + ".norm_t")
            vt = self.lin(text, prefix + ".to_v_text")
            gate = self.lin(F.silu(self.lin(text, prefix + ".gate_text.0")), prefix + ".gate_text.2")
            h = h + self.sdpa(q, self.lin(text, prefix + ".to_k_text"), vt * torch.sigmoid(gate), heads)
        return queries + self.lin(h, prefix + ".to_out.0")

    def view_tokens(self, vis, txt, temb):  # reward_head.py 260-298
        v = torch.cat([self.film(x, temb, f"layer_adapters_visual.{i}") for i, x in enumerate(vis)], dim=-1)
        t = torch.cat([self.film(x, temb, f"layer_adapters_text.{i}") for i, x in enumerate(txt)], dim=-1)
        return self.lin(v, "agg_visual"), self.lin(t, "agg_text")

    def read(self, v, t):  # reward_head.py 316-331 (forward) and 367-375 (forward_ensemble)
        heads = self.config["model"]["reward_head"]["num_attn_heads"]
        queries = self.w("query_tokens").expand(v.shape[0], -1, -1)
        queries = self.cross(queries, v, t, "attn1", heads, gated=True)
        queries = self.cross(queries, v, None, "attn2", heads, gated=False)
        ff = self.lin(F.gelu(self.lin(self.rms(queries, "norm_ff"), "ff.0")), "ff.2")
        return self.lin(queries + ff, "head").mean(dim=1)

    def reward_head(self, vis, txt, temb):  # reward_head.py 300-331
        return self.read(*self.view_tokens(vis, txt, temb))

    def sigma_t(self, u):  # inference.py 92-102: the nearest sigma and its timestep
        idx = torch.argmin((self.scheduler.sigmas[None, :] - torch.tensor([u])[:, None]).abs(), dim=1)
        return self.scheduler.sigmas[idx].view(-1, 1, 1, 1), self.scheduler.timesteps[idx]

    def reward_ensemble(self, prompts, latents, us, seed, max_sequence_length=256):
        """engine.py 252-353 ``validate_ensemble`` for one latent at a time: one noise per latent for every u
        (325-328), sd3_rm.py 339-380 ``forward_ensemble``, reward_head.py 333-375: the views' tokens concatenated."""
        embeds, pooled = self.encode_prompt(prompts, max_sequence_length)
        out = []
        for i, latent in enumerate(latents):
            x = latent[None]
            torch.manual_seed(seed)
            noise = torch.randn_like(x)
            views = []
            for u in us:
                sigma, timesteps = self.sigma_t(u)
                temb, vis, txt = self.backbone(
                    (1.0 - sigma) * x + sigma * noise,
                    embeds[i : i + 1],
                    pooled[i : i + 1],
                    timesteps,
                    self.visual_idx,
                    self.text_idx,
                )
                views.append(self.view_tokens(vis, txt, temb))
            v = torch.cat([a for a, _ in views], dim=1)
            t = torch.cat([b for _, b in views], dim=1)
            out.append(float(self.read(v, t)[0, 0]))
        return torch.tensor(out)

    def reward(self, prompts, latents, u, seed, max_sequence_length=256):
        """DRMInferencer.reward (inference.py 104-137) for one latent at a time, seeded as rewardzoo seeds."""
        embeds, pooled = self.encode_prompt(prompts, max_sequence_length)
        out = []
        for i, latent in enumerate(latents):
            x = latent[None]
            sigmas = self.scheduler.sigmas  # inference.py 92-102: the nearest sigma and its timestep
            idx = torch.argmin((sigmas[None, :] - torch.tensor([u])[:, None]).abs(), dim=1)
            timesteps, sigma = self.scheduler.timesteps[idx], sigmas[idx].view(-1, 1, 1, 1)
            torch.manual_seed(seed)
            noise = torch.randn_like(x)  # inference.py 120
            noisy = (1.0 - sigma) * x + sigma * noise  # inference.py 122-123 (training.add_noise true)
            temb, vis, txt = self.backbone(
                noisy, embeds[i : i + 1], pooled[i : i + 1], timesteps, self.visual_idx, self.text_idx
            )
            out.append(float(self.reward_head(vis, txt, temb)[0, 0]))  # sd3_rm.py 327-337
        return torch.tensor(out)


@pytest.fixture(scope="module")
def reference(dirs):
    with torch.no_grad():
        return _Reference(*dirs)


# -------------------------------------------------------------------------------------------------------- tests
def test_scores_match_the_reference_inference(reward, reference, latents):
    with torch.no_grad():
        expected = reference.reward(PROMPTS, latents, u=0.4, seed=0)
    out = reward(prompt=PROMPTS, latent=latents)
    torch.testing.assert_close(out.extras["raw"], expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.rewards, (expected + 10.0) / 10.0, rtol=1e-5, atol=1e-6)  # README's normalisation
    assert reference.used == set(reference.head), "the re-stepped head reads every saved tensor"
    assert out.extras["raw"].abs().min() > 1e-3 and len(set(out.extras["raw"].tolist())) == 3


def test_the_lora_the_noise_level_and_the_seed_each_change_the_score(dirs, reward, reference, latents):
    ours = reward(prompt=PROMPTS[:1], latent=latents[:1]).extras["raw"]
    with torch.no_grad():
        plain = _Reference(*dirs, lora=False).reward(PROMPTS[:1], latents[:1], u=0.4, seed=0)
        low = reference.reward(PROMPTS[:1], latents[:1], u=0.1, seed=0)
        reseeded = reference.reward(PROMPTS[:1], latents[:1], u=0.4, seed=3)
    for other in (plain, low, reseeded):
        assert (ours - other).abs().max() > 1e-3
    u01 = load_reward({"name": "dina_lrm", "model_path": str(dirs[1]), "kwargs": {"noise_level": 0.1, "noise_seed": 3}})
    with torch.no_grad():
        expected = reference.reward(PROMPTS[:1], latents[:1], u=0.1, seed=3)
    torch.testing.assert_close(
        u01(prompt=PROMPTS[:1], latent=latents[:1]).extras["raw"], expected, rtol=1e-4, atol=1e-5
    )
    assert u01.timestep == pytest.approx(
        float(reference.scheduler.timesteps[torch.argmin((reference.scheduler.sigmas - 0.1).abs())])
    )
    assert math.isclose(reward.sigma, 0.4, abs_tol=1e-3) and reward.timestep == pytest.approx(reward.sigma * 1000)


def test_scores_do_not_depend_on_the_batch_and_the_latent_field_flows_through_the_processor(dirs, reward, latents):
    alone = [float(reward(prompt=[p], latent=[x]).rewards[0]) for p, x in zip(PROMPTS, latents)]
    proc = RewardProcessor([{"name": "dina_lrm", "model_path": str(dirs[1]), "device": "cpu", "batch_size": 2}])
    res = proc(
        [Sample(prompt=p, latent=x.numpy() if i == 1 else x[None]) for i, (p, x) in enumerate(zip(PROMPTS, latents))]
    )
    torch.testing.assert_close(torch.as_tensor(res.rewards["dina_lrm"]), torch.tensor(alone), rtol=1e-5, atol=1e-6)


def test_bad_latents_and_checkpoints_are_named(dirs, reward, latents, tmp_path):
    with pytest.raises(InputError, match="channels") as info:
        reward(prompt=PROMPTS[:2], latent=[latents[0], torch.randn(4, 8, 8)])
    assert (info.value.field, info.value.sample) == ("latent", 1)
    with pytest.raises(InputError, match="multiples of 2"):
        reward(prompt=PROMPTS[:1], latent=[torch.randn(16, 7, 8)])
    with pytest.raises(InputError, match="at most 32"):
        reward(prompt=PROMPTS[:1], latent=[torch.randn(16, 8, 34)])
    with pytest.raises(ConfigError, match="config.json"):
        load_reward({"name": "dina_lrm", "model_path": str(tmp_path)})


def test_the_plan_counts_the_trunk_blocks_it_reads_and_the_text_encoders(dirs, reward):
    from rewardzoo.registry import resolve
    from rewardzoo.shared.checkpoints import checkpoint_bytes

    parts = resolve("dina_lrm").weight_files(str(dirs[1]), {})
    assert [p.missing for p in parts] == [None] * 6
    lora, head, trunk, *encoders = parts
    held = sum(t.numel() * t.element_size() for t in reward.trunk.state_dict().values())
    assert checkpoint_bytes(trunk.files, "float32", trunk.include).total == held  # 3 of the file's 4 blocks
    tensors = {t.data_ptr(): t for m in reward.text.modules for t in m.state_dict().values()}  # T5 ties embeddings
    assert sum(checkpoint_bytes(e.files, "float32").total for e in encoders) == sum(
        t.numel() * t.element_size() for t in tensors.values()
    )
    assert lora.files[0].name == "adapter_model.safetensors" and head.files[0].name == "rm_head.pt"


def test_noise_level_ensembles_match_the_reference_forward_ensemble(dirs, reference, latents):
    ensemble = load_reward(
        {"name": "dina_lrm", "model_path": str(dirs[1]), "kwargs": {"ensemble_levels": [0.2, 0.5, 0.7]}}
    )
    out = ensemble(prompt=PROMPTS[:2], latent=latents[:2]).extras["raw"]
    with torch.no_grad():
        expected = reference.reward_ensemble(PROMPTS[:2], latents[:2], [0.2, 0.5, 0.7], seed=0)
        single = reference.reward(PROMPTS[:2], latents[:2], u=0.2, seed=0)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    assert (out - single).abs().max() > 1e-3
