"""image_quality's Q-Align / DeQA-Score rows against pyiqa's own ``QAlign`` on the same tiny mPLUG-Owl2.

pyiqa 0.1.16's Q-Align code needs transformers < 5.17 and ``icecream``, so both sides run in a worker of that
environment (built once per run from PyPI with ``system_site_packages`` for torch and pyiqa;
``REWARDZOO_TEST_ENVS=DIR`` keeps it across runs). The tiny network (``rewardzoo.testing.qalign``) is written by
that environment's Python, which then checks that building rewardzoo's scorer leaves transformers' Llama classes
as they were. The reference (:mod:`tests.image.qalign_reference`) is pyiqa's ``QAlign`` forward (its fp16
preprocessing and ``model.score``) one image at a time, and for ``video_quality`` its network's video path
(``model.score(videos, input_="video")``) one video at a time on the same frames. Every entry runs in one worker.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyiqa")

from PIL import Image

import rewardzoo
from rewardzoo import load_reward
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.environments.venvs import interpreter
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.image.iqa_qalign import REQUIREMENTS
from tests.environments.conftest import REPO, needs_linux, no_leftover_workers  # noqa: F401  (fixture)

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]

SIZES = [(28, 28), (40, 24), (24, 52), (64, 64)]  # (H, W): square, wide and tall (padded to a square)
#: Frames of the test videos: with NUM_FRAMES = 4 they bring 4, 4, 3 and 2 frames (videos of one count share a
#: forward); at FPS = 2 one frame a second keeps 3, 2, 1 and 1.
VIDEO_FRAMES, NUM_FRAMES, FPS = (7, 5, 3, 2), 4, 2
#: The check run in the environment after the tiny directory is written: rewardzoo's scorer built, then a
#: transformers Llama built and run, its logits compared with one built before (same seed).
ISOLATION = """
import json, sys, torch, transformers
from transformers.models.llama import modeling_llama
from rewardzoo.rewards.image.iqa_qalign import QAlignScorer
from rewardzoo.testing.text import llama_config
def llama():
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config()).eval()
    with torch.no_grad():
        return model(torch.arange(6)[None]).logits
before, classes = llama(), dict(vars(modeling_llama))
QAlignScorer(sys.argv[1], "quality", "cpu", torch.float32, "image_quality")
after = llama()
print(json.dumps({"same_module": dict(vars(modeling_llama)) == classes, "same_logits": bool(torch.equal(before, after))}))
"""


@pytest.fixture(autouse=True)
def _checkout_on_the_worker_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """(environment spec, its Python): transformers < 5.17 and icecream over this environment's packages."""
    keep = os.environ.get("REWARDZOO_TEST_ENVS")
    root = (
        Path(keep) / "qalign-envs" if keep else tmp_path_factory.getbasetemp() / "qalign-envs"
    )  # own folder: the clash test lists worker-envs
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REWARDZOO_ENVS", str(root))
        env = {"requirements": list(REQUIREMENTS), "system_site_packages": True, "start_timeout_s": 120}
        spec = load_config({"rewards": [{"name": "x", "environment": env}]}).rewards[0].environment
        python = interpreter(spec)
        yield env, python


