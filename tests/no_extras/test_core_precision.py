"""``dtype: auto`` is the precision each reward's reference runs in (issue 40, item 7).

The audit is each card's ``dtype_source``: where the reference sets its precision, naming that precision (the first
of ``bfloat16`` / ``bf16``, ``float16`` / ``fp16``, ``float32`` / ``fp32`` in the line is what it runs on CUDA). The
table the tests check is read from those lines, every card that loads weights included (so a new reward cannot skip
the audit, and needs no row here); the loader's resolution, which reads the card's separate ``default_dtype``, must
give that precision on CUDA and float32 on the CPU.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from rewardzoo.core.loader import dtype_for
from rewardzoo.errors import RegistryError
from rewardzoo.registry import builtin, info_from_card, lookup, read_card
from rewardzoo.spec.config import RewardSpec

#: The words a ``dtype_source`` names a precision with.
PRECISION_WORDS = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}
_WORD = re.compile(r"(?<![\w])(" + "|".join(PRECISION_WORDS) + r")(?![\w])")


def stated_precision(dtype_source: str | None) -> str | None:
    """The precision a ``dtype_source`` line names first (what the reference runs on CUDA), None if it names none."""
    m = _WORD.search(dtype_source or "")
    return PRECISION_WORDS[m.group(1)] if m else None


#: reward -> (dtype on CUDA, where the reference sets it), for every shipped card that loads weights.
REFERENCE_PRECISION = {
    name: (stated_precision(info.dtype_source), info.dtype_source)
    for name, info in builtin().items()
    if info.download or info.dtype_source
}


def test_every_card_that_loads_weights_names_its_references_precision():
    unnamed = sorted(name for name, (dtype, _) in REFERENCE_PRECISION.items() if dtype is None)
    assert not unnamed, f"dtype_source names no precision (bfloat16, float16, float32, ...): {unnamed}"
    assert len(REFERENCE_PRECISION) >= 50  # the audit covers every weight-loading card, not a handful


def test_the_stated_precision_is_the_first_one_named():
    assert stated_precision("whisper decoding.py 114: fp16=True by default, float32 on the CPU") == "float16"
    assert stated_precision("HPSv2 img_score.py: precision='amp' (float32 weights, fp16 autocast)") == "float32"
    assert stated_precision("vllm serve without --dtype: auto, the checkpoint's bfloat16") == "bfloat16"
    assert stated_precision("from_pretrained, no dtype") is None
    assert stated_precision("bfloat16x float16") == "float16"  # whole words only


def test_a_wrong_precision_in_a_card_fails_the_check():
    """A ``default_dtype`` that disagrees with the audited line resolves to something else, which the check sees."""
    card = lookup("vqascore")
    want, _ = REFERENCE_PRECISION["vqascore"]
    assert want == "bfloat16"
    spec = RewardSpec(name="vqascore", reward_model="vqascore")
    wrong = replace(card, default_dtype={"cuda": "float16"})
    assert dtype_for(spec, "cuda:0", wrong) != want
    dropped = replace(card, default_dtype=None)
    assert dtype_for(spec, "cuda:0", dropped) != want


@pytest.mark.parametrize("name", sorted(REFERENCE_PRECISION))
def test_dtype_auto_resolves_to_the_references_precision(name):
    want, _source = REFERENCE_PRECISION[name]
    spec = RewardSpec(name=name, reward_model=name)
    assert spec.dtype == "auto"
    card = lookup(spec.reward_model)
    assert dtype_for(spec, "cuda:0", card) == want
    assert dtype_for(spec, "cpu", card) == "float32"
    assert dtype_for(RewardSpec(name=name, reward_model=name, dtype="float32"), "cuda:0", card) == "float32"
    assert card.dtype_source, f"{name}'s card does not say where its reference sets the precision"


def test_a_card_that_downloads_weights_must_state_its_dtype_source(tmp_path):
    meta, _ = read_card("pickscore")
    assert meta["download"] is True and "dtype_source" in meta
    without = {k: v for k, v in meta.items() if k != "dtype_source"}
    with pytest.raises(RegistryError, match="'dtype_source' is missing") as exc:
        info_from_card(without, tmp_path / "card.md")
    assert "card.md" in str(exc.value)
    # a third-party card may leave it out; a model-free card needs none
    assert info_from_card(without, tmp_path / "card.md", source="plugin zoo").dtype_source is None
    free, _ = read_card("jpeg_compressibility")
    assert free["download"] is False and info_from_card(free, tmp_path / "card.md").dtype_source is None
    for bad in ("", "  ", "two\nlines", 3):
        with pytest.raises(RegistryError, match="dtype_source"):
            info_from_card({**meta, "dtype_source": bad}, tmp_path / "card.md")
    line = "repo@abc file.py 1-2: loads in float32"
    assert info_from_card({**meta, "dtype_source": f" {line} "}, tmp_path / "card.md").dtype_source == line


@pytest.mark.parametrize("name", sorted(REFERENCE_PRECISION))
def test_the_card_shows_its_precision_and_its_source(name):
    _meta, body = read_card(name)
    section = body.split("\n## Precision\n", 1)[1].split("\n## ", 1)[0]
    want, _source = REFERENCE_PRECISION[name]
    lower = f"resolves to {want} on CUDA and float32" if want != "float32" else "resolves to float32 on every device"
    assert lower in section and lookup(name).dtype_source in section


@pytest.mark.parametrize(
    "name, metric, cuda",
    [
        ("image_quality", "qalign", "float16"),  # pyiqa's qalign_arch runs Q-Align in float16
        ("image_quality", "deqa", "float16"),
        ("image_quality", "topiq_nr", "float32"),  # pyiqa's inference_model: no dtype
        ("video_quality", "qalign_aesthetic", "float16"),
        ("video_quality", "musiq", "float32"),
    ],
)
def test_a_variant_from_another_reference_resolves_to_that_references_precision(name, metric, cuda):
    card = lookup(name)
    spec = RewardSpec(name=name, reward_model=name, kwargs={"metric": metric})
    assert dtype_for(spec, "cuda:0", card) == cuda
    assert dtype_for(spec, "cpu", card) == "float32"
    assert (
        dtype_for(RewardSpec(name=name, reward_model=name, kwargs={"metric": metric}, dtype="bfloat16"), "cuda", card)
        == "bfloat16"
    )


def test_a_bad_default_dtype_when_is_refused(tmp_path):
    meta, _ = read_card("image_quality")
    for bad in ({"metric": ["qalign"]}, {"metric": {"qalign": {"tpu": "float16"}}}, {"metric": {"qalign": "half"}}):
        with pytest.raises(RegistryError, match="default_dtype"):
            info_from_card({**meta, "default_dtype_when": bad}, tmp_path / "card.md")
