"""ocr / video_ocr with the real PP-OCRv4 weights of the rapidocr-onnxruntime wheel.

References: the engine's own end-to-end call ``RapidOCR(**settings)(image, use_cls=False)`` for the
recognised text (``settings``: PaddleOCR 2.x's detector defaults, written out below from PaddleOCR's
source; ``RapidOCR()`` with its own config.yaml for ``preset: rapidocr``), and flow_grpo's formula
written out here with the ``Levenshtein`` package (the one flow_grpo imports), applied to that text.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from PIL import Image

Levenshtein = pytest.importorskip("Levenshtein")
rapidocr = pytest.importorskip("rapidocr_onnxruntime")

from rewardzoo import load_reward
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.image.ocr import OCR, VideoOCR, recognised_text
from rewardzoo.rewards.image.text_match import capped_distance, levenshtein, match_score, quoted_target

from .media import render_text

#: (text, font size, background, ink, rotation in degrees)
CASES = [
    ("Hello World", 48, (255, 255, 255), (0, 0, 0), 0),
    ("OPEN 24 HOURS", 36, (20, 20, 40), (250, 250, 200), 4),
    ("rewardzoo", 64, (240, 230, 200), (10, 40, 90), -3),
    ("Fresh Coffee", 28, (0, 0, 0), (255, 255, 255), 2),
    ("Grand Opening", 56, (200, 30, 30), (255, 255, 255), -2),
    ("Sale 50%", 40, (250, 250, 250), (30, 30, 200), 3),
]


def flow_grpo_score(recognised: str, prompt: str, *, containment: bool = True) -> float:
    """flow_grpo's ocr.py on a recognised text (its image variant; ``containment=False``: its video variant)."""
    target = prompt.split('"')[1].replace(" ", "").lower()
    text = recognised.replace(" ", "").lower()
    dist = 0 if containment and target in text else Levenshtein.distance(text, target)
    return 1 - min(dist, len(target)) / len(target)


@pytest.fixture(scope="module")
def reward() -> OCR:
    return load_reward({"name": "ocr", "device": "cpu"})


#: PaddleOCR 2.x's DB detector defaults in RapidOCR's keyword names. Source: PaddlePaddle/PaddleOCR
#: tools/infer/utility.py init_args at commit 134058f29161fe4640f77ea6402f6f78518d0c8d (identical in the
#: paddleocr 2.9.1 wheel that flow_grpo's README pins): det_limit_side_len 960, det_limit_type "max",
#: det_db_thresh 0.3, det_db_box_thresh 0.6, det_db_unclip_ratio 1.5, use_dilation False,
#: det_db_score_mode "fast"; tools/infer/predict_det.py: NormalizeImage mean [0.485, 0.456, 0.406],
#: std [0.229, 0.224, 0.225] for DB.
PADDLEOCR_DET = dict(
    det_limit_side_len=960,
    det_limit_type="max",
    det_thresh=0.3,
    det_box_thresh=0.6,
    det_unclip_ratio=1.5,
    det_use_dilation=False,
    det_score_mode="fast",
    det_mean=[0.485, 0.456, 0.406],
    det_std=[0.229, 0.224, 0.225],
)


@pytest.fixture(scope="module")
def engine():
    return rapidocr.RapidOCR(**PADDLEOCR_DET)


@pytest.fixture(scope="module")
def rapidocr_default_engine():
    return rapidocr.RapidOCR()


def engine_text(engine, image: Image.Image) -> str:
    """The engine's own recognised text, joined as flow_grpo joins PaddleOCR's lines (confidence > 0)."""
    result, _ = engine(np.asarray(image), use_cls=False)
    return "".join(text for _box, text, score in result if score > 0) if result else ""


@pytest.fixture(scope="module")
def rendered():
    images = [render_text(t, s, background=bg, ink=ink, angle=a) for t, s, bg, ink, a in CASES]
    return images, [f'a shop sign that says "{t}"' for t, *_ in CASES]


@pytest.fixture(scope="module")
def engine_texts(engine, rendered):
    return [engine_text(engine, img) for img in rendered[0]]


