"""The judges' long reference prompts live in data files beside them (``rewards/vlm/*_prompts.txt``), verbatim.

Each text's SHA-256 was taken from the Python constants these files replaced (``rewards/vlm/prompts.py``, whose
strings the judges' tests compared with the references), so an edit that trims a trailing space or a blank line
fails here. They are read from the installed package, so a wheel that does not ship them fails too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import rewardzoo
from rewardzoo.shared.files import text_blocks

VLM = Path(rewardzoo.__file__).parent / "rewards" / "vlm"
DIGESTS = {
    "unified_reward_think_prompts.txt": {
        "UNIFIED_REWARD_THINK_IMAGE": "a8a0d80818246406b783d5cca630336c5fdf1264fef13f09d09bd94d61a139d5",
        "UNIFIED_REWARD_THINK_VIDEO": "e40c6e7f767f2cca279d599365ee4066a7f49dd3dc55328d36d01bbc0a8ec3ab",
        "UNIFIED_REWARD_THINK_IMAGE_QWEN_7B": "342f6a4bd0efdae0ca754259d78404e534aae5f1c5527dd47f6062028305e3ff",
        "UNIFIED_REWARD_THINK_VIDEO_QWEN_7B": "f45197425b810d08e0067579cfd59e105a1f9bf8e5850ba879c638080cadc61e",
    },
    "unified_reward_edit_prompts.txt": {
        "UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING": "b9c27cd063664e5f363a5039623cf27a0358e7900dcd8b4cfdb48569d843fc7c",
        "UNIFIED_REWARD_EDIT_QUALITY": "ddb40baa511dbf2fd619474e5a0fcd043c6325f976bfc8fd1f8b9fbf4c521113",
        "UNIFIED_REWARD_EDIT_PAIRWISE_RANK": "7677b54f3278313c800b46dd9da490fcc57aeb0abbca5125ac34ac4af89554c1",
        "UNIFIED_REWARD_EDIT_PAIRWISE_SCORE": "e66351b54aa2c74cdeaaacf1141dd0ff4eb6d069a4ee49659406334e28b3c90b",
    },
    "rational_rewards_prompts.txt": {
        "RATIONAL_REWARDS_T2I_SYSTEM": "2fa66ca8679e6eedc5c9c8832c89b6953f64f74da34e921ddbf9f9e37faa965b",
        "RATIONAL_REWARDS_EDIT_SYSTEM": "5463ca34f3c70f45b5cb1624a66c48f5bc0ab70bead56086960a87a45cda6e5e",
        "RATIONAL_REWARDS_T2I": "aebcd861fcbd33236f80f9bd34940b3ead8c3fb1d946239e1254541cd6024ea6",
        "RATIONAL_REWARDS_EDIT": "a53168df272c95769321478e8ddbd3cf1f794b6f8cfd85b8138c201995c82e5a",
    },
}


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_each_reference_prompt_is_the_text_it_was(name):
    blocks = text_blocks(VLM / name)
    assert list(blocks) == list(DIGESTS[name])
    got = {key: hashlib.sha256(text.encode("utf-8")).hexdigest() for key, text in blocks.items()}
    assert got == DIGESTS[name]


def test_every_prompt_file_is_pinned():
    assert {p.name for p in VLM.glob("*_prompts.txt")} == set(DIGESTS)


def test_text_blocks_keep_every_character(tmp_path):
    texts = {"A": "line one  \n\n  indented\n", "B": "ends with spaces   ", "C": "", "D": "x\n\n"}
    body = "".join(f"@@ {k}\n{v}\n" for k, v in texts.items())
    path = tmp_path / "t.txt"
    path.write_text("# a comment before the first block\n\n" + body, encoding="utf-8")
    assert text_blocks(path) == texts
    path.write_text(body + "@@ A\nagain\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'A' appears twice"):
        text_blocks(path)
    path.write_text(body.rstrip("\n"), encoding="utf-8")
    with pytest.raises(ValueError, match="ends with a newline"):
        text_blocks(path)
