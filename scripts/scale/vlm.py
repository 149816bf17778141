"""Vision-language flagships at their real size (cases for ``scripts/scale_check.py``; interface in ``common.py``).

- ``videoalign``: VideoReward's release layout (``model_config.json`` + ``checkpoint-11352/model.pth``, a PEFT
  model's full state dict in the older Qwen2-VL key names) over a Qwen2-VL-2B-Instruct base directory (config,
  tokenizer, processor and its own 2-shard safetensors, which only the reference loader reads), bfloat16.
- ``unified_reward_2``: a 3B-class Qwen2.5-VL judge (Qwen2.5-VL-3B-Instruct's architecture, as
  CodeGoat24/UnifiedReward-qwen-3b) in 2 safetensors shards + index, bfloat16.
- 7B judges (``meta.*``): too large for the 24 GB machine; :func:`meta_main` writes their published layout as
  sparse files (real headers, data as holes: no disk used) and compares ``rewardzoo plan``'s bytes with the
  parameter bytes of a meta-device build from the config (the loader's metadata path); nothing is loaded.

Tokenizers are real-sized stand-ins (:mod:`scale.qwen`); the weights are random.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scale.common import Case

VLM_IMPORTS = ("torch", "transformers", "safetensors.torch")
VIDEOALIGN_LORA = {"r": 64, "alpha": 128}
JUDGE_PROMPT = "a photograph of an astronaut riding a horse on the moon, highly detailed, golden hour"
VIDEO_PROMPT = "a red ball rolling across a sunny city street while cars pass by, cinematic, 4k"


# ------------------------------------------------------------------------------------------------ videoalign
def _videoalign_template() -> str:
    from rewardzoo.rewards.vlm.videoalign import TEMPLATES

    return TEMPLATES["detailed_special"]


def build_videoalign(folder: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText
    from transformers.initialization import no_init_weights

    from rewardzoo.testing.reward_models import VIDEOALIGN_TOKENS, older_qwen2_vl_peft_key, videoalign_model_config
    from scale.qwen import hf_config, qwen2_vl_2b, qwen_processor, qwen_tokenizer

    tokenizer = qwen_tokenizer((_videoalign_template(), VIDEO_PROMPT))
    processor = qwen_processor("qwen2_vl", tokenizer)
    config = hf_config(qwen2_vl_2b())
    base = folder / "Qwen2-VL-2B-Instruct"
    torch.manual_seed(0)
    with no_init_weights():
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16).eval()
    model.tie_weights()  # (skipped under no_init_weights): the 2B ties lm_head to the embeddings
    _randomize(model)
    model.save_pretrained(base, max_shard_size="4GB")  # Qwen/Qwen2-VL-2B-Instruct: 2 shards + index
    processor.save_pretrained(base)

    # VideoAlign's create_model_and_processor: the reward tokens, embeddings resized, a bias-free rm_head, PEFT LoRA
    tokenizer.add_special_tokens({"additional_special_tokens": list(VIDEOALIGN_TOKENS)})
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.rm_head = torch.nn.Linear(config.text_config.hidden_size, 1, bias=False, dtype=torch.bfloat16)
    excluded = ("lm_head", "rm_head", "embed_tokens", "visual")
    targets = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not any(x in n for x in excluded)
    ]
    lora_cfg = LoraConfig(
        r=VIDEOALIGN_LORA["r"], lora_alpha=VIDEOALIGN_LORA["alpha"], lora_dropout=0.0, target_modules=targets,
        init_lora_weights=False,
    )  # fmt: skip
    lora = get_peft_model(model, lora_cfg).eval()
    lora.to(torch.bfloat16)  # the release's model.pth holds bf16 tensors (trained with bf16=True)
    state = {older_qwen2_vl_peft_key(k): v for k, v in lora.state_dict().items()}
    release = folder / "VideoReward"
    (release / "checkpoint-11352").mkdir(parents=True)
    torch.save(state, release / "checkpoint-11352" / "model.pth")
    mc = videoalign_model_config(base, max_pixels=200704)
    mc["peft_lora_config"].update(lora_r=VIDEOALIGN_LORA["r"], lora_alpha=VIDEOALIGN_LORA["alpha"])
    mc["inference_config"] = {
        "VQ_mean": 3.6757, "VQ_std": 2.2476, "MQ_mean": 1.1646, "MQ_std": 1.3811, "TA_mean": 2.8105, "TA_std": 2.5121,
    }  # fmt: skip
    (release / "model_config.json").write_text(json.dumps(mc, indent=1))


def reference_videoalign(folder: Path) -> Any:
    """VideoAlign 1140ffd ``inference.py``'s loader, on transformers 5: the base model with ``from_pretrained``
    (bf16), the reward tokens and resized embeddings, ``rm_head``, ``get_peft_model``, then ``torch.load`` of
    ``model.pth`` and ``load_state_dict`` (the older key names mapped to transformers 5's)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, Qwen2VLForConditionalGeneration

    base = folder / "Qwen2-VL-2B-Instruct"
    model = Qwen2VLForConditionalGeneration.from_pretrained(base, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|VQ_reward|>", "<|MQ_reward|>", "<|TA_reward|>"]})
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.rm_head = torch.nn.Linear(model.config.text_config.hidden_size, 1, bias=False, dtype=torch.bfloat16)
    excluded = ("lm_head", "rm_head", "embed_tokens", "visual")
    targets = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not any(x in n for x in excluded)
    ]
    peft = get_peft_model(
        model, LoraConfig(r=VIDEOALIGN_LORA["r"], lora_alpha=VIDEOALIGN_LORA["alpha"], target_modules=targets)
    )
    state = torch.load(folder / "VideoReward" / "checkpoint-11352" / "model.pth", map_location="cpu", weights_only=True)
    newer = {
        "base_model.model.model.": "base_model.model.model.language_model.",
        "base_model.model.visual.": "base_model.model.model.visual.",
    }
    for old, new in newer.items():
        state = {(new + k[len(old) :] if k.startswith(old) else k): v for k, v in state.items()}
    peft.load_state_dict(state, strict=True)
    del state
    return peft.eval()


def videoalign_samples() -> list[dict[str, Any]]:
    from scale.video import video_file

    return [{"video": str(video_file()), "prompt": VIDEO_PROMPT}]


# ------------------------------------------------------------------------------------------------ the 3B judge
def build_qwen_judge(folder: Path, spec: Any, family: str) -> None:
    """A Qwen-VL ``...ForConditionalGeneration`` at the published size (bf16, random) with ``save_pretrained`` in
    2 shards + index (``max_shard_size`` 4 GB, as the 3B hub repositories) and its processor."""
    import torch
    from transformers import AutoModelForImageTextToText
    from transformers.initialization import no_init_weights

    from scale.qwen import hf_config, qwen_processor, qwen_tokenizer

    processor = qwen_processor(family, qwen_tokenizer((JUDGE_PROMPT,)))
    torch.manual_seed(0)
    with no_init_weights():
        model = AutoModelForImageTextToText.from_config(hf_config(spec), dtype=torch.bfloat16).eval()
    model.tie_weights()  # (skipped under no_init_weights): the 3B ties lm_head to the embeddings
    _randomize(model)
    model.save_pretrained(folder, max_shard_size="4GB")
    processor.save_pretrained(folder)


def _randomize(model: Any) -> None:
    """Random weights, fast: N(0, 0.02) for matrices and embeddings, ones for norm weights, zeros for biases (what
    ``_init_weights`` gives, without its per-module overhead). Tied tensors are filled once."""
    import torch

    seen: set[int] = set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.fill_(1.0)


def judge_samples() -> list[dict[str, Any]]:
    from scale.image import image_sample  # (the image family's 1024x1024 generated image and prompt)

    return [image_sample()]


def reference_judge(folder: Path) -> Any:
    import torch
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.bfloat16).eval()


