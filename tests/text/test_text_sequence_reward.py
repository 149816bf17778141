"""SequenceRewardModel against hand computations on the raw backbone / HF model, plus the palm-rlhf regressions."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.text.backbones import HFBackbone, TinyTransformer
from rewardzoo.rewards.models.text.lora import LoRALinear
from rewardzoo.rewards.text.sequence_reward import (
    SequenceRewardModel,
    bradley_terry_loss,
    cross_entropy_loss,
    mse_loss,
)

SEQS = [[2, 5, 6, 7, 8, 9, 10], [2, 5, 6], [2, 11, 12, 13, 14]]
PROMPT_LENS = [3, 1, 2]


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    return TinyTransformer(vocab_size=40, dim=32, depth=2, heads=4, **kw)


@pytest.fixture(scope="module")
def hf_backbones(hf_configs):
    from transformers import AutoModel

    torch.manual_seed(3)
    return {name: AutoModel.from_config(make()).eval() for name, make in hf_configs.items()}


def hand_hidden(raw, seq, prompt_len=None, prompt_vec=None, response_vec=None):
    """Final hidden states of one unpadded sequence computed on the raw backbone (HF model or TinyTransformer)."""
    ids = torch.tensor([seq])
    if hasattr(raw, "config") and not isinstance(raw.config, dict):  # transformers model
        emb = raw.get_input_embeddings()(ids)
        if prompt_len is not None:
            seg = torch.stack([prompt_vec if j < prompt_len else response_vec for j in range(len(seq))])
            emb = emb + seg
        return raw(inputs_embeds=emb).last_hidden_state[0]
    emb = raw.token_emb(ids)
    if prompt_len is not None:
        emb = emb + torch.stack([prompt_vec if j < prompt_len else response_vec for j in range(len(seq))])
    return raw.hidden_states(inputs_embeds=emb)[0]


def backbone_for(name, hf_backbones):
    return tiny() if name == "tiny" else hf_backbones[name]


@pytest.mark.parametrize("name", ["tiny", "gpt2", "llama"])
@pytest.mark.parametrize("pooling", ["last", "mean"])
@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
@pytest.mark.parametrize("indicator", [None, "prompt_lengths", "prompt_mask"])
def test_scalar_reward_matches_hand_computation(hf_backbones, padded, name, pooling, left, indicator):
    raw = backbone_for(name, hf_backbones).eval()
    model = SequenceRewardModel(raw, pooling=pooling)
    torch.manual_seed(5)
    with torch.no_grad():
        model.prompt_embed.normal_()
        model.response_embed.normal_()
    ids, mask = padded(SEQS, left=left)
    kwargs = {}
    if indicator == "prompt_lengths":
        kwargs["prompt_lengths"] = torch.tensor(PROMPT_LENS)
    elif indicator == "prompt_mask":
        pm = torch.zeros_like(mask)
        for i, (seq, plen) in enumerate(zip(SEQS, PROMPT_LENS)):
            start = ids.shape[1] - len(seq) if left else 0
            pm[i, start : start + plen] = True
        kwargs["prompt_mask"] = pm
    rewards = model.score(ids, mask, **kwargs).rewards
    w, b = model.head.weight[0].detach(), model.head.bias[0].detach()
    with torch.no_grad():
        for i, seq in enumerate(SEQS):
            if indicator:
                h = hand_hidden(raw, seq, PROMPT_LENS[i], model.prompt_embed, model.response_embed)
            else:
                h = hand_hidden(raw, seq)
            pooled = h[-1] if pooling == "last" else h.mean(0)
            assert rewards[i].item() == pytest.approx((pooled @ w + b).item(), abs=1e-4)


def test_segment_embeddings_change_the_reward_only_with_an_indicator(padded):
    model = SequenceRewardModel(tiny())
    with torch.no_grad():
        model.prompt_embed.normal_()  # not a constant vector: LayerNorm would remove it
    ids, mask = padded(SEQS)
    plain = model.score(ids, mask).rewards
    marked = model.score(ids, mask, prompt_lengths=PROMPT_LENS).rewards
    assert not torch.allclose(plain, marked)


def test_backbone_is_deep_copied_and_never_mutated(padded):
    raw = tiny()
    before = copy.deepcopy(raw.state_dict())
    model = SequenceRewardModel(raw, lora_scope="reward", dropout=0.5)
    model.train()
    opt = torch.optim.SGD(model.trainable_parameters(), lr=0.5)
    ids, mask = padded(SEQS)
    for _ in range(2):
        opt.zero_grad()
        model(ids, mask, labels=torch.tensor([1.0, -1.0, 0.5])).loss.backward()
        opt.step()
    after = raw.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not any(isinstance(m, LoRALinear) for m in raw.modules())
    assert all(m.p == 0.0 for m in raw.modules() if isinstance(m, torch.nn.Dropout))
    assert model.backbone is not raw
    assert any(isinstance(m, LoRALinear) for m in model.backbone.modules())


def test_lora_trains_only_lora_head_and_segments(padded):
    model = SequenceRewardModel(tiny(), lora_scope="reward", lora_r=4)
    trainable = {id(p) for p in model.trainable_parameters()}
    named = dict(model.named_parameters())
    for name, p in named.items():
        expected = name.startswith(("head.", "prompt_embed", "response_embed")) or ".adapters.reward." in name
        assert (id(p) in trainable) == expected, name
        assert p.requires_grad == expected, name
    # LoRA is a no-op at init: the same reward as the model without it (same head)
    plain = SequenceRewardModel(tiny())
    plain.head.load_state_dict(model.head.state_dict())
    ids, mask = padded(SEQS)
    torch.testing.assert_close(model.score(ids, mask).rewards, plain.score(ids, mask).rewards)


@pytest.mark.parametrize("lora", [None, "reward"])
def test_segment_embeddings_are_trained(padded, lora):
    """Regression (palm-rlhf 0.8.0): prompt/response embeddings missing from the fine-tuned parameters."""
    model = SequenceRewardModel(tiny(), lora_scope=lora).train()
    params = list(model.trainable_parameters())
    assert any(p is model.prompt_embed for p in params) and any(p is model.response_embed for p in params)
    opt = torch.optim.Adam(params, lr=1e-2)
    ids, mask = padded(SEQS)
    out = model(ids, mask, prompt_lengths=PROMPT_LENS, labels=torch.tensor([1.0, -1.0, 0.5]))
    out.loss.backward()
    assert model.prompt_embed.grad.abs().sum() > 0 and model.response_embed.grad.abs().sum() > 0
    opt.step()
    assert model.prompt_embed.abs().sum() > 0 and model.response_embed.abs().sum() > 0


def test_prompt_indicators_are_exclusive_and_equivalent(padded):
    model = SequenceRewardModel(tiny())
    with torch.no_grad():
        model.prompt_embed.fill_(0.3)
    ids, mask = padded(SEQS)
    pm = torch.zeros_like(mask)
    for i, plen in enumerate(PROMPT_LENS):
        pm[i, :plen] = True
    with pytest.raises(InputError) as err:
        model(ids, mask, prompt_mask=pm, prompt_lengths=PROMPT_LENS)
    assert "prompt_mask" in str(err.value) and "prompt_lengths" in str(err.value)
    torch.testing.assert_close(
        model.score(ids, mask, prompt_mask=pm).rewards, model.score(ids, mask, prompt_lengths=PROMPT_LENS).rewards
    )


@pytest.mark.parametrize("lengths", [[3, 9, 1], [1.0, 2.0, 1.0], [1, 2], [-1, 1, 1]])
def test_bad_prompt_lengths(padded, lengths):
    ids, mask = padded(SEQS)
    with pytest.raises(InputError, match="prompt_lengths"):
        SequenceRewardModel(tiny())(ids, mask, prompt_lengths=torch.tensor(lengths))


@pytest.mark.parametrize("seed", [0, 1])
def test_mse_loss_matches_hand(padded, seed):
    torch.manual_seed(seed)
    model = SequenceRewardModel(tiny(seed))
    ids, mask = padded(SEQS)
    labels = torch.randn(3)
    out = model(ids, mask, labels=labels)
    expected = sum((r - y) ** 2 for r, y in zip(out.rewards.tolist(), labels.tolist())) / 3
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    "labels, match",
    [
        (torch.zeros(3, 1), "shape"),  # palm-rlhf broadcast (B,1) against (B,) into (B,B)
        (torch.zeros(1), "shape"),
        (torch.zeros(3, 3), "shape"),
        (torch.tensor([0, 1, 2]), "float labels"),  # integer labels silently went into MSE
        (torch.tensor([True, False, True]), "float labels"),
    ],
)
def test_scalar_label_checks(padded, labels, match):
    ids, mask = padded(SEQS)
    with pytest.raises(InputError, match=match):
        SequenceRewardModel(tiny())(ids, mask, labels=labels)


def test_binned_head_logits_rewards_and_losses(padded):
    values = [-1.0, 0.0, 0.5, 2.0]
    model = SequenceRewardModel(tiny(), num_bins=4, bin_values=values)
    ids, mask = padded(SEQS)
    out = model.score(ids, mask)
    assert out.logits.shape == (3, 4) and out.bin_ids is None and out.rewards.shape == (3,)
    for i in range(3):
        probs = [math.exp(v) for v in out.logits[i].tolist()]
        expected = sum(p * v for p, v in zip(probs, values)) / sum(probs)
        assert out.rewards[i].item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    ids_labels = torch.tensor([0, 3, 1])
    ce = model(ids, mask, labels=ids_labels).loss
    logp = out.logits.log_softmax(-1)
    assert ce.item() == pytest.approx(-(logp[0, 0] + logp[1, 3] + logp[2, 1]).item() / 3, rel=1e-5)
    soft = torch.tensor([[0.5, 0.5, 0, 0], [0, 0, 0.2, 0.8], [0.25, 0.25, 0.25, 0.25]])
    ce_soft = model(ids, mask, labels=soft).loss
    assert ce_soft.item() == pytest.approx(-(soft * logp).sum().item() / 3, rel=1e-5)


@pytest.mark.parametrize(
    "labels, match",
    [
        (torch.tensor([0.0, 1.0, 2.0]), "probabilities"),
        (torch.tensor([[0], [1], [2]]), "shape"),
        (torch.tensor([0, 4, 1]), r"\[0, 4\)"),
        (torch.tensor([[0.5, 0.6, 0, 0]] * 3), "sum to 1"),
        (torch.zeros(3, 5), "probabilities"),
        (torch.tensor([True, False, True]), "bool"),
    ],
)
def test_binned_label_checks(padded, labels, match):
    ids, mask = padded(SEQS)
    with pytest.raises(InputError, match=match):
        SequenceRewardModel(tiny(), num_bins=4)(ids, mask, labels=labels)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sampled_bins_follow_softmax(temperature):
    logits = torch.tensor([[1.0, -0.5, 0.3, 2.0]]).expand(40_000, 4)
    ids = SequenceRewardModel.sample_bins(logits, temperature, torch.Generator().manual_seed(0))
    freq = torch.bincount(ids, minlength=4).float() / len(ids)
    z = [math.exp(v / temperature) for v in (1.0, -0.5, 0.3, 2.0)]
    for k in range(4):
        assert freq[k].item() == pytest.approx(z[k] / sum(z), abs=0.01)


def test_sampled_bins_on_request_and_reproducible(padded):
    model = SequenceRewardModel(tiny(), num_bins=6)
    ids, mask = padded(SEQS * 20)
    a = model.score(ids, mask, sample_bins=True, generator=torch.Generator().manual_seed(7)).bin_ids
    b = model.score(ids, mask, sample_bins=True, generator=torch.Generator().manual_seed(7)).bin_ids
    c = model.score(ids, mask, sample_bins=True, generator=torch.Generator().manual_seed(8)).bin_ids
    assert a.shape == (60,) and a.dtype == torch.long and torch.equal(a, b) and not torch.equal(a, c)
    greedy = model.score(ids, mask, sample_bins=True, temperature=0.0)
    assert torch.equal(greedy.bin_ids, greedy.logits.argmax(-1))


def test_eval_mode_is_deterministic(padded):
    """Regression: palm-rlhf builds the model in train mode, so inference samples dropout until .eval()."""
    model = SequenceRewardModel(tiny(), dropout=0.5)
    ids, mask = padded(SEQS)
    assert not model.training
    torch.testing.assert_close(model(ids, mask).rewards, model(ids, mask).rewards, rtol=0, atol=0)
    model.train()
    torch.manual_seed(0)
    assert not torch.allclose(model(ids, mask).rewards, model(ids, mask).rewards)  # dropout is really there
    torch.testing.assert_close(model.score(ids, mask).rewards, model.score(ids, mask).rewards, rtol=0, atol=0)
    assert model.training  # score() restores the mode


@pytest.mark.parametrize("margin", [None, 0.5, "tensor"])
@pytest.mark.parametrize("center_coef", [0.0, 0.01])
def test_bradley_terry_matches_formula(margin, center_coef):
    torch.manual_seed(0)
    chosen, rejected = torch.randn(5), torch.randn(5)
    m = torch.rand(5) if margin == "tensor" else margin
    loss = bradley_terry_loss(chosen, rejected, m, center_coef)
    ms = m.tolist() if margin == "tensor" else [margin or 0.0] * 5
    terms = [math.log1p(math.exp(-(c - r - mm))) for c, r, mm in zip(chosen.tolist(), rejected.tolist(), ms)]
    center = sum((c + r) ** 2 for c, r in zip(chosen.tolist(), rejected.tolist())) / 5
    assert loss.item() == pytest.approx(sum(terms) / 5 + center_coef * center, rel=1e-5)


def test_bradley_terry_shape_checks():
    with pytest.raises(InputError, match="same shape"):
        bradley_terry_loss(torch.zeros(3), torch.zeros(3, 1))
    with pytest.raises(InputError, match="margin"):
        bradley_terry_loss(torch.zeros(3), torch.zeros(3), torch.zeros(2))


def test_bradley_terry_training_orders_pairs(padded):
    model = SequenceRewardModel(tiny()).train()
    chosen_ids, chosen_mask = padded([[2, 14, 15, 16], [2, 14, 17]])
    rejected_ids, rejected_mask = padded([[2, 20, 21], [2, 22, 23, 24, 25]])
    opt = torch.optim.Adam(model.trainable_parameters(), lr=3e-3)
    for _ in range(15):
        opt.zero_grad()
        loss = model.bradley_terry(model(chosen_ids, chosen_mask).rewards, model(rejected_ids, rejected_mask).rewards)
        loss.backward()
        opt.step()
    assert (model.score(chosen_ids, chosen_mask).rewards > model.score(rejected_ids, rejected_mask).rewards).all()


def test_loss_functions_standalone():
    assert mse_loss(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])).item() == pytest.approx(2.5)
    logits = torch.tensor([[0.0, math.log(3.0)]])
    assert cross_entropy_loss(logits, torch.tensor([1])).item() == pytest.approx(-math.log(0.75))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_bins": 1}, "num_bins"),
        ({"pooling": "max"}, "pooling"),
        ({"num_bins": 3, "bin_values": [1.0, 2.0]}, "bin_values"),
        ({"bin_values": [1.0, 2.0]}, "binned"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        SequenceRewardModel(tiny(), **kwargs)


def test_empty_row_is_an_error():
    with pytest.raises(InputError, match="no real tokens"):
        SequenceRewardModel(tiny())(torch.tensor([[2, 3], [0, 0]]), torch.tensor([[1, 1], [0, 0]]))


@pytest.mark.parametrize("kind", ["tiny", "hf", "hf_causal_lm"])
def test_save_and_load_roundtrip(tmp_path, padded, hf_backbones, hf_configs, kind):
    if kind == "hf_causal_lm":  # tied input / output embeddings
        from transformers import GPT2LMHeadModel

        raw = GPT2LMHeadModel(hf_configs["gpt2"]()).eval()
    else:
        raw = tiny() if kind == "tiny" else hf_backbones["gpt2"]
    model = SequenceRewardModel(raw, num_bins=3, bin_values=[0.0, 0.5, 1.0], lora_scope="reward", pooling="mean")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(tmp_path)
    loaded = SequenceRewardModel.from_pretrained(tmp_path)
    ids, mask = padded(SEQS)
    torch.testing.assert_close(
        loaded.score(ids, mask, prompt_lengths=PROMPT_LENS).logits,
        model.score(ids, mask, prompt_lengths=PROMPT_LENS).logits,
    )
    assert isinstance(loaded.backbone, TinyTransformer if kind == "tiny" else HFBackbone)
