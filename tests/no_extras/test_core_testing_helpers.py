"""rewardzoo.testing: the tiny saved models load with the libraries' own loaders and match their in-memory twins."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import pytest

import rewardzoo.testing as rzt

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _same_state(a: dict, b: dict) -> bool:
    import torch

    return sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_import_is_light():
    code = (
        "import rewardzoo.testing, sys; heavy = [m for m in ('torch', 'open_clip', 'transformers', 'safetensors') "
        "if m in sys.modules]; assert not heavy, heavy; assert rewardzoo.testing.IMAGE_SIZE == 64"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_every_public_function_has_a_docstring():
    for name in rzt.__all__:
        obj = getattr(rzt, name)
        if callable(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name
    assert "ReferenceAestheticMLP" in dir(rzt)


def test_star_import_resolves_every_name_without_torch():
    code = (
        "from rewardzoo.testing import *; import rewardzoo.testing as t, sys; "
        "missing = [n for n in t.__all__ if n not in globals()]; assert not missing, missing; "
        "heavy = [m for m in ('torch', 'open_clip', 'transformers', 'safetensors') if m in sys.modules]; "
        "assert not heavy, heavy; assert tiny_vlm_dir.__module__ == 'rewardzoo.testing.vlm'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_every_public_name_comes_from_its_family_module():
    pytest.importorskip("torch", reason="ReferenceAestheticMLP is a torch class")
    exported = set(rzt.__all__) | {"ReferenceAestheticMLP"}
    assert set(dir(rzt)) == exported
    for name in sorted(exported):
        family = importlib.import_module(rzt._LAZY[name])
        assert getattr(rzt, name) is getattr(family, name), name
        if inspect.isfunction(getattr(rzt, name)) or inspect.isclass(getattr(rzt, name)):
            assert getattr(rzt, name).__module__ == family.__name__, name
    with pytest.raises(AttributeError, match="no_such_builder"):
        rzt.no_such_builder  # noqa: B018


def test_every_builder_and_constant_of_a_family_module_is_exported():
    for module in sorted(set(rzt._LAZY.values())):
        family = importlib.import_module(module)
        defined = {
            n
            for n, v in vars(family).items()
            if not n.startswith("_") and (n.isupper() or (inspect.isfunction(v) and v.__module__ == module))
        }
        assert defined and defined <= set(rzt._LAZY), (module, sorted(defined - set(rzt._LAZY)))


def test_open_clip_dir_loads_with_open_clip_and_matches_the_in_memory_model(tmp_path):
    pytest.importorskip("safetensors")
    open_clip = pytest.importorskip("open_clip")

    path = rzt.tiny_open_clip_dir(tmp_path / "a" / "tiny-open-clip", seed=3)
    assert path == tmp_path / "a" / "tiny-open-clip"
    assert {p.name for p in path.iterdir()} == {"open_clip_config.json", "open_clip_model.safetensors"}
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{path}")
    expected = rzt.tiny_open_clip_model(seed=3).state_dict()
    assert _same_state(model.state_dict(), expected)
    assert not _same_state(rzt.tiny_open_clip_model(seed=4).state_dict(), expected)
    from PIL import Image

    assert tuple(preprocess(Image.new("RGB", (90, 70))).shape) == (3, rzt.IMAGE_SIZE, rzt.IMAGE_SIZE)
    tokens = open_clip.get_tokenizer(f"local-dir:{path}")(["a photo of a cat"])
    assert tuple(model.encode_text(tokens).shape) == (1, rzt.EMBED_DIM)
    # a config override (the video tests' one-text-layer variant) is written and loaded as given
    other = rzt.tiny_open_clip_dir(tmp_path / "video", model_cfg=rzt.TINY_VIDEO_OPEN_CLIP)
    assert len(open_clip.create_model(f"local-dir:{other}").transformer.resblocks) == 1
    assert rzt.TINY_OPEN_CLIP["text_cfg"]["layers"] == 2  # the module constants were not mutated


def test_hf_clip_dir_loads_with_transformers_and_tokenises_offline(tmp_path):
    pytest.importorskip("transformers")
    open_clip = pytest.importorskip("open_clip")
    import torch
    from transformers import CLIPModel, CLIPProcessor

    path = rzt.tiny_hf_clip_dir(tmp_path / "openai-tiny-clip")
    model = CLIPModel.from_pretrained(path).eval()
    processor = CLIPProcessor.from_pretrained(path)
    torch.manual_seed(1)
    assert _same_state(model.state_dict(), CLIPModel(rzt.tiny_hf_clip_config()).state_dict())
    ids = processor(text=["a photo of a cat"], return_tensors="pt")["input_ids"][0].tolist()
    oc_ids = open_clip.tokenize(["a photo of a cat"])[0].tolist()
    assert ids[0] == 49406 and ids[-1] == 49407 and ids == oc_ids[: len(ids)]  # the same BPE as open_clip's
    from PIL import Image

    pixels = processor(images=[Image.new("RGB", (90, 70))], return_tensors="pt")["pixel_values"]
    assert tuple(pixels.shape) == (1, 3, rzt.IMAGE_SIZE, rzt.IMAGE_SIZE)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), pixel_values=pixels)
    assert tuple(out.logits_per_image.shape) == (1, 1)


def test_hps_checkpoint_is_a_weights_only_state_dict_of_the_returned_model(tmp_path):
    pytest.importorskip("open_clip")
    import torch

    path, model = rzt.hps_checkpoint(tmp_path / "ckpt" / "HPS_v2.1_compressed.pt", seed=5)
    assert path.is_file() and not model.training
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert set(state) == {"state_dict"} and _same_state(state["state_dict"], model.state_dict())
    assert _same_state(model.state_dict(), rzt.tiny_open_clip_model(seed=5).state_dict())


@pytest.mark.parametrize("name", ["head.pth", "head.safetensors"])
def test_aesthetic_head_file_holds_the_reference_head_under_its_names(tmp_path, name):
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file

    path = rzt.aesthetic_head_file(tmp_path / "sub" / name, seed=11)
    reference = rzt.reference_aesthetic_head(seed=11)
    assert isinstance(reference, rzt.ReferenceAestheticMLP) and not reference.training
    state = load_file(str(path)) if name.endswith(".safetensors") else torch.load(path, weights_only=True)
    assert sorted(state) == sorted(f"layers.{i}.{p}" for i in (0, 2, 4, 6, 7) for p in ("weight", "bias"))
    assert _same_state(state, reference.state_dict())
    fresh = rzt.ReferenceAestheticMLP(rzt.EMBED_DIM)
    fresh.load_state_dict(state, strict=True)
    assert tuple(fresh.eval()(torch.zeros(2, rzt.EMBED_DIM)).shape) == (2, 1)
    assert not _same_state(rzt.reference_aesthetic_head(seed=12).state_dict(), state)


@pytest.mark.parametrize("name", ["head.pth", "head.safetensors"])
def test_aesthetic_head_file_loads_in_rewardzoo(tmp_path, name):
    torch = pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from rewardzoo.rewards.image.aesthetic import AestheticHead, load_aesthetic_head

    path = rzt.aesthetic_head_file(tmp_path / name, seed=11, input_size=512)
    reference = rzt.reference_aesthetic_head(seed=11, input_size=512)
    head = load_aesthetic_head(str(path))
    assert _same_state(head.state_dict(), reference.state_dict())
    x = torch.randn(3, 512)
    torch.testing.assert_close(head(x), reference(x).squeeze(-1))
    torch.manual_seed(11)  # the same layer order as rewardzoo's own head: the same weights for a seed
    assert _same_state(AestheticHead(512).state_dict(), reference.state_dict())


def test_aesthetic_head_file_refuses_an_unknown_suffix(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="head.bin"):
        rzt.aesthetic_head_file(tmp_path / "head.bin")


def test_dino_dirs_load_with_auto_model(tmp_path):
    pytest.importorskip("transformers")
    import torch
    from transformers import AutoModel

    dirs = rzt.tiny_dino_dirs(tmp_path / "dino", seed=0)
    assert sorted(dirs) == ["dinov2", "vit"] and all(isinstance(p, str) for p in dirs.values())
    from safetensors.torch import load_file

    assert not any(k.startswith("pooler") for k in load_file(os.path.join(dirs["vit"], "model.safetensors")))
    vit, dinov2 = AutoModel.from_pretrained(dirs["vit"]), AutoModel.from_pretrained(dirs["dinov2"])
    assert type(vit).__name__ == "ViTModel" and vit.config.initializer_range == 0.5
    assert type(dinov2).__name__ == "Dinov2Model" and dinov2.config.patch_size == 14
    with torch.no_grad():
        out = vit(pixel_values=torch.rand(1, 3, 224, 224)).last_hidden_state
    assert tuple(out.shape) == (1, 1 + (224 // 16) ** 2, 32)


def test_clap_dir_loads_with_transformers(tmp_path):
    pytest.importorskip("transformers")
    import numpy as np
    import torch
    from transformers import ClapModel, ClapProcessor

    path = rzt.tiny_clap_dir(tmp_path / "clap")
    model, processor = ClapModel.from_pretrained(path).eval(), ClapProcessor.from_pretrained(path)
    text = processor(text=["a dog"], return_tensors="pt", padding=True)
    audio = processor(audio=[np.zeros(48000, dtype=np.float32)], sampling_rate=48000, return_tensors="pt")
    with torch.no_grad():
        t = model.get_text_features(**text)
        a = model.get_audio_features(input_features=audio["input_features"])
    t, a = (x if isinstance(x, torch.Tensor) else x.pooler_output for x in (t, a))
    assert tuple(t.shape) == (1, 16) and tuple(a.shape) == (1, 16)


def test_text_models_load_with_auto_classes(tmp_path):
    pytest.importorskip("transformers")
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    paths = rzt.tiny_text_models(tmp_path / "text", seed=0)
    assert list(paths) == ["gpt2_policy", "gpt2_ref", "llama_policy", "llama_ref", "gpt2_cls", "gpt2_cls3"]
    lms = {k: AutoModelForCausalLM.from_pretrained(paths[k]) for k in ("gpt2_policy", "gpt2_ref", "llama_policy")}
    assert type(lms["llama_policy"]).__name__ == "LlamaForCausalLM"
    assert not _same_state(lms["gpt2_policy"].state_dict(), lms["gpt2_ref"].state_dict())
    cls3 = AutoModelForSequenceClassification.from_pretrained(paths["gpt2_cls3"])
    assert cls3.config.num_labels == 3
    tok = AutoTokenizer.from_pretrained(paths["gpt2_policy"])
    ids = tok("the cat sat")["input_ids"]
    assert ids == [rzt.VOCAB["<bos>"], rzt.VOCAB["the"], rzt.VOCAB["cat"], rzt.VOCAB["sat"]]
    assert rzt.word_tokenizer(bos=False)("the cat")["input_ids"] == [rzt.VOCAB["the"], rzt.VOCAB["cat"]]
    chat = tok.apply_chat_template([{"role": "user", "content": "why"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<user> why <assistant> "
    with torch.no_grad():
        logits = lms["gpt2_policy"](torch.tensor([ids])).logits
    assert tuple(logits.shape) == (1, 4, len(rzt.VOCAB))
    assert rzt.gpt2_config(n_layer=1).n_layer == 1 and rzt.llama_config().num_key_value_heads == 2
