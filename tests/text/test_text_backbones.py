"""Backbones and LoRA: padded batches equal unpadded sequences; the HF adapter equals the HF model's own output."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.text.backbones import Backbone, HFBackbone, TinyTransformer, as_backbone
from rewardzoo.rewards.models.text.lora import LoRALinear, add_lora, lora_parameters

SEQS = [[2, 5, 6, 7, 8, 9, 10], [2, 5, 6], [2, 11, 12, 13, 14], [4]]


@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_tiny_transformer_padding_invariance(padded, left):
    torch.manual_seed(0)
    model = TinyTransformer(vocab_size=40, dim=32, depth=2, heads=4).eval()
    ids, mask = padded(SEQS, pad=0, left=left)
    with torch.no_grad():
        hidden, logits = model.hidden_states(ids, mask), model.logits(ids, mask)
        for i, seq in enumerate(SEQS):
            alone = torch.tensor([seq])
            torch.testing.assert_close(hidden[i][mask[i]], model.hidden_states(alone)[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(logits[i][mask[i]], model.logits(alone)[0], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(hidden).all()  # padded rows stay finite too


def test_tiny_transformer_is_causal():
    torch.manual_seed(0)
    model = TinyTransformer(vocab_size=40).eval()
    a, b = torch.tensor([[2, 5, 6, 7]]), torch.tensor([[2, 5, 6, 30]])
    with torch.no_grad():
        ha, hb = model.hidden_states(a), model.hidden_states(b)
    torch.testing.assert_close(ha[:, :3], hb[:, :3])
    assert not torch.allclose(ha[:, 3], hb[:, 3])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_hf_adapter_matches_hf_model(hf_configs, padded, arch, left):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    hf = AutoModelForCausalLM.from_config(hf_configs[arch]()).eval()
    backbone = HFBackbone(hf)
    assert isinstance(backbone, Backbone) and backbone.dim == 32 and backbone.vocab_size == hf.config.vocab_size
    ids, mask = padded(SEQS, pad=0, left=left)
    with torch.no_grad():
        hidden, logits = backbone.hidden_states(ids, mask), backbone.logits(ids, mask)
        for i, seq in enumerate(SEQS):
            ref = hf(torch.tensor([seq]), output_hidden_states=True)
            torch.testing.assert_close(hidden[i][mask[i]], ref.hidden_states[-1][0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(logits[i][mask[i]], ref.logits[0], atol=1e-5, rtol=1e-5)


def test_hf_base_model_hidden_states_and_no_logits(text_models, padded):
    from transformers import AutoModel

    backbone = HFBackbone.from_pretrained(text_models["gpt2_policy"])  # AutoModel: no LM head
    hf = AutoModel.from_pretrained(text_models["gpt2_policy"]).eval()
    ids, mask = padded(SEQS)
    with torch.no_grad():
        hidden = backbone.hidden_states(ids, mask)
        for i, seq in enumerate(SEQS):
            torch.testing.assert_close(
                hidden[i][mask[i]], hf(torch.tensor([seq])).last_hidden_state[0], atol=1e-5, rtol=1e-5
            )
    with pytest.raises(ConfigError, match="causal_lm=True"):
        backbone.logits(ids, mask)


@pytest.mark.parametrize("bad", [-1, 10_000])
def test_out_of_range_ids_are_clear_errors(bad):
    model = TinyTransformer(vocab_size=40)
    ids = torch.tensor([[2, 5, bad]])
    with pytest.raises(InputError, match="attention_mask"):
        model.hidden_states(ids)


def test_mask_shape_mismatch():
    with pytest.raises(InputError, match="attention_mask"):
        TinyTransformer().hidden_states(torch.tensor([[1, 2, 3]]), torch.ones(1, 2))


def test_as_backbone_rejects_other_modules():
    with pytest.raises(ConfigError, match="not a backbone"):
        as_backbone(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("kind", ["linear", "conv1d"])
def test_lora_formula_and_zero_init(kind):
    """LoRA output equals base(x) + (alpha/r) * x A^T B^T, and is a no-op while B is zero."""
    torch.manual_seed(0)
    if kind == "linear":
        base = torch.nn.Linear(8, 6)
    else:
        from transformers.pytorch_utils import Conv1D

        base = Conv1D(6, 8)  # (nf=out, nx=in)
        torch.nn.init.normal_(base.weight)
    holder = torch.nn.Module()
    holder.q_proj = base
    x = torch.randn(3, 5, 8)
    before = base(x)
    wrapped = add_lora(holder, "reward", r=2, alpha=4.0, targets=["q_proj"])
    assert wrapped == ["q_proj"] and isinstance(holder.q_proj, LoRALinear)
    torch.testing.assert_close(holder.q_proj(x), before)
    adapter = holder.q_proj.adapters["reward"]
    torch.nn.init.normal_(adapter.B.weight)
    expected = before + 2.0 * F.linear(F.linear(x, adapter.A.weight), adapter.B.weight)
    torch.testing.assert_close(holder.q_proj(x), expected)
    assert {id(p) for p in lora_parameters(holder, "reward")} == {id(adapter.A.weight), id(adapter.B.weight)}


def test_lora_errors():
    model = TinyTransformer()
    add_lora(model, "reward")
    with pytest.raises(ConfigError, match="already exists"):
        add_lora(model, "reward")
    with pytest.raises(ConfigError, match="no projection"):
        add_lora(model, "other", targets=["nope"])
    add_lora(model, "second")  # several named scopes coexist
    assert all("second" in m.adapters and "reward" in m.adapters for m in model.modules() if isinstance(m, LoRALinear))


@pytest.mark.parametrize("arch", ["bert", "deberta-v2"])
@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_hf_adapter_on_encoders(padded, arch, left):
    """Encoders (reward models are often BERT / DeBERTa): no use_cache argument, LoRA finds their projections."""
    from transformers import BertConfig, BertModel, DebertaV2Config, DebertaV2Model

    torch.manual_seed(2)
    sizes = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    hf = (BertModel(BertConfig(**sizes)) if arch == "bert" else DebertaV2Model(DebertaV2Config(**sizes))).eval()
    backbone = HFBackbone(hf)
    ids, mask = padded(SEQS, pad=0, left=left)
    with torch.no_grad():
        hidden = backbone.hidden_states(ids, mask)
        for i, seq in enumerate(SEQS):
            torch.testing.assert_close(
                hidden[i][mask[i]], hf(torch.tensor([seq])).last_hidden_state[0], atol=1e-5, rtol=1e-5
            )
    expected = {"bert": ["query", "value"], "deberta-v2": ["query_proj", "value_proj"]}[arch]
    assert sorted({name.rsplit(".", 1)[-1] for name in add_lora(backbone, "reward")}) == expected
