"""The PaLM backbone against palm-rlhf-pytorch's own PaLM, RewardModel and ImplicitPRM on the same weights,
and one regression per palm-rlhf-pytorch 0.8.0 defect (palm shows it, rewardzoo does not)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

palm_rlhf = pytest.importorskip(
    "palm_rlhf_pytorch", reason="palm-rlhf-pytorch is not installed (pip install palm-rlhf-pytorch)"
)

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.text.backbones import Backbone, PaLMBackbone, as_backbone, from_negative_padding
from rewardzoo.rewards.models.text.lora import LoRALinear
from rewardzoo.rewards.text.implicit_prm import ImplicitPRM
from rewardzoo.rewards.text.sequence_reward import SequenceRewardModel

PaLM, PalmRewardModel, PalmImplicitPRM = palm_rlhf.PaLM, palm_rlhf.RewardModel, palm_rlhf.ImplicitPRM

VOCAB = 40
SEQS = [[2, 5, 6, 7, 8, 9, 10], [2, 5, 6], [3, 11, 12, 13, 14]]
PROMPT_LENS = [3, 1, 2]
TOL = dict(atol=1e-5, rtol=1e-5)


def tiny_palm(seed: int = 0, **kw) -> PaLM:
    torch.manual_seed(seed)
    return PaLM(num_tokens=VOCAB, dim=32, depth=2, heads=4, dim_head=8, **kw).eval()


def padded(pad: int = 0, left: bool = False):
    """SEQS padded with ``pad`` on the right (palm's RewardModel is correct there) or left, and the real-token mask."""
    n = max(map(len, SEQS))
    ids = torch.full((len(SEQS), n), pad, dtype=torch.long)
    mask = torch.zeros((len(SEQS), n), dtype=torch.bool)
    for i, s in enumerate(SEQS):
        cols = slice(n - len(s), n) if left else slice(0, len(s))
        ids[i, cols], mask[i, cols] = torch.tensor(s), True
    return ids, mask


def indicator_kwargs(indicator: str | None, mask: torch.Tensor) -> dict:
    lengths = torch.tensor(PROMPT_LENS)
    if indicator == "prompt_lengths":
        return {"prompt_lengths": lengths}
    if indicator == "prompt_mask":
        return {"prompt_mask": (torch.arange(mask.shape[1])[None] < lengths[:, None]) & mask}
    return {}


def paired_reward_models(num_bins: int = 0, lora: bool = True, seed: int = 0):
    """palm's RewardModel and ours on the same PaLM, with palm's (random) head and segment embeddings copied
    into ours; both in eval mode."""
    palm = tiny_palm(seed)
    theirs = PalmRewardModel(
        palm, num_binned_output=num_bins, use_lora=lora, sample_from_bins=False if num_bins else None
    )
    torch.manual_seed(seed + 1)
    with torch.no_grad():
        for p in (*theirs.to_pred.parameters(), theirs.prompt_embed, theirs.response_embed):
            p.normal_(0.0, 0.5)  # they start at zero: make the copies matter
    ours = SequenceRewardModel(palm, num_bins=num_bins, pooling="mean", lora_scope="reward" if lora else None)
    head = theirs.to_pred if num_bins else theirs.to_pred[0]
    with torch.no_grad():
        ours.head.weight.copy_(head.weight)
        ours.head.bias.copy_(head.bias if num_bins else torch.zeros(1))  # palm's scalar head has no bias
        ours.prompt_embed.copy_(theirs.prompt_embed.flatten())
        ours.response_embed.copy_(theirs.response_embed.flatten())
    return theirs.eval(), ours.eval()


# ----------------------------------------------------------------------------------------------- adapter
@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_adapter_matches_palm_forward(left):
    """Hidden states and logits of a padded batch equal PaLM's own forward on each unpadded sequence."""
    palm = tiny_palm()
    backbone = as_backbone(palm)
    assert isinstance(backbone, PaLMBackbone) and isinstance(backbone, Backbone)
    assert (backbone.dim, backbone.vocab_size) == (32, VOCAB)
    ids, mask = padded(left=left)
    with torch.no_grad():
        hidden, logits = backbone.hidden_states(ids, mask), backbone.logits(ids, mask)
        for i, seq in enumerate(SEQS):
            ref_logits, ref_hidden = palm(torch.tensor([seq]), return_logits_with_embedding=True)
            torch.testing.assert_close(hidden[i][mask[i]], ref_hidden[0], **TOL)
            torch.testing.assert_close(logits[i][mask[i]], ref_logits[0], **TOL)


def test_adapter_applies_a_palm_finetune_scope():
    palm = tiny_palm()
    palm.add_finetune_params("actor")
    with torch.no_grad():
        for p in palm.finetune_modules["actor"].parameters():
            p.normal_(0.0, 0.3)  # B starts at zero
    ids = torch.tensor(SEQS[:1])
    with torch.no_grad():
        ours = PaLMBackbone(palm, finetune_scope="actor").logits(ids)
        torch.testing.assert_close(ours, palm(ids, finetune_scope="actor"), **TOL)
        assert not torch.allclose(ours, palm(ids), atol=1e-3)  # the scope changes the output
    with pytest.raises(ConfigError, match="no finetune scope"):
        PaLMBackbone(palm, finetune_scope="missing")


@pytest.mark.filterwarnings("ignore:.*sdp_kernel.*:FutureWarning")  # palm's use of a deprecated torch API
def test_adapter_with_flash_attention():
    """flash_attn=True: a right-padded batch equals PaLM's forward; left padding is a clear error."""
    palm = tiny_palm(flash_attn=True)
    backbone = PaLMBackbone(palm)
    ids, mask = padded()
    with torch.no_grad():
        logits = backbone.logits(ids, mask)
        for i, seq in enumerate(SEQS):
            torch.testing.assert_close(logits[i][mask[i]], palm(torch.tensor([seq]))[0], **TOL)
        with pytest.raises(InputError, match="flash_attn"):
            backbone.logits(*padded(left=True))


def test_inputs_embeds_are_not_written_in_place():
    """PaLM's residual adds in place under no_grad; the adapter must not write into the caller's embeddings."""
    backbone = PaLMBackbone(tiny_palm())
    ids, mask = padded()
    embeds = backbone.embed(ids).detach()
    before = embeds.clone()
    with torch.no_grad():
        backbone.hidden_states(attention_mask=mask, inputs_embeds=embeds)
    assert torch.equal(embeds, before)


def test_adapter_errors():
    with pytest.raises(ConfigError, match="PaLM"):
        PaLMBackbone(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match="attention_mask"):
        PaLMBackbone(tiny_palm()).hidden_states(torch.tensor([[2, 5, -1]]))


def test_lora_on_a_palm_copy_trains_only_lora_head_and_segments():
    palm = tiny_palm()
    model = SequenceRewardModel(palm, lora_scope="reward", lora_r=4)
    assert not any(isinstance(m, LoRALinear) for m in palm.modules())  # the caller's PaLM is untouched
    wrapped = {name.rsplit(".", 1)[-1] for name, m in model.backbone.named_modules() if isinstance(m, LoRALinear)}
    assert wrapped == {"fused_attn_ff_proj", "attn_out"}
    trainable = {id(p) for p in model.trainable_parameters()}
    assert {id(p) for p in model.parameters() if p.requires_grad} == trainable
    assert id(model.backbone.model.token_emb.weight) not in trainable


# ------------------------------------------------------------------------------ equal to palm's own classes
@pytest.mark.parametrize("indicator", [None, "prompt_mask", "prompt_lengths"])
def test_scalar_head_matches_palm_reward_model(indicator):
    """Scalar head, masked mean pooling, segment embeddings: rewards and MSE loss equal palm's RewardModel."""
    theirs, ours = paired_reward_models()
    ids, mask = padded()
    kw = indicator_kwargs(indicator, mask)
    labels = torch.tensor([0.5, -1.0, 2.0])
    with torch.no_grad():
        expected = theirs(ids, mask=mask, **kw)
        out = ours(ids, mask, **kw)
        torch.testing.assert_close(out.rewards, expected, **TOL)
        torch.testing.assert_close(
            ours(ids, mask, labels=labels, **kw).loss, theirs(ids, mask=mask, labels=labels, **kw), **TOL
        )
        if indicator:  # the copied segment embeddings are exercised
            assert not torch.allclose(out.rewards, ours(ids, mask).rewards, atol=1e-3)


@pytest.mark.parametrize("indicator", [None, "prompt_mask", "prompt_lengths"])
def test_binned_logits_match_palm_reward_model(indicator):
    """Binned head (palm with sample_from_bins=False): logits (B, K) and cross-entropy equal palm's."""
    theirs, ours = paired_reward_models(num_bins=5)
    ids, mask = padded()
    kw = indicator_kwargs(indicator, mask)
    classes = torch.tensor([4, 0, 2])
    with torch.no_grad():
        expected = theirs(ids, mask=mask, **kw)
        assert expected.shape == (3, 5)
        torch.testing.assert_close(ours(ids, mask, **kw).logits, expected, **TOL)
        torch.testing.assert_close(
            ours(ids, mask, labels=classes, **kw).loss, theirs(ids, mask=mask, labels=classes, **kw), **TOL
        )


def test_rewardzoo_lora_expresses_palm_lora():
    """palm's reward LoRA (separate q / k / v / out adapters of rank r, with trained B) written into one
    rewardzoo scope of rank 3r on fused_attn_ff_proj and attn_out gives palm's rewards."""
    palm, r = tiny_palm(), 2
    theirs = PalmRewardModel(palm, lora_r=r).eval()
    torch.manual_seed(5)
    with torch.no_grad():
        for lq, lk, lv, lo in theirs.palm.finetune_modules["reward"]:
            for lora in (lq, lk, lv, lo):
                lora.B.normal_(0.0, 0.3)
        theirs.to_pred[0].weight.normal_()
    ours = SequenceRewardModel(palm, pooling="mean", lora_scope="reward", lora_r=3 * r, lora_alpha=3 * r).eval()
    with torch.no_grad():
        ours.head.weight.copy_(theirs.to_pred[0].weight)
        ours.head.bias.zero_()
        for layer, (lq, lk, lv, lo) in zip(ours.backbone.model.layers, theirs.palm.finetune_modules["reward"]):
            fused, out = layer.fn.fused_attn_ff_proj.adapters["reward"], layer.fn.attn_out.adapters["reward"]
            qi, dh = lq.B.shape[1], lk.B.shape[1]
            fused.A.weight.copy_(torch.cat([lq.A.T, lk.A.T, lv.A.T]))
            fused.B.weight.zero_()
            fused.B.weight[:qi, :r] = lq.B.T
            fused.B.weight[qi : qi + dh, r : 2 * r] = lk.B.T
            fused.B.weight[qi + dh : qi + 2 * dh, 2 * r :] = lv.B.T
            out.A.weight.zero_()
            out.A.weight[:r] = lo.A.T
            out.B.weight.zero_()
            out.B.weight[:, :r] = lo.B.T
    ids, mask = padded()
    lengths = torch.tensor(PROMPT_LENS)
    with torch.no_grad():
        expected = theirs(ids, mask=mask, prompt_lengths=lengths)
        assert not torch.allclose(
            expected, theirs(ids, mask=mask, prompt_lengths=lengths, disable_lora=True), atol=1e-3
        )  # the LoRA is not a no-op
        torch.testing.assert_close(ours(ids, mask, prompt_lengths=lengths).rewards, expected, **TOL)


def test_implicit_prm_matches_palm_implicit_prm():
    """Dense rewards beta * (log pi - log pi_ref) (B, n - 1) equal palm's ImplicitPRM with the same policy
    and reference."""
    policy, ref = tiny_palm(0), tiny_palm(1)
    theirs = PalmImplicitPRM(copy.deepcopy(policy), copy.deepcopy(ref), beta=0.5)
    ours = ImplicitPRM(copy.deepcopy(policy), copy.deepcopy(ref), beta=0.5)
    ids = torch.randint(0, VOCAB, (4, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs(ids)
        out = ours(ids)
    assert expected.shape == out.process_rewards.shape == (4, 8)
    assert expected.abs().min() > 0  # a different reference: the rewards are not trivially zero
    torch.testing.assert_close(out.process_rewards, expected, **TOL)
    torch.testing.assert_close(out.outcome_rewards, expected.sum(-1), **TOL)


# ------------------------------------------------------------------- palm-rlhf-pytorch 0.8.0 defects
def test_defect_implicit_prm_loss_sign():
    """palm returns the log-likelihood (minimising it lowers Q for label 1); PRIME's BCE raises it."""
    policy = tiny_palm()
    theirs = PalmImplicitPRM(copy.deepcopy(policy), beta=0.5)
    ours = ImplicitPRM(copy.deepcopy(policy), beta=0.5).train()
    ids = torch.randint(0, VOCAB, (4, 9), generator=torch.Generator().manual_seed(1))
    ones = torch.ones(4)
    with torch.no_grad():
        rewards = theirs(ids)
        palm_loss = theirs(ids, ones)
    target = ones[:, None].expand_as(rewards)
    torch.testing.assert_close(palm_loss, -F.binary_cross_entropy_with_logits(rewards, target))
    assert palm_loss < 0  # a cross-entropy loss is never negative

    def step(loss, params):
        opt = torch.optim.SGD(params, lr=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        palm_start, ours_start = theirs(ids).sum(-1), ours(ids).outcome_rewards
    step(theirs(ids, ones), theirs.parameters())
    step(ours(ids, labels=ones).loss, ours.trainable_parameters())
    with torch.no_grad():
        assert (theirs(ids).sum(-1) < palm_start).all()  # label 1 pushed palm's outcome down
        assert (ours(ids).outcome_rewards > ours_start).all()


@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_defect_negative_padding_reward_model(left):
    """palm crashes on a -1-padded batch; ours takes it (as ids + mask) and matches palm on each sequence."""
    theirs, ours = paired_reward_models()
    ids, _ = padded(pad=-1, left=left)
    with pytest.raises(IndexError):
        theirs(ids, mask=ids >= 0)
    real_ids, mask = from_negative_padding(ids)
    lengths = torch.tensor(PROMPT_LENS)
    with torch.no_grad():
        rewards = ours(real_ids, mask, prompt_lengths=lengths).rewards
        for i, (seq, plen) in enumerate(zip(SEQS, PROMPT_LENS)):
            alone = theirs(torch.tensor([seq]), prompt_lengths=torch.tensor([plen]))
            torch.testing.assert_close(rewards[i : i + 1], alone, **TOL)


@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_defect_negative_padding_implicit_prm(left):
    """palm's ImplicitPRM documents negative ids as padding but crashes on them; ours scores the padded batch
    exactly as palm scores each sequence alone, with zeros on padding."""
    policy, ref = tiny_palm(0), tiny_palm(1)
    theirs = PalmImplicitPRM(copy.deepcopy(policy), copy.deepcopy(ref), beta=0.5)
    ours = ImplicitPRM(copy.deepcopy(policy), copy.deepcopy(ref), beta=0.5)
    ids, _ = padded(pad=-1, left=left)
    with pytest.raises(IndexError):
        theirs(ids)
    with torch.no_grad():
        out = ours(*from_negative_padding(ids))
        for i, seq in enumerate(SEQS):
            kept = out.mask[i]
            assert int(kept.sum()) == len(seq) - 1
            torch.testing.assert_close(out.process_rewards[i][kept], theirs(torch.tensor([seq]))[0], **TOL)
    assert (out.process_rewards[~out.mask] == 0).all()


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_defect_segment_embeddings_never_train(lora):
    """palm's finetune_parameters() leaves out the prompt / response embeddings: a step over them leaves the
    embeddings at their values though they have gradients. Ours list them and train them."""
    theirs, ours = paired_reward_models(lora=lora)
    ids, mask = padded()
    lengths, labels = torch.tensor(PROMPT_LENS), torch.tensor([0.5, -1.0, 2.0])
    segments = lambda m: (m.prompt_embed, m.response_embed)  # noqa: E731

    palm_params = {id(p) for p in theirs.finetune_parameters()}
    assert not any(id(p) in palm_params for p in segments(theirs))
    before = [p.detach().clone() for p in segments(theirs)]
    opt = torch.optim.Adam(theirs.finetune_parameters(), lr=1e-2)
    theirs(ids, mask=mask, prompt_lengths=lengths, labels=labels).backward()
    opt.step()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in segments(theirs))
    assert all(torch.equal(p, b) for p, b in zip(segments(theirs), before))

    ours_params = {id(p) for p in ours.trainable_parameters()}
    assert all(id(p) in ours_params and p.requires_grad for p in segments(ours))
    before = [p.detach().clone() for p in segments(ours)]
    opt = torch.optim.Adam(ours.trainable_parameters(), lr=1e-2)
    ours(ids, mask, prompt_lengths=lengths, labels=labels).loss.backward()
    opt.step()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in segments(ours))
    assert not any(torch.equal(p, b) for p, b in zip(segments(ours), before))


def test_defect_column_labels_broadcast_in_mse():
    """(B, 1) float labels: palm's MSE silently averages a (B, B) grid; ours refuse the shape."""
    theirs, ours = paired_reward_models()
    ids, mask = padded()
    labels = torch.tensor([[0.5], [-1.0], [2.0]])
    with torch.no_grad():
        pred = theirs(ids, mask=mask)
        with pytest.warns(UserWarning, match="target size"):
            palm_loss = theirs(ids, mask=mask, labels=labels)
    torch.testing.assert_close(palm_loss, ((pred[None, :] - labels) ** 2).mean())  # every pred against every label
    assert not torch.allclose(palm_loss, ((pred - labels[:, 0]) ** 2).mean())
    with pytest.raises(InputError, match=r"shape \(B,\)"):
        ours(ids, mask, labels=labels)


def test_defect_integer_labels_in_mse():
    """Integer labels (class ids meant for a binned head) go into palm's MSE without a word; ours refuse them."""
    theirs, ours = paired_reward_models()
    ids, mask = padded()
    labels = torch.tensor([1, 0, 2])
    with torch.no_grad():
        pred = theirs(ids, mask=mask)
        palm_loss = theirs(ids, mask=mask, labels=labels)
    torch.testing.assert_close(palm_loss, ((pred - labels.float()) ** 2).mean())
    with pytest.raises(InputError, match="float labels"):
        ours(ids, mask, labels=labels)


def test_defect_stochastic_inference():
    """On a freshly built PaLM (train mode, as nn.Module builds it), palm's RewardModel is in train mode with
    dropout 0.1 and samples bins by default, so inference varies between calls; ours is built in eval mode,
    and samples bins only when asked."""
    palm = tiny_palm().train()
    ids, mask = padded()
    ids_many, mask_many = ids.repeat(20, 1), mask.repeat(20, 1)
    torch.manual_seed(0)
    theirs = PalmRewardModel(palm)
    theirs_binned = PalmRewardModel(palm, num_binned_output=5).eval()
    with torch.no_grad():
        assert theirs.training
        assert not torch.equal(theirs(ids, mask=mask), theirs(ids, mask=mask))
        bins = theirs_binned(ids_many, mask=mask_many)
        assert bins.dtype == torch.long and not torch.equal(bins, theirs_binned(ids_many, mask=mask_many))

    ours = SequenceRewardModel(palm, dropout=0.1)
    ours_binned = SequenceRewardModel(palm, num_bins=5, dropout=0.1)
    assert not ours.training and not ours_binned.training
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, mask).rewards, ours(ids, mask).rewards, atol=0, rtol=0)
        first, second = ours_binned(ids_many, mask_many), ours_binned(ids_many, mask_many)
    assert first.bin_ids is None
    torch.testing.assert_close(first.logits, second.logits, atol=0, rtol=0)
    ours.train()
    torch.testing.assert_close(ours.score(ids, mask).rewards, ours.eval()(ids, mask).rewards.detach(), atol=0, rtol=0)


def test_defect_exclusive_prompt_indicators_bare_assert():
    """Both prompt indicators: palm fails a bare assert (no message, gone under python -O); ours raise
    InputError naming the fields."""
    theirs, ours = paired_reward_models()
    ids, mask = padded()
    both = {**indicator_kwargs("prompt_mask", mask), **indicator_kwargs("prompt_lengths", mask)}
    with pytest.raises(AssertionError) as info:
        theirs(ids, mask=mask, **both)
    assert str(info.value) == ""
    with pytest.raises(InputError, match="prompt_mask or prompt_lengths"):
        ours(ids, mask, **both)
