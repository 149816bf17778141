"""Declared resources (``reward.resources``, ``reward.hold``): residency reads the record and nothing else.

- A model held three levels down inside helper objects that are not rewardzoo's (``reward.helper.inner.holder.model``)
  and declared sleeps (``offload: cpu`` and ``drop``) and wakes bit-identical, scoring as before.
- For every reward loaded here from a tiny model (the residency tests' families and more), nothing it holds escapes
  its record: the torch modules, parameters and ONNX sessions reachable from the instance through object references
  (``gc.get_referents``, in this test only) are all declared, and after a ``drop`` sleep no parameter or buffer
  reachable from it keeps its memory. The same reachability finds an undeclared model, which is what makes the check
  able to fail.
"""

from __future__ import annotations

import gc
import os
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("open_clip")

from rewardzoo import RewardProcessor
from rewardzoo import testing as rzt
from rewardzoo.core.residency import module_tensors
from rewardzoo.rewards.base import Inputs, PointwiseReward
from rewardzoo.rewards.models.onnx import ReleasableSession
from rewardzoo.shared.resources import Resources

from .test_execution_residency import FAMILIES, _build

# --------------------------------------------------------------------------- what an instance reaches
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType, Resources)


def reachable(root):
    """(modules, loose tensors, ONNX sessions) reachable from ``root`` through object references, the record itself
    and classes, modules and functions (the process's globals and caches) left out; a module is not looked into
    (its submodules and tensors are its own)."""
    modules, tensors, sessions = {}, {}, {}
    seen, todo = {id(root)}, [root]
    while todo:
        obj = todo.pop()
        if isinstance(obj, torch.nn.Module):
            modules[id(obj)] = obj
            continue
        if isinstance(obj, torch.Tensor):
            tensors[id(obj)] = obj
            continue
        if isinstance(obj, ReleasableSession):
            sessions[id(obj)] = obj
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, _OPAQUE):
                seen.add(id(ref))
                todo.append(ref)
    return list(modules.values()), list(tensors.values()), list(sessions.values())


def escaped(reward):
    """What ``reward`` holds that its record does not declare: (module class names, parameter shapes, sessions)."""
    record = reward.resources
    declared = {id(t) for t in module_tensors(record.modules())}
    modules, tensors, sessions = reachable(reward)
    loose = [m for m in modules if any(id(t) not in declared for t in module_tensors([m]))]
    params = [t for t in tensors if isinstance(t, torch.nn.Parameter) and id(t) not in declared]
    held = {id(s) for s in record.sessions()}
    return (
        sorted(type(m).__name__ for m in loose),
        [tuple(p.shape) for p in params],
        [s.path for s in sessions if id(s) not in held],
    )


# --------------------------------------------------------------------------- a model three levels down
class Holder:
    """Not rewardzoo's: a third-party object keeping the model."""

    def __init__(self, model):
        self.model = model


class Inner:
    def __init__(self, model):
        self.holder = Holder(model)


class Helper:
    def __init__(self, model):
        self.inner = Inner(model)


def _deep_model(path):
    from safetensors.torch import load_file

    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    model.load_state_dict(load_file(os.path.join(path, "model.safetensors")))
    return model.eval().requires_grad_(False)


class DeepHeld(PointwiseReward):
    """Test-local: the model of ``model_path``/model.safetensors at ``self.helper.inner.holder.model``, declared.
    Score of a prompt: the model at the prompt's length (as 6 features)."""

    inputs = Inputs(("prompt",))
    modality = "text"
    declare = True

    def __init__(self, model_path=None, device="cpu", dtype="float32"):
        super().__init__(model_path, device, dtype)
        self.helper = Helper(_deep_model(model_path).to(device))
        if self.declare:
            self.hold(self.helper.inner.holder.model)

    def __call__(self, prompt, **_):
        x = torch.tensor([[len(q) / (k + 1) for k in range(6)] for q in prompt], device=self.device)
        return self.helper.inner.holder.model(x)[:, 0].double().cpu()


class DeepUndeclared(DeepHeld):
    """The same model, not declared: residency cannot see it."""

    declare = False