@pytest.fixture(scope="module")
def tiny(environment, tmp_path_factory):
    """(the tiny one-align directory, the isolation check's answer), both from the environment's Python."""
    _, python = environment
    path = tmp_path_factory.mktemp("qalign") / "tiny-one-align"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    script = (
        f"from rewardzoo.testing.qalign import tiny_qalign_dir; tiny_qalign_dir({str(path)!r}, seed=0)\n{ISOLATION}"
    )
    done = subprocess.run([str(python), "-c", script, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return str(path), json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def scored(environment, tiny):
    """Every entry's scores of the same images and videos, and the errors of videos with too few frames (under
    ``errors``: frame count -> the InputError), all in one worker of the environment (the tests close workers
    after each test, so every call is made here)."""
    env, _ = environment
    path, _ = tiny

    def entry(name, reward_model="image_quality", dtype="float16", batch_size=16, **kwargs):
        return {
            "name": name,
            "reward_model": reward_model,
            "model_path": path,
            "device": "cpu",
            "dtype": dtype,
            "batch_size": batch_size,
            "kwargs": kwargs,
            "environment": env,
        }

    reference = "tests.image.qalign_reference:PyiqaQAlign"
    video_reference = "tests.image.qalign_reference:PyiqaQAlignVideo"
    entries = [
        entry("qalign", metric="qalign"),
        entry("qalign_fp32", dtype="float32", metric="qalign"),
        entry("qalign_fp32_one", dtype="float32", batch_size=1, metric="qalign"),
        entry("aesthetic", metric="qalign_aesthetic"),
        entry("deqa", metric="deqa"),
        entry("pyiqa", reward_model=reference, task="quality"),
        entry("pyiqa_aesthetic", reward_model=reference, task="aesthetic"),
        entry("video", "video_quality", metric="qalign", num_frames=NUM_FRAMES),
        entry("video_fp32", "video_quality", dtype="float32", metric="qalign", num_frames=NUM_FRAMES),
        entry("video_fp32_one", "video_quality", "float32", 1, metric="qalign", num_frames=NUM_FRAMES),
        entry("video_aesthetic", "video_quality", metric="qalign_aesthetic", num_frames=NUM_FRAMES),
        entry("video_fps", "video_quality", metric="qalign", fps=FPS),
        entry("video_own_rate", "video_quality", metric="qalign"),  # the default: one a second at video_fps
        entry("video_deqa", "video_quality", metric="deqa", num_frames=NUM_FRAMES),
        entry("pyiqa_video", video_reference, num_frames=NUM_FRAMES),
        entry("pyiqa_video_aesthetic", video_reference, task="aesthetic", num_frames=NUM_FRAMES),
        entry("pyiqa_video_fps", video_reference, fps=FPS),
        entry("pyiqa_frames", video_reference, mode="frames", num_frames=NUM_FRAMES),
    ]
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in SIZES]
    videos = [rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8) for t, (h, w) in zip(VIDEO_FRAMES, SIZES)]
    errors = {}
    with RewardProcessor(load_config({"rewards": entries}).rewards) as processor:
        result = processor([rewardzoo.Sample(image=img, video=v, video_fps=FPS) for img, v in zip(images, videos)])
        for frames in (0, 1):  # the third sample's video: no frames, then less than a second at FPS
            short = [*videos[:2], np.zeros((frames, 28, 28, 3), np.uint8)]
            with pytest.raises(InputError) as info:
                processor([rewardzoo.Sample(image=img, video=v, video_fps=FPS) for img, v in zip(images, short)])
            errors[frames] = info.value
        with pytest.raises(InputError) as info:  # arrays that state no frame rate
            processor([rewardzoo.Sample(image=img, video=v) for img, v in zip(images, videos)])
        errors["no_rate"] = info.value
    return {name: np.asarray(v, dtype=np.float64) for name, v in result.rewards.items()} | {"errors": errors}


def test_qalign_matches_pyiqa(scored):
    """Ours against pyiqa's QAlign, quality and aesthetics. pyiqa runs in fp16 to the end (softmax and the level
    sum too: one fp16 step is 0.0039 in [4, 8)), hence 5e-3; the scores spread over 0.1 and more."""
    want = scored["pyiqa"]
    assert np.ptp(want) > 0.1 and np.all((want > 1) & (want < 5))
    np.testing.assert_allclose(scored["qalign"], want, atol=5e-3, rtol=0)
    np.testing.assert_allclose(scored["qalign_fp32"], want, atol=5e-3, rtol=0)
    np.testing.assert_allclose(scored["aesthetic"], scored["pyiqa_aesthetic"], atol=5e-3, rtol=0)
    assert np.abs(scored["aesthetic"] - scored["qalign"]).max() > 0.01  # the question changes the answer


def test_deqa_is_the_quality_question(scored):
    """DeQA-Score's Scorer asks Q-Align's quality question with the same expected level: same network, same score."""
    np.testing.assert_allclose(scored["deqa"], scored["qalign"], atol=1e-12, rtol=0)


def test_batched_equals_one_at_a_time(scored):
    np.testing.assert_allclose(scored["qalign_fp32"], scored["qalign_fp32_one"], atol=1e-6, rtol=0)


def test_building_it_leaves_transformers_llama_as_found(tiny):
    _, check = tiny
    assert check == {"same_module": True, "same_logits": True}