def test_exact_target_scores_high_and_other_target_low(reward, rendered):
    images, prompts = rendered
    good = reward(image=images, prompt=prompts).rewards
    assert min(good) >= 0.9, good
    wrong = reward(image=images, prompt=['a sign that says "Quiet Library Zone"'] * len(images)).rewards
    assert max(wrong) <= 0.6, wrong
    assert min(np.subtract(good, wrong)) >= 0.4


def test_equals_formula_on_the_engines_own_text(reward, rendered, engine_texts):
    images, prompts = rendered
    near = [
        'say "Hello Wrld"',
        'the words "OPEN 42 HOURS" in neon',
        'a "reward zoo 2" logo',
        'text "Fresh Coffee Beans"',
        'poster: "Grand Closing"',
        'sign "Sale 60%"',
    ]
    out = reward(image=images + images, prompt=prompts + near)
    texts = engine_texts + engine_texts
    assert list(out.extras["ocr_text"]) == texts
    expected = [flow_grpo_score(t, p) for t, p in zip(texts, prompts + near)]
    np.testing.assert_allclose(out.rewards, expected, rtol=0, atol=1e-12)
    assert len(set(np.round(out.rewards, 6))) > 3  # partial scores, not only 0 and 1


def test_batch_invariance(reward, rendered):
    images, prompts = rendered
    together = reward(image=images, prompt=prompts)
    alone = [reward(image=[img], prompt=[p]) for img, p in zip(images, prompts)]
    assert list(together.extras["ocr_text"]) == [a.extras["ocr_text"][0] for a in alone]
    np.testing.assert_array_equal(together.rewards, [a.rewards[0] for a in alone])


def test_mixed_sizes_in_one_call(reward, engine):
    images = [render_text("Hello World", 26, width=w, height=h) for w, h in ((300, 260), (256, 256), (360, 300))]
    out = reward(image=images, prompt=['"Hello World"'] * 3)
    assert list(out.extras["ocr_text"]) == [engine_text(engine, img) for img in images]
    assert min(out.rewards) >= 0.9


def test_two_lines_are_joined_in_reading_order(reward):
    image = render_text("Happy\nBirthday", 56)
    out = reward(image=[image], prompt=['a cake with "Happy Birthday"'])
    assert out.rewards[0] >= 0.9, out.extras["ocr_text"]


def test_image_without_text_scores_zero(reward):
    rng = np.random.default_rng(0)
    blank = Image.new("RGB", (512, 512), (255, 255, 255))
    gradient = Image.fromarray((np.linspace(0, 255, 512)[None, :, None] * np.ones((512, 1, 3))).astype(np.uint8))
    smooth = Image.fromarray(rng.integers(90, 110, (64, 64, 3), dtype=np.uint8)).resize((512, 512), Image.BILINEAR)
    out = reward(image=[blank, gradient, smooth], prompt=['"Hello World"'] * 3)
    assert list(out.rewards) == [0.0, 0.0, 0.0]
    assert list(out.extras["ocr_text"]) == ["", "", ""]


@pytest.mark.parametrize("prompt", ['a sign saying ""', 'a sign saying "   " here', ""])
def test_empty_target_is_an_error(reward, prompt):
    image = render_text("Hello", 40)
    with pytest.raises(InputError) as info:
        reward(image=[image, image], prompt=['"Hello"', prompt])
    assert info.value.field == "prompt" and info.value.sample == 1
    assert "empty" in str(info.value)


def test_prompt_without_quotes_is_the_target(reward):
    image = render_text("rewardzoo", 64)
    assert reward(image=[image], prompt=["rewardzoo"]).rewards[0] >= 0.9


def test_zero_confidence_lines_are_dropped():
    # flow_grpo: ''.join(res[1][0] if res[1][1] > 0 else '' for res in result[0])
    lines = [("ab", 0.9), ("zz", 0.0), ("c d", 0.3), ("q", -0.1)]
    assert recognised_text(lines) == "".join(t if s > 0 else "" for t, s in lines) == "abc d"