def _deep_checkpoint(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"))
    x = torch.tensor([[len(q) / (k + 1) for k in range(6)] for q in PROMPTS])
    with torch.no_grad():
        return model(x)[:, 0].double().numpy(), {k: v.clone() for k, v in model.state_dict().items()}


PROMPTS = ["a", "two words", "three more words here"]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["cpu", "drop"])
def test_a_model_held_three_levels_inside_helper_objects_sleeps_and_wakes_bit_identical(tmp_path, mode, device):
    expected, weights = _deep_checkpoint(tmp_path)
    entry = {"name": "d", "reward_model": f"{__name__}:DeepHeld", "model_path": str(tmp_path), "device": device}
    resident = RewardProcessor([entry])([{"prompt": p} for p in PROMPTS]).rewards["d"]
    np.testing.assert_allclose(resident, expected, rtol=1e-6)  # the model computes what the checkpoint says

    sleeper = RewardProcessor([{**entry, "offload": mode}])
    reward, residency = sleeper.rewards["d"], sleeper.loader.residency
    model = reward.helper.inner.holder.model
    assert reward.resources.modules() == [model] and escaped(reward) == ([], [], [])
    for _ in range(2):  # asleep between calls, woken by each call
        assert residency.is_asleep(reward)
        params = [p.data for p in model.parameters()]
        if mode == "drop":
            assert all(p.numel() == 0 for p in params) and residency.weight_bytes(reward) == 0
        else:
            assert all(p.device.type == "cpu" for p in params)
        scores = sleeper([{"prompt": p} for p in PROMPTS]).rewards["d"]
        assert scores.tobytes() == resident.tobytes()
    sleeper.wake()
    assert not residency.is_asleep(reward)
    for key, value in model.state_dict().items():  # the woken weights are the checkpoint's bits, on their device
        assert value.device.type == device and torch.equal(value.cpu(), weights[key]), key
    if mode == "drop":  # read back from the checkpoint the record names, not from a private copy
        assert residency.files(reward) == [str((tmp_path / "model.safetensors").resolve())]
        assert residency.private_bytes(reward) == 0
    sleeper.close()


def test_an_undeclared_model_never_sleeps_and_the_reachability_check_finds_it(tmp_path):
    _deep_checkpoint(tmp_path)
    entry = {"name": "d", "reward_model": f"{__name__}:DeepUndeclared", "model_path": str(tmp_path), "device": "cpu"}
    sleeper = RewardProcessor([{**entry, "offload": "drop"}])
    reward = sleeper.rewards["d"]
    model = reward.helper.inner.holder.model
    assert not reward.resources and not sleeper.loader.residency.is_asleep(reward)
    assert all(p.numel() for p in model.parameters())  # still in memory: nothing told residency about it
    assert escaped(reward) == (["Sequential"], [], [])


def test_hold_refuses_what_is_not_a_model_session_reward_or_record():
    reward = DeepHeld.__new__(DeepHeld)
    with pytest.raises(TypeError, match="cannot hold a builtins.dict"):
        reward.hold({"model": torch.nn.Linear(2, 2)})