CASES = [
    Case(
        name="videoalign",
        reward="videoalign",
        build=build_videoalign,
        entry=lambda folder: {"model_path": str(folder / "VideoReward"), "kwargs": {"source_fps": 30}},
        reference=reference_videoalign,
        samples=videoalign_samples,
        imports=(*VLM_IMPORTS, "peft"),
        dtype="bfloat16",
        layout="VideoReward release: model_config.json + checkpoint-11352/model.pth (torch.save of the PEFT model's "
        "state dict, LoRA r 64 / alpha 128 unmerged, bf16) over a Qwen2-VL-2B-Instruct base directory (2 safetensors "
        "shards + index, read by the reference loader only)",
        notes="Qwen2-VL-2B-Instruct's published config; real-sized stand-in tokenizer (151,665 + 3 tokens); sample: "
        "1280x720, 5 s, 30 fps H.264 clip (10 frames sampled at 2 fps, resized to <= 200,704 pixels)",
    ),
    Case(
        name="unified_reward_2",
        reward="unified_reward_2",
        build=lambda folder: build_qwen_judge(folder, _spec("qwen2_5_vl_3b"), "qwen2_5_vl"),
        entry=lambda folder: {
            "model_path": str(folder),
            "kwargs": {"max_new_tokens": 16, "on_failure": {"substitute": 0.5}},
        },
        reference=reference_judge,
        samples=judge_samples,
        imports=VLM_IMPORTS,
        dtype="bfloat16",
        layout="transformers save_pretrained: 2 safetensors shards + model.safetensors.index.json (as "
        "CodeGoat24/UnifiedReward-qwen-3b / Qwen/Qwen2.5-VL-3B-Instruct)",
        notes="Qwen2.5-VL-3B-Instruct's published config (3.75B parameters); random weights write no parseable "
        "judgement, so max_new_tokens 16 and on_failure substitute 0.5 (the forward = prefill of a 1024x1024 image + "
        "16 generated tokens)",
    ),
]


