"""implicit_prm with a chat template: the scored span is the completion text (PRIME / verl), not the
template's end-of-turn tokens, unless ``score_end_of_turn``; checked against log-probs computed by hand."""

from __future__ import annotations

import shutil

import pytest
import torch

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.text.implicit_prm import ImplicitPRMReward

# every turn ends with "<eos> so" (two end-of-turn tokens, one special, one ordinary word)
TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}> {{ m.content }} <eos> so {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)
PAIRS = [("what is one", "one"), ("why the cat sat", "because the cat is good"), ("how", "")]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, text_models):
    from transformers import AutoTokenizer

    out = {}
    for key in ("gpt2_policy", "gpt2_ref"):
        target = tmp_path_factory.mktemp(key)
        shutil.copytree(text_models[key], target, dirs_exist_ok=True)
        tok = AutoTokenizer.from_pretrained(text_models[key])
        tok.chat_template = TEMPLATE
        tok.save_pretrained(target)
        out[key] = str(target)
    return out


def _by_hand(dirs, with_tail):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(dirs["gpt2_policy"])
    policy = AutoModelForCausalLM.from_pretrained(dirs["gpt2_policy"]).eval()
    ref = AutoModelForCausalLM.from_pretrained(dirs["gpt2_ref"]).eval()
    totals, counts = [], []
    for prompt, completion in PAIRS:
        head = f"<user> {prompt} <eos> so <assistant> "  # the template rendered by hand
        turn = f"{completion} <eos> so " if with_tail else completion
        p = tok(head, add_special_tokens=False)["input_ids"]
        c = tok(turn, add_special_tokens=False)["input_ids"] if turn else []
        seq = torch.tensor([p + c])
        with torch.no_grad():
            lp = torch.log_softmax(policy(seq).logits[0, :-1].double(), -1)
            lr = torch.log_softmax(ref(seq).logits[0, :-1].double(), -1)
        total = sum(0.1 * (lp[len(p) + j - 1, t] - lr[len(p) + j - 1, t]).item() for j, t in enumerate(c))
        totals.append(total)
        counts.append(len(c))
    return totals, counts


@pytest.mark.parametrize("with_tail", [False, True])
def test_span_matches_hand_computation(dirs, with_tail):
    kwargs = {"score_end_of_turn": True} if with_tail else {}
    reward = ImplicitPRMReward(dirs["gpt2_policy"], ref_model_path=dirs["gpt2_ref"], chat_template=True, **kwargs)
    out = reward(prompt=[p for p, _ in PAIRS], completion=[c for _, c in PAIRS])
    totals, counts = _by_hand(dirs, with_tail)
    assert out.rewards.tolist() == pytest.approx(totals, abs=1e-5)
    assert out.extras["num_completion_tokens"].tolist() == counts
    if not with_tail:
        assert counts == [1, 5, 0]  # the completion words only; no "<eos> so"
    else:
        assert counts == [3, 7, 2]


def test_default_without_template_unchanged(text_models):
    a = ImplicitPRMReward(text_models["gpt2_policy"], ref_model_path=text_models["gpt2_ref"])
    b = ImplicitPRMReward(text_models["gpt2_policy"], ref_model_path=text_models["gpt2_ref"], score_end_of_turn=True)
    prompts, completions = [p for p, _ in PAIRS], [c for _, c in PAIRS]
    assert (
        a(prompt=prompts, completion=completions).rewards.tolist()
        == b(prompt=prompts, completion=completions).rewards.tolist()
    )


def test_option_must_be_bool(text_models):
    with pytest.raises(ConfigError, match="score_end_of_turn"):
        ImplicitPRMReward(text_models["gpt2_policy"], ref_model_path=text_models["gpt2_ref"], score_end_of_turn="no")
