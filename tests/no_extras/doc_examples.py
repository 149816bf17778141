"""The ```python blocks of README.md and docs/**/*.md, and what each needs to run (its page's setup).

Every block runs, as the page shows it, in a fresh namespace inside a temporary working directory; the setup
of its page writes the files it reads (``rewards.yaml``, ``a.png``, tiny model folders) and gives the names the
prose around the block defines (a processor shown just above, tensors the trainer would pass). A block that
cannot run here is marked by ``<!-- example: not run (needs ...) -->`` on the line above it, and its page says
so. A ``test_*`` function a block defines is called too (with ``tmp_path``), as pytest would.

This module imports only the core; a setup imports what its block needs when it runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "rewardzoo" / "configs" / "demo.yaml"
NOT_RUN = re.compile(r"^<!-- example: not run \(needs [^)]+\) -->$")


@dataclass(frozen=True)
class Block:
    """One ```python block: its page (relative to the root), its index on the page, line, code and marker."""

    page: str
    index: int
    line: int
    code: str
    not_run: str | None

    @property
    def key(self) -> str:
        return f"{self.page}#{self.index}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> Iterator[Block]:
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        index, i = 0, 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                j = i + 1
                while lines[j].strip() != "```":
                    j += 1
                above = next((s.strip() for s in reversed(lines[:start]) if s.strip()), "")
                marker = above if above.startswith("<!-- example:") else None
                code = "\n".join(lines[start + 1 : j]) + "\n"
                yield Block(str(path.relative_to(ROOT)), index, start + 1, code, marker)
                index += 1
                i = j
            i += 1


# ---- fixtures the setups share -------------------------------------------------------------------------------


def _yaml(path: Path, config: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def _demo_entries(*names: str) -> list[dict]:
    """The demo config's entries of these rewards (so a page's ``rewards.yaml`` is the demo's, cut down)."""
    import yaml

    entries = yaml.safe_load(DEMO.read_text(encoding="utf-8"))["rewards"]
    return [e for e in entries if e["name"] in names]


def _image(path: Path, seed: int = 0) -> Path:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def _page_yaml(page: str, index: int) -> dict:
    """The ``index``-th ```yaml block of a page, parsed (the config a page shows above its Python block)."""
    import yaml

    text = (ROOT / page).read_text(encoding="utf-8")
    found = re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.S | re.M)
    return yaml.safe_load(found[index])


def _tiny_clip(tmp: Path) -> tuple[str, str]:
    from rewardzoo.testing import aesthetic_head_file, tiny_open_clip_dir

    return str(tiny_open_clip_dir(tmp / "clip")), str(aesthetic_head_file(tmp / "head.safetensors"))


def _core_images_yaml(tmp: Path) -> None:
    _yaml(tmp / "rewards.yaml", {"rewards": _demo_entries("jpeg_compressibility", "group_rank")})


def _image_samples(n: int = 4) -> list:
    import numpy as np

    from rewardzoo import Sample

    rng = np.random.default_rng(1)
    return [
        Sample(
            image=rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), prompt=f"p{i % 2}", dataset="image", group_id=i % 2
        )
        for i in range(n)
    ]


# ---- the setup of each block ---------------------------------------------------------------------------------


def _readme(tmp: Path) -> dict[str, Any]:
    clip, head = _tiny_clip(tmp)
    config = _page_yaml("README.md", 0)  # the YAML shown above the block, with tiny weights in place of the hub's
    config["rewards"][0].update(model_path=head, kwargs={"clip_model": clip})
    config["eval_rewards"][0]["model_path"] = clip
    _yaml(tmp / "rewards.yaml", config)
    _image(tmp / "a.png")
    return {}


def _getting_started(tmp: Path) -> dict[str, Any]:
    _yaml(tmp / "rewards.yaml", {"rewards": _demo_entries("jpeg_compressibility", "group_rank", "loudness")})
    _image(tmp / "a.png")
    return {}


def _differentiable(tmp: Path) -> dict[str, Any]:
    import torch

    clip, _ = _tiny_clip(tmp)
    _yaml(tmp / "rewards.yaml", {"rewards": [{"name": "clip_score", "model_path": clip}]})
    pixels = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    return {"pixels": pixels, "prompts": ["a cat", "a dog"]}


