"""sequence_reward and implicit_prm from YAML, against direct computations with the HF models."""

from __future__ import annotations

import pytest
import torch

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.errors import ConfigError, InputError

PAIRS = [
    ("what is one", "one"),
    ("why the cat sat on the mat", "because the cat is good so the cat sat"),
    ("", "yes"),
    ("how", ""),
    ("the dog ran fast", "no the dog ran slow then the dog sat"),
]


def processor(tmp_path, name, model_path, kwargs=None, batch_size=2, dtype="float32"):
    import yaml

    entry = {"name": name, "model_path": model_path, "device": "cpu", "batch_size": batch_size, "dtype": dtype}
    if kwargs:
        entry["kwargs"] = kwargs
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"rewards": [entry]}))
    return RewardProcessor(load_config(path).rewards)


def samples(pairs=PAIRS):
    return [{"prompt": p, "completion": c} for p, c in pairs]


def ids_by_hand(tokenizer, prompt, completion, separator=""):
    p = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    c = tokenizer(separator + completion, add_special_tokens=False)["input_ids"] if completion else []
    return p, c


def test_sequence_reward_hf_classifier(tmp_path, text_models, tokenizer):
    from transformers import AutoModelForSequenceClassification

    proc = processor(tmp_path, "sequence_reward", text_models["gpt2_cls"], batch_size=3)
    result = proc(samples())
    hf = AutoModelForSequenceClassification.from_pretrained(text_models["gpt2_cls"]).eval()
    expected = []
    with torch.no_grad():
        for prompt, completion in PAIRS:
            p, c = ids_by_hand(tokenizer, prompt, completion)
            expected.append(hf(torch.tensor([p + c])).logits[0, 0].item())
    assert result.rewards["sequence_reward"].tolist() == pytest.approx(expected, abs=1e-5)
    assert result.extras["sequence_reward"]["num_tokens"].tolist() == [
        sum(map(len, ids_by_hand(tokenizer, *pair))) for pair in PAIRS
    ]


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("bfloat16", 0.05)])
def test_sequence_reward_rewardzoo_format(tmp_path, text_models, tokenizer, dtype, tol):
    from rewardzoo.rewards.models.text.backbones import HFBackbone
    from rewardzoo.rewards.text.sequence_reward import SequenceRewardModel

    model = SequenceRewardModel(
        HFBackbone.from_pretrained(text_models["llama_policy"]),
        num_bins=5,
        bin_values=[1, 2, 3, 4, 5],
        lora_scope="reward",
    )
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.add_(0.1 * torch.randn_like(p))
    out_dir = tmp_path / "rm"
    model.save_pretrained(out_dir, tokenizer=tokenizer)
    result = processor(tmp_path, "sequence_reward", str(out_dir), kwargs={"separator": ""}, dtype=dtype)(samples())
    expected = []
    for prompt, completion in PAIRS:
        p, c = ids_by_hand(tokenizer, prompt, completion)
        out = model.score(torch.tensor([p + c]), prompt_lengths=torch.tensor([len(p)]))
        expected.append(out.rewards.item())
    scores = result.rewards["sequence_reward"]
    assert scores.tolist() == pytest.approx(expected, abs=tol)
    assert ((scores >= 1) & (scores <= 5)).all()


@pytest.mark.parametrize("name, kwargs", [("sequence_reward", None), ("implicit_prm", "ref")])
def test_bfloat16_close_to_float32(tmp_path, text_models, name, kwargs):
    key = "gpt2_cls" if name == "sequence_reward" else "gpt2_policy"
    kw = {"ref_model_path": text_models["gpt2_ref"]} if kwargs else None
    full = processor(tmp_path, name, text_models[key], kwargs=kw)(samples()).rewards[name]
    import yaml

    entry = {"name": name, "model_path": text_models[key], "device": "cpu", "dtype": "bfloat16", "kwargs": kw or {}}
    (tmp_path / "bf16.yaml").write_text(yaml.safe_dump({"rewards": [entry]}))
    half = RewardProcessor(load_config(tmp_path / "bf16.yaml").rewards)(samples()).rewards[name]
    assert half.tolist() == pytest.approx(full.tolist(), abs=0.05)


def test_sequence_reward_tiny_backbone_truncates_to_its_max_len(tmp_path, tokenizer):
    from rewardzoo.rewards.models.text.backbones import TinyTransformer
    from rewardzoo.rewards.text.sequence_reward import SequenceRewardModel

    torch.manual_seed(0)
    model = SequenceRewardModel(TinyTransformer(vocab_size=len(tokenizer), max_len=8))
    model.save_pretrained(tmp_path / "tiny_rm", tokenizer=tokenizer)
    pairs = [("the cat sat on the mat", "yes no yes"), ("one", "two three")]
    result = processor(tmp_path, "sequence_reward", str(tmp_path / "tiny_rm"))(samples(pairs))
    vocab = tokenizer.get_vocab()
    # 1 + 6 prompt tokens + 3 completion tokens > 8: the prompt loses its first two tokens (BOS, "the")
    kept = [(["cat", "sat", "on", "the", "mat"], ["yes", "no", "yes"]), (["<bos>", "one"], ["two", "three"])]
    expected = [
        model.score(torch.tensor([[vocab[w] for w in p + c]]), prompt_lengths=[len(p)]).rewards.item() for p, c in kept
    ]
    assert result.rewards["sequence_reward"].tolist() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("tokenizer_pad, kwargs", [(True, None), (False, {"pad_token_id": 0}), (False, None)])