# --------------------------------------------------------------------------- every reward loaded from a tiny model
def _more(family, root):
    """Config entries of rewards beyond the residency tests' families (loaded, not scored)."""
    if family == "clap_score":
        return {"reward_model": "clap_score", "model_path": str(rzt.tiny_clap_dir(root / "clap"))}
    if family == "asr_wer":
        return {"reward_model": "asr_wer", "model_path": str(rzt.tiny_whisper_dir(root / "whisper", seed=5))}
    if family == "speaker_similarity":
        return {"reward_model": "speaker_similarity", "model_path": str(rzt.tiny_wavlm_xvector_dir(root / "wavlm"))}
    if family == "audiobox_aesthetics":
        pytest.importorskip("audiobox_aesthetics")
        return {"reward_model": "audiobox_aesthetics", "model_path": str(rzt.tiny_audiobox_checkpoint(root / "ab"))}
    if family == "repetition_asr":
        path = str(rzt.tiny_whisper_dir(root / "whisper", seed=5))
        return {"reward_model": "repetition", "kwargs": {"asr": {"reward_model": "asr_wer", "model_path": path}}}
    if family == "imagebind_score":
        pytest.importorskip("imagebind")
        return {"reward_model": "imagebind_score", "model_path": str(rzt.tiny_imagebind_dir(root / "ib", seed=3))}
    if family == "video_subject_consistency":
        path = rzt.tiny_dino_dirs(root / "dino", seed=0)["vit"]
        return {"reward_model": "video_subject_consistency", "model_path": str(path)}
    if family == "video_clip_score":
        oc = rzt.tiny_open_clip_dir(root / "oc", seed=2)
        return {"reward_model": "video_clip_score", "model_path": str(oc)}
    if family == "group_diversity_timm":
        pytest.importorskip("timm")
        path = rzt.tiny_timm_dinov3_dir(root / "dinov3", seed=0)
        return {"reward_model": "group_diversity", "model_path": str(path), "kwargs": {"embedding": "timm"}}
    if family == "nsfw_safety":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("nudenet")
        return {"reward_model": "nsfw_safety"}
    if family == "ocr_rapidocr":
        pytest.importorskip("rapidocr_onnxruntime")
        return {"reward_model": "ocr"}
    if family == "ocr_vlm":
        path = rzt.tiny_vlm_dir(root / "qwen2_vl", "qwen2_vl", seed=0)
        return {"reward_model": "ocr", "model_path": str(path), "kwargs": {"engine": "vlm"}}
    if family == "unified_reward":
        path = rzt.tiny_vlm_dir(root / "qwen2_vl", "qwen2_vl", seed=0)
        return {"reward_model": "unified_reward", "model_path": str(path)}
    if family == "unified_reward_think":
        path = rzt.tiny_vlm_dir(root / "qwen2_vl", "qwen2_vl", seed=0)
        return {"reward_model": "unified_reward_think", "model_path": str(path)}
    if family == "implicit_prm":
        paths = rzt.tiny_text_models(root / "text", seed=0)
        return {
            "reward_model": "implicit_prm",
            "model_path": paths["gpt2_policy"],
            "kwargs": {"ref_model_path": paths["gpt2_ref"]},
        }
    if family == "edit_preservation":
        oc = str(rzt.tiny_open_clip_dir(root / "oc", seed=2))
        return {"reward_model": "edit_preservation", "model_path": oc, "kwargs": {"metric": "clip"}}
    if family == "dnsmos":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("speechmos")
        return {"reward_model": "dnsmos"}
    if family == "speech_presence":
        pytest.importorskip("silero_vad")
        return {"reward_model": "speech_presence"}
    if family == "video_dynamic_degree":
        from torchvision.models.optical_flow import raft_small

        torch.manual_seed(0)
        path = root / "raft_small.pth"
        torch.save(raft_small(weights=None, progress=False).state_dict(), path)
        return {"reward_model": "video_dynamic_degree", "model_path": str(path), "kwargs": {"arch": "small"}}
    raise KeyError(family)


MORE = [
    "dnsmos",
    "speech_presence",
    "video_dynamic_degree",
    "clap_score",
    "asr_wer",
    "speaker_similarity",
    "audiobox_aesthetics",
    "repetition_asr",
    "imagebind_score",
    "video_subject_consistency",
    "video_clip_score",
    "group_diversity_timm",
    "nsfw_safety",
    "ocr_rapidocr",
    "ocr_vlm",
    "unified_reward",
    "unified_reward_think",
    "implicit_prm",
    "edit_preservation",
]


@pytest.mark.parametrize("family", FAMILIES + MORE)
def test_nothing_a_loaded_reward_holds_escapes_its_record_and_a_drop_frees_all_of_it(family, tmp_path):
    entry = _build(family, tmp_path)[0] if family in FAMILIES else _more(family, tmp_path)
    sleeper = RewardProcessor([{"name": "r", "device": "cpu", **entry, "offload": "drop"}])
    reward = sleeper.rewards["r"]
    try:
        assert escaped(reward) == ([], [], [])
        assert reward.resources, "a reward loaded from model files declares what it holds"
        modules, tensors, sessions = reachable(reward)
        live = [t for t in (*module_tensors(modules), *tensors) if isinstance(t, torch.nn.Parameter)]
        live += [t for t in module_tensors(modules) if not isinstance(t, torch.nn.Parameter)]  # buffers
        assert live or sessions
        assert all(t.data.numel() == 0 for t in live), "asleep (dropped) from the start"
        assert all(s.released for s in sessions)
        sleeper.wake()
        assert all(not s.released for s in sessions) and (not live or any(t.data.numel() for t in live))
    finally:
        sleeper.wake()  # cached models (open_clip, VLM backbones) stay usable for other tests