def _reports(tmp: Path) -> dict[str, Any]:
    _yaml(tmp / "rewards.yaml", {"rewards": _demo_entries("jpeg_compressibility"), "monitor": {"window": 4}})
    return {}


def _scale(tmp: Path, *, started: bool) -> dict[str, Any]:
    import rewardzoo

    train, _ = rewardzoo.build_processors({"rewards": _demo_entries("jpeg_compressibility", "group_rank")})
    samples = _image_samples()
    names: dict[str, Any] = {"train": train, "generator": [samples[:2], samples[2:]], "all_samples": samples}
    names["start_update"] = lambda i, total: names.setdefault("updates", []).append((i, float(total)))
    if started:
        runner = train.incremental(timeout=600)
        for batch in names["generator"]:
            runner.add(batch)
        names["runner"] = runner
    return names


def _residency(tmp: Path) -> dict[str, Any]:
    import rewardzoo
    from rewardzoo import RewardProcessor

    clip, _ = _tiny_clip(tmp)
    config = rewardzoo.load_config({"rewards": [{"name": "clip_score", "model_path": clip, "offload": "cpu"}]})
    samples = _image_samples()
    return {
        "RewardProcessor": RewardProcessor,
        "config": config,
        "samples": samples,
        "batches": [samples[:2], samples[2:]],
    }


def _trainer_yaml(tmp: Path) -> dict[str, Any]:
    entries = [{"name": e["name"]} for e in _demo_entries("jpeg_compressibility", "jpeg_incompressibility")]
    _yaml(tmp / "rewards.yaml", {"rewards": entries})  # every dataset: DanceGRPO's samples name none
    return {}


def _ddpo(tmp: Path) -> dict[str, Any]:
    import torch

    names = _trainer_yaml(tmp)
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))  # the pipeline's images in [0, 1]
    names.update(images=images, prompts=["a cat", "a dog"], prompt_metadata=[{"dataset": "image"}] * 2)
    return names


def _flow_grpo(tmp: Path) -> dict[str, Any]:
    from PIL import Image

    names = _ddpo(tmp)
    names["metadata"] = names["prompt_metadata"]
    names["pil_images"] = [Image.open(_image(tmp / f"{i}.png", i)) for i in range(2)]
    names["captions"] = names["prompts"]
    return names


def _trl(tmp: Path) -> dict[str, Any]:
    import datasets
    from transformers import AutoModelForCausalLM

    from rewardzoo.testing import tiny_text_models, word_tokenizer

    models = tiny_text_models(tmp / "models")
    entry = {"name": "rm", "reward_model": "sequence_reward", "model_path": str(models["gpt2_cls"]), "device": "cpu"}
    _yaml(tmp / "rewards.yaml", {"rewards": [entry]})
    tokenizer = word_tokenizer()
    tokenizer.padding_side = "left"
    settings = dict(
        output_dir=str(tmp / "grpo"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        disable_tqdm=True,
    )
    return {
        "tokenizer": tokenizer,
        "model": AutoModelForCausalLM.from_pretrained(models["gpt2_policy"]),
        "dataset": datasets.Dataset.from_dict({"prompt": ["the cat sat", "a dog ran", "the mat", "one two"]}),
        "settings": settings,
    }


def _palm(tmp: Path) -> dict[str, Any]:
    import torch

    palm_style_ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, -1, -1]])  # the second row padded with -1
    return {"palm_style_ids": palm_style_ids, "plens": torch.tensor([2, 2])}


def _testing(tmp: Path) -> dict[str, Any]:
    return {"tmp_path": tmp}


@dataclass(frozen=True)
class Setup:
    """What a block needs: the modules beyond the core install, and a function that prepares its directory."""

    needs: tuple[str, ...]
    prepare: Callable[[Path], dict[str, Any]]
    check: Callable[[dict[str, Any]], None] = lambda namespace: None


def _finite(*values: Any) -> None:
    import numpy as np

    for value in values:
        array = np.asarray(value.detach() if hasattr(value, "detach") else value, dtype=np.float64)
        assert array.size and np.isfinite(array).all(), array