def test_sequence_reward_classifier_without_config_pad(tmp_path, hf_configs, make_tokenizer, tokenizer_pad, kwargs):
    """A classifier whose config has no pad id pools by the tokenizer's pad (or kwargs.pad_token_id), else errors."""
    from transformers import GPT2ForSequenceClassification

    torch.manual_seed(4)
    model = GPT2ForSequenceClassification(hf_configs["gpt2"](num_labels=1, pad_token_id=None)).eval()
    tok = make_tokenizer()
    if not tokenizer_pad:
        tok.pad_token = None
        tok.eos_token = None
    model.save_pretrained(tmp_path / "cls")
    tok.save_pretrained(tmp_path / "cls")
    if not tokenizer_pad and kwargs is None:
        with pytest.raises(ConfigError, match="pad_token_id"):
            processor(tmp_path, "sequence_reward", str(tmp_path / "cls"))
        return
    result = processor(tmp_path, "sequence_reward", str(tmp_path / "cls"), kwargs=kwargs, batch_size=5)(samples())
    with torch.no_grad():  # batch of one: the classifier reads the last token, no pad id needed
        expected = [model(torch.tensor([sum(ids_by_hand(tok, *pair), [])])).logits[0, 0].item() for pair in PAIRS]
    assert result.rewards["sequence_reward"].tolist() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("key, match", [("gpt2_cls3", "num_labels=3"), ("gpt2_policy", "ForSequenceClassification")])
def test_sequence_reward_rejects_other_models(tmp_path, text_models, key, match):
    with pytest.raises(ConfigError, match=match):
        processor(tmp_path, "sequence_reward", text_models[key])


def test_model_path_required(tmp_path):
    for name in ("sequence_reward", "implicit_prm"):
        with pytest.raises(ConfigError, match="model_path"):
            RewardProcessor([{"name": name, "device": "cpu"}])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_implicit_prm_reward(tmp_path, text_models, tokenizer, arch, beta):
    from transformers import AutoModelForCausalLM

    proc = processor(
        tmp_path,
        "implicit_prm",
        text_models[f"{arch}_policy"],
        kwargs={"ref_model_path": text_models[f"{arch}_ref"], "beta": beta},
        batch_size=4,
    )
    result = proc(samples())
    policy = AutoModelForCausalLM.from_pretrained(text_models[f"{arch}_policy"]).eval()
    ref = AutoModelForCausalLM.from_pretrained(text_models[f"{arch}_ref"]).eval()
    expected, counts = [], []
    with torch.no_grad():
        for prompt, completion in PAIRS:
            p, c = ids_by_hand(tokenizer, prompt, completion)
            seq = torch.tensor([p + c])
            lp = torch.log_softmax(policy(seq).logits[0, :-1].double(), -1)
            lr = torch.log_softmax(ref(seq).logits[0, :-1].double(), -1)
            # completion token j sits at position len(p) + j and is predicted from position len(p) + j - 1
            total = sum(
                beta * (lp[t - 1, seq[0, t]] - lr[t - 1, seq[0, t]]).item()
                for t in range(max(len(p), 1), len(p) + len(c))
            )
            expected.append(total)
            counts.append(len(c))
    assert result.rewards["implicit_prm"].tolist() == pytest.approx(expected, abs=1e-5)
    assert result.extras["implicit_prm"]["num_completion_tokens"].tolist() == counts
    assert result.rewards["implicit_prm"][3] == 0.0  # empty completion: nothing to score


def test_implicit_prm_chat_template(tmp_path, text_models, tokenizer):
    from transformers import AutoModelForCausalLM

    proc = processor(
        tmp_path,
        "implicit_prm",
        text_models["gpt2_policy"],
        kwargs={"ref_model_path": text_models["gpt2_ref"], "chat_template": True},
    )
    pairs = PAIRS[:2]
    result = proc(samples(pairs))
    policy = AutoModelForCausalLM.from_pretrained(text_models["gpt2_policy"]).eval()
    ref = AutoModelForCausalLM.from_pretrained(text_models["gpt2_ref"]).eval()
    vocab = tokenizer.get_vocab()
    expected = []
    with torch.no_grad():
        for prompt, completion in pairs:
            head = ["<user>"] + prompt.split() + ["<assistant>"]
            tail = completion.split()
            seq = torch.tensor([[vocab[w] for w in head + tail]])
            lp = torch.log_softmax(policy(seq).logits[0, :-1].double(), -1)
            lr = torch.log_softmax(ref(seq).logits[0, :-1].double(), -1)
            expected.append(
                sum(0.1 * (lp[t - 1, seq[0, t]] - lr[t - 1, seq[0, t]]).item() for t in range(len(head), seq.shape[1]))
            )
    assert result.rewards["implicit_prm"].tolist() == pytest.approx(expected, abs=1e-5)