@pytest.mark.parametrize("seed", range(6))
def test_text_match_against_levenshtein(seed):
    rnd = random.Random(seed)
    alphabet = "abc De"
    for _ in range(200):
        a = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
        b = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 9)))
        assert levenshtein(a, b) == Levenshtein.distance(a, b)
        nb = b.replace(" ", "").lower()
        if nb:
            assert match_score(a, b) == pytest.approx(flow_grpo_score(a, f'"{b}"'), abs=1e-12)
            assert match_score(a, b, containment=False) == pytest.approx(
                flow_grpo_score(a, f'"{b}"', containment=False), abs=1e-12
            )


def test_long_recognised_text_is_capped():
    target = "hello"
    noise = "xyzxyzxyzxyzxyzxyzxyz"
    assert capped_distance(noise, target) == len(target)  # never below score 0
    assert match_score(noise + "Hello" + noise, target) == 1.0  # contained: full score
    assert match_score(noise + "Hello" + noise, target, containment=False) == 0.0
    assert quoted_target('say "hi" and "bye"') == "hi"
    assert quoted_target('an unclosed "quote here') == "quote here"
    assert quoted_target("no quotes") == "no quotes"


def test_preset_rapidocr_is_rapidocrs_own_call(rendered, rapidocr_default_engine):
    images, prompts = rendered[0][:3], rendered[1][:3]
    out = load_reward({"name": "ocr", "device": "cpu", "kwargs": {"preset": "rapidocr"}})(image=images, prompt=prompts)
    texts = [engine_text(rapidocr_default_engine, img) for img in images]
    assert list(out.extras["ocr_text"]) == texts
    np.testing.assert_allclose(out.rewards, [flow_grpo_score(t, p) for t, p in zip(texts, prompts)], rtol=0, atol=1e-12)


#: one detector option at a time (rewardzoo's name, value) -> the RapidOCR keywords it must become
ONE_SETTING = [
    ({"det_limit_side_len": 736, "det_limit_type": "min"}, {"det_limit_side_len": 736, "det_limit_type": "min"}),
    ({"det_db_thresh": 0.5}, {"det_thresh": 0.5}),
    ({"det_db_box_thresh": 0.8}, {"det_box_thresh": 0.8}),
    ({"det_db_unclip_ratio": 2.4}, {"det_unclip_ratio": 2.4}),
    ({"use_dilation": True}, {"det_use_dilation": True}),
    ({"det_db_score_mode": "slow"}, {"det_score_mode": "slow"}),
    ({"det_normalize": "rapidocr"}, {"det_mean": [0.5, 0.5, 0.5], "det_std": [0.5, 0.5, 0.5]}),
]


@pytest.mark.parametrize("ours,theirs", ONE_SETTING, ids=[next(iter(o)) for o, _ in ONE_SETTING])
def test_each_detector_option_reaches_rapidocr(rendered, ours, theirs):
    """Against RapidOCR built directly with PaddleOCR's settings and the one change: the same detector
    input, the same DB post-processing parameters and the same recognised text."""
    image = np.asarray(rendered[0][1])
    reward = OCR(**ours)
    direct = rapidocr.RapidOCR(**{**PADDLEOCR_DET, **theirs})
    mine, theirs_post = reward.engine.engine.text_det.postprocess_op, direct.text_det.postprocess_op
    for attribute in ("thresh", "box_thresh", "unclip_ratio", "score_mode", "max_candidates"):
        assert getattr(mine, attribute) == getattr(theirs_post, attribute), attribute
    assert (mine.dilation_kernel is None) == (theirs_post.dilation_kernel is None)
    expected_input = direct.text_det.get_preprocess(max(image.shape[:2]))(image)
    np.testing.assert_allclose(reward.engine._det_input(image), expected_input, rtol=0, atol=1e-5)
    assert reward(image=[image], prompt=['"x"']).extras["ocr_text"] == [engine_text(direct, image)]