def _check_getting_started(ns: dict[str, Any]) -> None:
    import numpy as np

    rewards = ns["result"].rewards
    _finite(rewards["jpeg_compressibility"][:2], rewards["loudness"][2:])
    assert np.isnan(rewards["loudness"][:2]).all() and np.isnan(rewards["jpeg_compressibility"][2:]).all()


def _check_reports(ns: dict[str, Any]) -> None:
    assert len(ns["funcs"]) == 1 and ns["weights"] == [1.0] and ns["monitor"] is not None


def _check_scale(ns: dict[str, Any]) -> None:
    import numpy as np

    whole = ns["train"](ns["all_samples"])
    np.testing.assert_array_equal(ns["result"].total, whole.total)  # "identical to train(all_samples)"
    if "updates" in ns:
        assert sorted(i for i, _ in ns["updates"]) == list(range(len(ns["all_samples"])))
        np.testing.assert_allclose([t for _, t in sorted(ns["updates"])], whole.total)


TORCH_CLIP = ("torch", "open_clip")
SETUPS: dict[str, Setup] = {
    "README.md#0": Setup(
        TORCH_CLIP, _readme, lambda ns: _finite(ns["result"].rewards["aesthetic"], ns["result"].total)
    ),
    "docs/getting-started.md#0": Setup(("scipy",), _getting_started, _check_getting_started),
    "docs/guides/differentiable.md#0": Setup(
        TORCH_CLIP, _differentiable, lambda ns: (_finite(ns["total"], ns["rewards"]), ns["rewards"].sum().backward())
    ),
    "docs/guides/reports.md#0": Setup((), _reports, _check_reports),
    "docs/guides/scale.md#0": Setup((), lambda tmp: _scale(tmp, started=False), _check_scale),
    "docs/guides/scale.md#1": Setup((), lambda tmp: _scale(tmp, started=True), _check_scale),
    "docs/residency.md#0": Setup(TORCH_CLIP, _residency, lambda ns: _finite(ns["result"].total)),
    "docs/testing.md#0": Setup(TORCH_CLIP, _testing, lambda ns: _finite(ns["scores"])),
    "docs/guides/writing-a-reward.md#0": Setup(
        (), lambda tmp: {}, lambda ns: _finite(ns["PromptBrevity"]()(prompt=["a cat"]))
    ),
    "docs/guides/writing-a-reward.md#1": Setup(TORCH_CLIP, lambda tmp: {}),
    "docs/guides/trainers/ddpo.md#0": Setup(("torch",), _ddpo, lambda ns: _finite(ns["rewards"])),
    "docs/guides/trainers/flow-grpo.md#0": Setup(
        ("torch",), _flow_grpo, lambda ns: _finite(ns["scores"]["avg"], ns["rewards"])
    ),
    "docs/rewards/sequence_reward.md#1": Setup(
        ("torch", "palm_rlhf_pytorch"), _palm, lambda ns: _finite(ns["rewards"])
    ),
    "docs/guides/trainers/trl.md#0": Setup(
        ("torch", "transformers", "trl", "datasets"), _trl, lambda ns: _finite(ns["trainer"].state.global_step)
    ),
}


def _reward_pages() -> dict[str, Setup]:
    """The Python example of each reward page (tests/docs/reward_examples.py: what it needs, the tiny models)."""
    from tests.docs.reward_examples import setups

    return setups(Setup)


SETUPS.update(_reward_pages())


def run(block: Block, tmp: Path) -> dict[str, Any]:
    """Run a block in ``tmp`` (its working directory) in a fresh namespace; returns the namespace."""
    here = Path.cwd()
    os.chdir(tmp)
    try:
        namespace: dict[str, Any] = {"__name__": "__doc_example__"}
        namespace.update(SETUPS[block.key].prepare(tmp))
        exec(compile(block.code, f"{block.page}:{block.line}", "exec"), namespace)
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value):
                (tmp / name).mkdir()
                value(tmp / name)
        SETUPS[block.key].check(namespace)
        return namespace
    finally:
        os.chdir(here)