def test_implicit_prm_needs_reference(tmp_path, text_models):
    with pytest.raises(ConfigError, match="ref_model_path"):
        processor(tmp_path, "implicit_prm", text_models["gpt2_policy"])


def test_empty_pair_names_sample(tmp_path, text_models, make_tokenizer):
    import shutil

    policy = tmp_path / "no_bos_policy"
    shutil.copytree(text_models["gpt2_policy"], policy)
    make_tokenizer(bos=False).save_pretrained(policy)  # without BOS an empty pair has no tokens
    proc = processor(tmp_path, "implicit_prm", str(policy), kwargs={"ref_model_path": text_models["gpt2_ref"]})
    with pytest.raises(InputError) as err:
        proc(samples([("one", "two"), ("two", "one"), ("three", "four"), ("", "")]))  # batch_size 2: 2nd call
    assert err.value.sample == 3 and err.value.field == "completion" and err.value.reward == "implicit_prm"


def test_truncation_keeps_the_completion(tmp_path, text_models, tokenizer):
    proc = processor(
        tmp_path,
        "implicit_prm",
        text_models["gpt2_policy"],
        kwargs={"ref_model_path": text_models["gpt2_ref"], "max_length": 6},
    )
    encoder = proc.rewards["implicit_prm"].encoder
    batch = encoder(["the cat sat on the mat"], ["yes no yes"])
    assert batch.input_ids.shape == (1, 6)
    assert batch.input_ids[0].tolist() == [tokenizer.get_vocab()[w] for w in "on the mat yes no yes".split()]
    assert batch.response_mask[0].tolist() == [False] * 3 + [True] * 3
    long = encoder(["the"], ["one two three four five six seven eight"])
    assert long.input_ids.shape == (1, 6) and long.prompt_lengths.item() == 0


@pytest.mark.parametrize("mode", ["cpu", "drop"])
def test_sequence_reward_scores_after_a_wake_are_bit_identical(text_models, mode):
    entry = {"name": "s", "reward_model": "sequence_reward", "model_path": text_models["gpt2_cls"], "device": "cpu"}
    expected = RewardProcessor([entry])(samples()).rewards["s"]
    sleeper = RewardProcessor([{**entry, "offload": mode}])
    reward, residency = sleeper.rewards["s"], sleeper.loader.residency
    assert residency.is_asleep(reward) and (residency.weight_bytes(reward) == 0) == (mode == "drop")
    assert sleeper(samples()).rewards["s"].tobytes() == expected.tobytes()
    assert residency.is_asleep(reward)


class _Payload:
    """Pickles as ``os.mkdir(target)``: what a hostile ``pytorch_model.bin`` would run if it were unpickled."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        import os

        return (os.mkdir, (self.target,))


@pytest.mark.parametrize("case", ["plain", "payload", "truncated"])
def test_a_pytorch_bin_checkpoint_loads_when_plain_and_is_one_config_error_when_hostile(tmp_path, text_models, case):
    """transformers reads ``pytorch_model.bin`` with torch.load(weights_only=True); its refusal (or a torn zip) came
    out as a raw traceback from `rewardzoo score`."""
    import shutil

    from safetensors.torch import load_file

    folder = tmp_path / "cls"
    shutil.copytree(text_models["gpt2_cls"], folder)
    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    target = tmp_path / "ran"
    if case == "plain":
        torch.save(state, folder / "pytorch_model.bin")
        want = processor(tmp_path, "sequence_reward", text_models["gpt2_cls"])(samples()).rewards["sequence_reward"]
        got = processor(tmp_path, "sequence_reward", str(folder))(samples()).rewards["sequence_reward"]
        assert got.tolist() == want.tolist()  # the same weights, read from the .bin
        return
    torch.save({**state, "x": _Payload(str(target))}, folder / "pytorch_model.bin")
    if case == "truncated":
        (folder / "pytorch_model.bin").write_bytes((folder / "pytorch_model.bin").read_bytes()[:300])
    said = "not a plain tensor checkpoint" if case == "payload" else "not a readable torch checkpoint"
    with pytest.raises(ConfigError, match=said) as info:
        processor(tmp_path, "sequence_reward", str(folder))
    assert info.value.field == "model_path" and info.value.entry == "sequence_reward"
    assert not target.exists()