def test_refused_in_process_where_transformers_dropped_its_helpers():
    from transformers import PreTrainedModel

    if hasattr(PreTrainedModel, "invert_attention_mask"):
        pytest.skip("this transformers still runs pyiqa's Q-Align in process")
    with pytest.raises(ConfigError, match=r"invert_attention_mask.*environment: \{requirements: \['transformers"):
        load_reward({"name": "image_quality", "model_path": "unused", "kwargs": {"metric": "qalign"}})


def test_options_qalign_does_not_take():
    with pytest.raises(ConfigError, match="kwargs.arch is not used by 'qalign'"):
        load_reward({"name": "image_quality", "kwargs": {"metric": "qalign", "arch": {"dtype": "8bit"}}})
    with pytest.raises(ConfigError, match="not built by rewardzoo: bitsandbytes"):
        load_reward({"name": "image_quality", "kwargs": {"metric": "qalign_8bit"}})


def test_video_qalign_matches_pyiqa_video_path(scored):
    """video_quality's Q-Align rows against pyiqa's ``score(..., input_="video")`` on the same sampled frames."""
    want = scored["pyiqa_video"]
    assert np.ptp(want) > 0.05 and np.all((want > 1) & (want < 5))
    np.testing.assert_allclose(scored["video"], want, atol=5e-3, rtol=0)
    np.testing.assert_allclose(scored["video_fp32"], want, atol=5e-3, rtol=0)
    np.testing.assert_allclose(scored["video_aesthetic"], scored["pyiqa_video_aesthetic"], atol=5e-3, rtol=0)
    # one question about all frames, not the mean of per-frame answers
    assert np.abs(scored["video"] - scored["pyiqa_frames"]).max() > 0.01


def test_video_qalign_one_frame_a_second(scored):
    """``fps``: the frames Q-Align's load_video keeps (int(fps * i), i < int(T / fps)) against the reference's."""
    np.testing.assert_allclose(scored["video_fps"], scored["pyiqa_video_fps"], atol=5e-3, rtol=0)
    assert np.abs(scored["video_fps"] - scored["video"]).max() > 0.01


def test_video_qalign_defaults_to_one_frame_a_second_at_each_videos_rate(scored):
    """No ``fps`` and no ``num_frames``: Q-Align's own video scorer, one frame a second at the video's rate (the
    samples' ``video_fps``), against the reference's load_video at that rate; a video that states no rate is an
    InputError naming the sample and video_fps."""
    np.testing.assert_allclose(scored["video_own_rate"], scored["pyiqa_video_fps"], atol=5e-3, rtol=0)
    missing = scored["errors"]["no_rate"]
    assert (missing.reward, missing.field, missing.sample) == ("video_own_rate", "video_fps", 0)
    assert "one frame a second" in str(missing)


def test_video_batched_equals_one_at_a_time(scored):
    """Videos of one frame count share a forward, other counts run apart: the same as one video per call."""
    np.testing.assert_allclose(scored["video_fp32"], scored["video_fp32_one"], atol=1e-6, rtol=0)


def test_video_deqa_averages_frames(scored):
    """DeQA-Score has no video scorer: its video score is the mean of its image score over the frames."""
    np.testing.assert_allclose(scored["video_deqa"], scored["pyiqa_frames"], atol=5e-3, rtol=0)


def test_video_without_enough_frames(scored):
    """A video with no frames, and one shorter than a second at ``fps``: InputError naming the field and sample
    (and the reward that needs the second)."""
    empty, short = scored["errors"][0], scored["errors"][1]
    assert (empty.field, empty.sample) == ("video", 2) and "no frames" in str(empty)
    assert empty.reward.startswith(("video", "pyiqa_video", "pyiqa_frames"))
    assert (short.reward, short.field, short.sample) == ("video_fps", "video", 2)
    assert "1 frames at fps 2 is less than one second" in str(short)


def test_video_options():
    with pytest.raises(ConfigError, match="fps samples one frame a second"):
        load_reward({"name": "video_quality", "kwargs": {"metric": "qalign", "fps": 24, "num_frames": 16}})
    with pytest.raises(ConfigError, match=r"kwargs.fps.*must be null or a number > 0, got 0"):
        load_reward({"name": "video_quality", "kwargs": {"metric": "qalign", "fps": 0}})