def _spec(name: str) -> Any:
    from scale import qwen

    return getattr(qwen, name)()


# ------------------------------------------------------------------------------------------------ 7B, meta only
#: name -> (reward, spec, family, model_type layout note)
META = {
    "meta.unified_reward_qwen_7b": ("unified_reward", "qwen2_5_vl_7b", "CodeGoat24/UnifiedReward-qwen-7b"),
    "meta.videoscore2": ("videoscore2", "qwen2_5_vl_7b", "TIGER-Lab/VideoScore2"),
    "meta.unified_reward_2_qwen2_5_vl_7b": (
        "unified_reward_2",
        "qwen2_5_vl_7b",
        "CodeGoat24/UnifiedReward-2.0-qwen-7b",
    ),
    "meta.unified_reward_qwen_72b": ("unified_reward", "qwen2_5_vl_72b", "CodeGoat24/UnifiedReward-qwen-72b"),
}


def hpsv3_meta_row(scratch: Path) -> dict[str, Any]:
    """HPSv3 (MizzenAI/HPSv3): ``HPSv3.safetensors``, one file holding the Qwen2-VL-7B reward model in the older key
    names (embeddings resized to the tokenizer + ``<|Reward|>``, ``lm_head``, ``rm_head`` ranknet 3584-1024-16-2),
    bf16, as a sparse file; the base directory (config, tokenizer, processor) beside it. Plan vs the meta build
    of what the reward constructs (``Qwen2VLModel`` without ``lm_head``, the head in float32)."""
    import datetime as dt
    import shutil

    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText

    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config
    from rewardzoo.rewards.models.vlm.reward_models import resize_vocabulary
    from rewardzoo.testing.reward_models import older_qwen2_vl_peft_key
    from scale.common import Measured
    from scale.qwen import hf_config, qwen_processor, qwen_tokenizer, sparse_safetensors

    folder = scratch / "meta.hpsv3"
    shutil.rmtree(folder, ignore_errors=True)
    base = folder / "Qwen2-VL-7B-Instruct"
    config = hf_config(_spec("qwen2_vl_7b"))
    config.save_pretrained(base)
    tokenizer = qwen_tokenizer()
    qwen_processor("qwen2_vl", tokenizer).save_pretrained(base)
    rows = len(tokenizer) + 1  # + <|Reward|>
    resize_vocabulary(config, rows)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    width = config.text_config.hidden_size
    head = {"rm_head.0.weight": [1024, width], "rm_head.0.bias": [1024], "rm_head.3.weight": [16, 1024],
            "rm_head.3.bias": [16], "rm_head.5.weight": [2, 16], "rm_head.5.bias": [2]}  # fmt: skip
    files = sparse_safetensors(
        model,
        folder,
        single="HPSv3.safetensors",
        rename=lambda k: older_qwen2_vl_peft_key("base_model.model." + k).removeprefix("base_model.model."),
        extra={k: ("torch.bfloat16", v) for k, v in head.items()},
    )
    del model
    entry = {"name": "meta_hpsv3", "reward_model": "hpsv3", "model_path": str(files[0]), "dtype": "bfloat16",
             "kwargs": {"base_model": str(base)}}  # fmt: skip
    with Measured() as mp:
        planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    with Measured() as mm:  # what the reward builds: the bare backbone (no lm_head) + the head in float32
        cfg = AutoConfig.from_pretrained(base)
        resize_vocabulary(cfg, rows)
        with torch.device("meta"):
            backbone = AutoModel.from_config(cfg, dtype=torch.bfloat16)
    built = sum(t.numel() * t.element_size() for t in backbone.state_dict().values())
    head_bytes = 4 * sum(int(torch.tensor(v).prod()) for v in head.values())
    apparent = files[0].stat().st_size
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "reward": "hpsv3",
        "family": "vlm",
        "dtype": "bfloat16",
        "layout": "HPSv3.safetensors: one sparse file (the layout of MizzenAI/HPSv3), older Qwen2-VL key names, bf16 "
        "+ a Qwen2-VL-7B-Instruct base directory (config, tokenizer, processor)",
        "notes": "7B+: plan and the meta-device build only, nothing loaded; the reward drops lm_head and holds its "
        "head in float32, which the plan (file headers at the entry dtype) does not know",
        "date": dt.date.today().isoformat(),
        "meta": {
            "parameters": sum(p.numel() for p in backbone.parameters()) + head_bytes // 4,
            "meta_build_bytes": built + head_bytes,
            "meta_build_s": mm.seconds,
            "plan_bytes": planned.weights,
            "plan_from": planned.how,
            "plan_s": mp.seconds,
            "files_apparent_bytes": apparent,
        },
        "checks": {"plan_equals_meta_build": planned.weights == built + head_bytes},
    }