def test_limit_side_len_applies_as_paddleocr_applies_it():
    # PaddleOCR's DetResizeForTest.resize_image_type0 (ppocr/data/imaug/operators.py, paddleocr 2.9.1):
    # "max": ratio = limit / longer side when the longer side exceeds the limit, else 1; "min": ratio =
    # limit / shorter side when the shorter side is below it; then each side int(side * ratio) rounded to
    # a multiple of 32 (at least 32)
    def paddle_shape(h, w, limit, kind):
        if kind == "max":
            ratio = limit / max(h, w) if max(h, w) > limit else 1.0
        else:
            ratio = limit / min(h, w) if min(h, w) < limit else 1.0
        return tuple(max(int(round(int(side * ratio) / 32) * 32), 32) for side in (h, w))

    img = np.zeros((700, 1300, 3), np.uint8)
    for limit, kind in ((960, "max"), (640, "max"), (736, "min")):
        engine = OCR(det_limit_side_len=limit, det_limit_type=kind).engine
        assert engine._det_input(img).shape[2:] == paddle_shape(700, 1300, limit, kind)


def test_options_are_checked():
    with pytest.raises(ConfigError):
        OCR(engine="tesseract")
    for bad in (
        {"det_limit_type": "long"},
        {"det_db_box_thresh": 1.5},
        {"det_db_unclip_ratio": 0},
        {"use_dilation": "yes"},
        {"det_db_score_mode": "exact"},
        {"det_normalize": "none"},
        {"det_limit_side_len": 0},
        {"preset": "paddle"},
        {"det_box_thresh": 0.5},
    ):
        with pytest.raises(ConfigError) as info:
            OCR(**bad)
        assert next(iter(bad)) in str(info.value) or info.value.field.endswith(next(iter(bad)))
    with pytest.raises(ConfigError):
        OCR(text_score=1.5)
    with pytest.raises(ConfigError):
        OCR(dtype="float16")
    with pytest.raises(ConfigError):
        OCR(model_path="/nonexistent-ocr-models")


# ------------------------------------------------------------------------------------------------ video


@pytest.fixture(scope="module")
def video_reward() -> VideoOCR:
    return load_reward({"name": "video_ocr", "device": "cpu"})


def test_video_mean_over_positive_frames(video_reward, engine):
    blank = Image.new("RGB", (384, 256), (255, 255, 255))
    hello = render_text("Hello World", 40, width=384, height=256)
    other = render_text("Goodbye", 40, width=384, height=256)
    noisy = render_text("Hello World Hello", 40, width=384, height=256)
    # frames 0, 4, 8 are sampled (frame_interval 4)
    videos = [
        [hello, blank, blank, blank, noisy, blank, blank, blank, blank],
        [blank] * 6,
        [other, hello, hello, hello, blank],
    ]
    prompts = ['"Hello World"'] * 3
    out = video_reward(video=videos, prompt=prompts)
    expected, counts = [], []
    for frames, prompt in zip(videos, prompts):
        scores = [flow_grpo_score(engine_text(engine, f), prompt, containment=False) for f in frames[::4]]
        positive = [s for s in scores if s > 0]
        expected.append(sum(positive) / len(positive) if positive else 0.0)
        counts.append(len(positive))
    np.testing.assert_allclose(out.rewards, expected, rtol=0, atol=1e-12)
    assert list(out.extras["text_frames"]) == counts
    assert out.rewards[1] == 0.0 and 0 < out.rewards[0] < 1  # the noisy frame costs points without containment


def test_video_through_the_processor():
    from rewardzoo import build_processors
    from rewardzoo.spec.sample import Sample

    frames = np.stack([np.asarray(render_text("Hello World", 40, width=256, height=128))] * 5)
    train, _ = build_processors(
        {"rewards": [{"name": "video_ocr", "device": "cpu", "kwargs": {"frame_interval": 2, "containment": True}}]}
    )
    result = train([Sample(video=frames, prompt='"hello world"')])
    assert float(result.rewards["video_ocr"][0]) >= 0.9


def test_paddleocr_engine_missing_is_a_clear_error():
    import importlib.util

    from rewardzoo.errors import MissingExtraError

    if importlib.util.find_spec("paddleocr") is not None:
        pytest.skip("paddleocr is installed")
    with pytest.raises(MissingExtraError, match="paddleocr"):
        OCR(engine="paddleocr")
