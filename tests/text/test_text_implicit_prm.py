"""ImplicitPRM against log-probabilities computed directly from HF logits, plus the palm-rlhf regressions."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.text.backbones import TinyTransformer
from rewardzoo.rewards.text.implicit_prm import ImplicitPRM

SEQS = [[2, 5, 6, 7, 8, 9, 10], [2, 5, 6], [2, 11, 12, 13, 14]]
PROMPT_LENS = [3, 1, 2]


def tiny(seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(vocab_size=40, dim=32, depth=2, heads=4)


def direct_logprobs(hf_model, seq):
    """log p(x_{t+1} | x_<=t) of one unpadded sequence, straight from the HF model's logits."""
    with torch.no_grad():
        logits = hf_model(torch.tensor([seq])).logits[0]
    logp = torch.log_softmax(logits[:-1].double(), -1)
    return [logp[t, seq[t + 1]].item() for t in range(len(seq) - 1)]


@pytest.fixture(scope="module")
def hf_pairs(text_models):
    from transformers import AutoModelForCausalLM

    load = lambda key: AutoModelForCausalLM.from_pretrained(text_models[key]).eval()  # noqa: E731
    return {arch: (load(f"{arch}_policy"), load(f"{arch}_ref")) for arch in ("gpt2", "llama")}


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
@pytest.mark.parametrize("beta", [0.1, 0.5])
@pytest.mark.parametrize("use_response", [False, True])
def test_dense_rewards_match_direct_logprob_gap(hf_pairs, padded, arch, left, beta, use_response):
    policy, ref = hf_pairs[arch]
    prm = ImplicitPRM(policy, ref, beta=beta)
    ids, mask = padded(SEQS, left=left)
    response = None
    if use_response:
        response = torch.zeros_like(mask)
        for i, (seq, plen) in enumerate(zip(SEQS, PROMPT_LENS)):
            start = ids.shape[1] - len(seq) if left else 0
            response[i, start + plen : start + len(seq)] = True
    with torch.no_grad():
        out = prm(ids, mask, response)
    assert out.process_rewards.shape == (3, ids.shape[1] - 1)
    for i, seq in enumerate(SEQS):
        gap = [beta * (a - b) for a, b in zip(direct_logprobs(policy, seq), direct_logprobs(ref, seq))]
        first = PROMPT_LENS[i] if use_response else 1  # index of the first scored target token
        expected = [g if t + 1 >= first else 0.0 for t, g in enumerate(gap)]
        start = ids.shape[1] - len(seq) if left else 0
        row = out.process_rewards[i].tolist()
        got = row[start : start + len(seq) - 1]
        assert got == pytest.approx(expected, abs=1e-5)
        assert all(v == 0.0 for j, v in enumerate(row) if not start <= j < start + len(seq) - 1)  # padding
        assert out.outcome_rewards[i].item() == pytest.approx(sum(expected), abs=1e-5)


def test_default_reference_is_a_frozen_copy(padded):
    model = tiny()
    prm = ImplicitPRM(model)
    assert prm.model is model and prm.ref_model is not model
    assert all(not p.requires_grad for p in prm.ref_model.parameters())
    ids, mask = padded(SEQS)
    with torch.no_grad():
        assert torch.count_nonzero(prm.process_rewards(ids, mask)) == 0  # pi == pi_ref at the start
    prm.train()
    assert prm.model.training and not prm.ref_model.training
    trainable = {id(p) for p in prm.trainable_parameters()}
    assert trainable == {id(p) for p in model.parameters()}
    assert not trainable & {id(p) for p in prm.ref_model.parameters()}


def test_backward_reaches_only_the_trainable_model(padded):
    prm = ImplicitPRM(tiny(0), tiny(1)).train()
    ids, mask = padded(SEQS)
    prm.loss(ids, torch.tensor([1.0, 0.0, 1.0]), mask).backward()
    assert all(p.grad is None for p in prm.ref_model.parameters())
    assert sum(p.grad.abs().sum().item() for p in prm.model.parameters() if p.grad is not None) > 0


@pytest.mark.parametrize("labels", [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.3, 0.9, 0.5]])
def test_prime_loss_matches_bce_with_logits(padded, labels):
    prm = ImplicitPRM(tiny(0), tiny(1), beta=0.5)
    ids, mask = padded(SEQS)
    y = torch.tensor(labels)
    with torch.no_grad():
        out = prm(ids, mask, labels=y)
        q = out.outcome_rewards
    assert out.loss.item() == pytest.approx(F.binary_cross_entropy_with_logits(q, y).item(), rel=1e-6)
    by_hand = [
        -(yy * math.log(1 / (1 + math.exp(-qq))) + (1 - yy) * math.log(1 - 1 / (1 + math.exp(-qq))))
        for qq, yy in zip(q.tolist(), labels)
    ]
    assert out.loss.item() == pytest.approx(sum(by_hand) / 3, rel=1e-5)


def test_per_token_loss_matches_hand(padded):
    prm = ImplicitPRM(tiny(0), tiny(1), beta=0.5)
    ids, mask = padded(SEQS)
    y = torch.tensor([1.0, 0.0, 1.0])
    with torch.no_grad():
        out = prm(ids, mask, labels=y, per_token=True)
    terms = []
    for i in range(3):
        for t in range(ids.shape[1] - 1):
            if out.mask[i, t]:
                s = 1 / (1 + math.exp(-out.process_rewards[i, t].item()))
                terms.append(-(y[i].item() * math.log(s) + (1 - y[i].item()) * math.log(1 - s)))
    assert len(terms) == sum(len(s) - 1 for s in SEQS)
    assert out.loss.item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)


@pytest.mark.parametrize("label", [1.0, 0.0])
def test_loss_sign_training_moves_outcome_toward_label(padded, label):
    """Regression: palm-rlhf 0.8.0 returns the log-likelihood as the loss, so training moves rewards the wrong way."""
    prm = ImplicitPRM(tiny(0), tiny(1), beta=0.5).train()
    ids, mask = padded(SEQS)
    with torch.no_grad():
        before = prm.outcome_reward(ids, mask)
    opt = torch.optim.SGD(prm.trainable_parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        prm.loss(ids, torch.full((3,), label), mask).backward()
        opt.step()
    with torch.no_grad():
        after = prm.outcome_reward(ids, mask)
    assert (after > before).all() if label == 1.0 else (after < before).all()


@pytest.mark.parametrize(
    "labels, match",
    [
        (torch.ones(3, 1), "shape"),
        (torch.ones(2), "shape"),
        (torch.tensor([2.0, 0.0, 1.0]), r"\[0, 1\]"),
    ],
)
def test_label_checks(padded, labels, match):
    ids, mask = padded(SEQS)
    with pytest.raises(InputError, match=match):
        ImplicitPRM(tiny())(ids, mask, labels=labels)


def test_mask_checks(padded):
    prm = ImplicitPRM(tiny())
    ids, mask = padded(SEQS)
    with pytest.raises(InputError, match="response_mask"):
        prm(ids, mask, response_mask=mask[:, 1:])
    with pytest.raises(InputError, match="at least 2 tokens"):
        prm(torch.tensor([[2]]))
    with pytest.raises(InputError, match="attention_mask"):
        prm(torch.tensor([[2, -100, -100]]))  # negative-id padding is refused with a pointer to the mask


def test_constructor_checks():
    model = tiny()
    with pytest.raises(ConfigError, match="ref_model"):
        ImplicitPRM(model, model)
    with pytest.raises(ConfigError, match="beta"):
        ImplicitPRM(model, beta=0.0)