def _plan_cli(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``rewardzoo plan CONFIG`` on the entry, as a user runs it: its exit status (1: does not fit this machine) and
    the line saying why."""
    import subprocess

    import yaml

    config = folder / "plan.yaml"
    config.write_text(yaml.safe_dump({"rewards": [entry]}))
    done = subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", "plan", str(config)], capture_output=True, text=True, timeout=300
    )
    why = [ln for ln in done.stderr.splitlines() if "does not fit" in ln]
    return {"plan_cli_exit": done.returncode, "plan_cli_refusal": why[0] if why else None}


def meta_row(name: str, scratch: Path) -> dict[str, Any]:
    """Sparse published layout + ``rewardzoo plan`` vs the parameter bytes of the meta-device build."""
    import datetime as dt
    import shutil
    import time

    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config
    from scale.common import Measured
    from scale.qwen import hf_config, qwen_processor, qwen_tokenizer, sparse_safetensors

    reward, spec_name, repo = META[name]
    family = "qwen2_5_vl" if spec_name.startswith("qwen2_5") else "qwen2_vl"
    folder = scratch / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    config = hf_config(_spec(spec_name))
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    config.save_pretrained(folder)
    qwen_processor(family, qwen_tokenizer()).save_pretrained(folder)
    shards = sparse_safetensors(model, folder, shard_bytes=4 * 10**9)
    del model
    disk = sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())
    apparent = sum(p.stat().st_size for p in shards)
    entry = {"name": name.replace(".", "_"), "reward_model": reward, "model_path": str(folder), "dtype": "bfloat16"}
    with Measured() as mp:
        planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    cli = _plan_cli(entry, folder)
    with Measured() as mm:  # the loader's metadata path: config -> model on the meta device (no data read)
        cfg = AutoConfig.from_pretrained(folder)
        with torch.device("meta"):
            meta = AutoModelForImageTextToText.from_config(cfg, dtype=torch.bfloat16)
    tied = {n for n, _ in meta.named_parameters(remove_duplicate=False)} - {n for n, _ in meta.named_parameters()}
    params = sum(t.numel() * t.element_size() for n, t in meta.state_dict().items() if n not in tied)
    nparams = sum(p.numel() for p in meta.parameters())
    t0 = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "reward": reward,
        "family": "vlm",
        "dtype": "bfloat16",
        "layout": f"{len(shards)} sparse safetensors shards + index (the layout of {repo}); headers real, data holes",
        "notes": "7B+: too large for the 24 GB machine; plan and the meta-device build only, nothing loaded",
        "date": dt.date.today().isoformat(),
        "meta": {
            "parameters": nparams,
            "meta_build_bytes": params,
            "meta_build_s": mm.seconds,
            "meta_build_peak_bytes": mm.peak,
            "plan_bytes": planned.weights,
            "plan_from": planned.how,
            "plan_s": mp.seconds,
            "plan_peak_bytes": mp.peak,
            "files_apparent_bytes": apparent,
            "files_disk_bytes": disk,
            "cleanup_s": time.perf_counter() - t0,
            **cli,
        },
        "checks": {"plan_equals_meta_build": planned.weights == params},
    }


def meta_main(argv: list[str]) -> int:
    """``python scripts/scale/vlm.py --meta [NAME ...]``: the 7B rows, merged into scale.json."""
    from scale.common import SCRATCH, write_rows

    names = argv or [*META, "meta.hpsv3"]
    rows = {}
    for name in names:
        rows[name] = hpsv3_meta_row(SCRATCH) if name == "meta.hpsv3" else meta_row(name, SCRATCH)
        print(json.dumps({name: rows[name]["meta"] | rows[name]["checks"]}), flush=True)
    write_rows(rows, command="python scripts/scale/vlm.py --meta")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if sys.argv[1:2] == ["--meta"]:
        sys.exit(meta_main(sys.argv[2:]))
    print(__doc__)
