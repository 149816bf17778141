"""GenEval: the decision rules on hand-built detections, the metadata parser on GenEval's own lines, and
the whole path on a tiny random Mask2Former (post-processing checked against mmdet's, re-computed here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rewardzoo.errors import InputError
from rewardzoo.rewards.image.detections import Detections
from rewardzoo.rewards.image.geneval_rules import (
    CLASS_NAMES,
    COLORS,
    Thresholds,
    evaluate,
    parse_metadata,
    relative_position,
    select_objects,
)

DATA = Path(__file__).parent / "data" / "geneval_metadata.jsonl"
SIZE = (100, 80)  # width, height


def dets(*objs, size=SIZE, masks=False) -> Detections:
    """Detections from (label, score, box) triples."""
    labels = tuple(o[0] for o in objs)
    scores = np.array([o[1] for o in objs], dtype=np.float32)
    boxes = np.array([o[2] for o in objs], dtype=np.float32).reshape(-1, 4)
    m = None
    if masks:
        m = np.zeros((len(objs), size[1], size[0]), dtype=bool)
        for i, (x0, y0, x1, y1) in enumerate(boxes.astype(int)):
            m[i, y0:y1, x0:x1] = True
    return Detections(labels, scores, boxes, size, m)


def meta(tag, include, exclude=None):
    out = {"tag": tag, "include": include, "prompt": "p"}
    if exclude is not None:
        out["exclude"] = exclude
    return out


def verdict(detections, metadata, colors=None, rules=Thresholds()):
    req = parse_metadata(metadata)
    return evaluate(select_objects(detections, req.tag, rules), req, colors or {}, rules)


# ------------------------------------------------------------------------------------- metadata
def test_published_metadata_lines_parse_as_written():
    lines = DATA.read_text().splitlines()
    assert {json.loads(line)["tag"] for line in lines} == {
        "single_object",
        "two_object",
        "counting",
        "colors",
        "position",
        "color_attr",
    }
    for line in lines:
        raw = json.loads(line)
        req = parse_metadata(line)
        assert req.tag == raw["tag"] and req.prompt == raw["prompt"]
        assert [(c.cls, c.count, c.color, c.position and list(c.position)) for c in req.include] == [
            (c["class"], c["count"], c.get("color"), c.get("position")) for c in raw["include"]
        ]
        assert [(c.cls, c.count) for c in req.exclude] == [(c["class"], c["count"]) for c in raw.get("exclude", [])]
        assert parse_metadata(raw) == req  # a mapping parses like its JSON text


@pytest.mark.parametrize(
    "bad, match",
    [
        ("not json", "not valid JSON"),
        ({"include": [{"class": "dog", "count": 1}]}, "'tag'"),
        ({"tag": "single_object"}, "'include'"),
        (meta("single_object", []), "at least one"),
        (meta("single_object", [{"class": "unicorn", "count": 1}]), "include\\[0\\].class"),
        (meta("counting", [{"class": "dog", "count": 0}]), "positive integer"),
        (meta("colors", [{"class": "dog", "count": 1, "color": "teal"}]), "color"),
        (meta("position", [{"class": "dog", "count": 1, "position": ["left of", 0]}]), "earlier include"),
        (
            meta("position", [{"class": "dog", "count": 1}, {"class": "cat", "count": 1, "position": ["near", 0]}]),
            "relation",
        ),
        (meta("single_object", [{"class": "dog", "count": 1, "size": 3}]), "unknown key"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_metadata_names_field_and_sample(bad, match):
    with pytest.raises(InputError, match=match) as info:
        parse_metadata(bad if isinstance(bad, str) else json.dumps(bad) if isinstance(bad, dict) else bad, sample=3)
    assert info.value.field == "metadata" and info.value.sample == 3


# ------------------------------------------------------------------------------- position rule
@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((0, 0, 10, 10), (20, 0, 30, 10), {"left of"}),  # offset -20, shrunk -18 -> dx -0.9
        ((20, 0, 30, 10), (0, 0, 10, 10), {"right of"}),
        ((0, 0, 10, 10), (0, 30, 10, 40), {"above"}),  # image y grows downwards
        ((0, 30, 10, 40), (0, 0, 10, 10), {"below"}),
        ((0, 0, 10, 10), (20, 20, 30, 30), {"left of", "above"}),  # diagonal: dx = dy = -18/28.28 = -0.64
        ((0, 0, 10, 10), (1, 0, 11, 10), set()),  # |offset| 1 < 0.1 * 20: shrunk to 0
        ((0, 0, 5, 5), (2, 0, 7, 5), set()),  # shrunk -1 / |offset| 2 = -0.5: not < -0.5
        ((0, 0, 5, 5), (2.1, 0, 7.1, 5), {"left of"}),  # -1.1 / 2.1 = -0.52
        ((0, 0, 10, 10), (20, 12, 30, 22), {"left of"}),  # dx -18/23.3 = -0.77, dy -10/23.3 = -0.43
    ],
)
def test_relative_position(a, b, expected):
    assert relative_position(np.array(a, np.float32), np.array(b, np.float32)) == expected


def test_position_threshold_scales_the_shrink():
    a, b = np.array([0, 0, 10, 10.0]), np.array([14, 0, 24, 10.0])  # offset -14, dims 20
    assert relative_position(a, b, 0.1) == {"left of"}  # -12 / 14
    assert relative_position(a, b, 0.7) == set()  # 14 - 14 = 0


# ------------------------------------------------------------------------------------ the table
DOG, CAT = (10, 10, 40, 40), (60, 10, 90, 40)
CASES = [
    # (name, detections, metadata, colours, GenEval correct, flow_grpo partial, flow_grpo exact)
    ("single found", [("dog", 0.8, DOG)], meta("single_object", [{"class": "dog", "count": 1}]), {}, True, 1.0, True),
    (
        "single below threshold",
        [("dog", 0.3, DOG)],
        meta("single_object", [{"class": "dog", "count": 1}]),
        {},
        False,
        0.0,
        False,
    ),  # 0.3 is not > 0.3
    (
        "single wrong class",
        [("cat", 0.9, CAT)],
        meta("single_object", [{"class": "dog", "count": 1}]),
        {},
        False,
        0.0,
        False,
    ),
    (
        "single, two found",
        [("dog", 0.8, DOG), ("dog", 0.7, CAT)],
        meta("single_object", [{"class": "dog", "count": 1}]),
        {},
        True,
        0.0,
        False,
    ),  # GenEval: at least one; flow_grpo: 1 - |1 - 2| / 1 = 0, not exact
    (
        "two objects",
        [("dog", 0.8, DOG), ("cat", 0.5, CAT)],
        meta("two_object", [{"class": "dog", "count": 1}, {"class": "cat", "count": 1}]),
        {},
        True,
        1.0,
        True,
    ),
    (
        "two objects, one missing",
        [("dog", 0.8, DOG)],
        meta("two_object", [{"class": "dog", "count": 1}, {"class": "cat", "count": 1}]),
        {},
        False,
        0.5,
        False,
    ),
    (
        "counting exact",
        [("dog", 0.95, DOG), ("dog", 0.91, CAT)],
        meta("counting", [{"class": "dog", "count": 2}], [{"class": "dog", "count": 3}]),
        {},
        True,
        1.0,
        True,
    ),
    (
        "counting uses 0.9",
        [("dog", 0.95, DOG), ("dog", 0.9, CAT)],
        meta("counting", [{"class": "dog", "count": 2}], [{"class": "dog", "count": 3}]),
        {},
        False,
        0.5,
        False,
    ),
    (
        "counting too many",
        [("dog", 0.95, DOG), ("dog", 0.93, CAT), ("dog", 0.92, (0, 50, 20, 70))],
        meta("counting", [{"class": "dog", "count": 2}], [{"class": "dog", "count": 3}]),
        {},
        False,
        0.5,
        False,
    ),
    (
        "counting: low scores ignored",
        [("dog", 0.95, DOG), ("dog", 0.93, CAT), ("dog", 0.8, (0, 50, 20, 70))],
        meta("counting", [{"class": "dog", "count": 2}], [{"class": "dog", "count": 3}]),
        {},
        True,
        1.0,
        True,
    ),
    (
        "far too many (flow_grpo negative)",
        [("dog", 0.8, DOG)] * 4,
        meta("single_object", [{"class": "dog", "count": 1}]),
        {},
        True,
        -2.0,
        False,
    ),
    (
        "colour right",
        [("dog", 0.8, DOG)],
        meta("colors", [{"class": "dog", "count": 1, "color": "red"}]),
        {0: ["red"]},
        True,
        1.0,
        True,
    ),
    (
        "colour wrong",
        [("dog", 0.8, DOG)],
        meta("colors", [{"class": "dog", "count": 1, "color": "red"}]),
        {0: ["blue"]},
        False,
        0.5,
        False,
    ),
    (
        "colour, object missing",
        [],
        meta("colors", [{"class": "dog", "count": 1, "color": "red"}]),
        {},
        False,
        0.0,
        False,
    ),
    (
        "colour attribution",
        [("dog", 0.8, DOG), ("cat", 0.8, CAT)],
        meta(
            "color_attr", [{"class": "dog", "count": 1, "color": "red"}, {"class": "cat", "count": 1, "color": "blue"}]
        ),
        {0: ["red"], 1: ["red"]},
        False,
        0.75,
        False,
    ),
    (
        "position right",
        [("dog", 0.8, DOG), ("cat", 0.8, CAT)],
        meta("position", [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["left of", 0]}]),
        {},
        True,
        1.0,
        True,
    ),
    (
        "position wrong",
        [("dog", 0.8, DOG), ("cat", 0.8, CAT)],
        meta("position", [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["right of", 0]}]),
        {},
        False,
        0.75,
        False,
    ),  # flow_grpo terms [1, 1, 0, 1]
    (
        "position, no target",
        [("dog", 0.8, DOG)],
        meta("position", [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["left of", 0]}]),
        {},
        False,
        1 / 3,
        False,
    ),  # terms [0, 1, 0]
    (
        "position, object missing",
        [("cat", 0.8, CAT)],
        meta("position", [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["left of", 0]}]),
        {},
        False,
        1 / 3,
        False,
    ),  # terms [1, 0, 0]
    (
        "position judged on the most confident only",
        [("dog", 0.8, DOG), ("dog", 0.5, (95, 10, 99, 40)), ("cat", 0.8, CAT)],
        meta("position", [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["left of", 0]}]),
        {},
        True,
        1 / 3,
        False,
    ),  # flow_grpo: 2 dogs != 1 -> terms [1, 0, 0]
]


@pytest.mark.parametrize("name, objs, metadata, colors, correct, partial, exact", CASES, ids=[c[0] for c in CASES])
def test_decision_table(name, objs, metadata, colors, correct, partial, exact):
    v = verdict(dets(*objs), metadata, colors)
    assert v.correct is correct
    assert v.partial == pytest.approx(partial)
    assert v.exact is exact


def test_exclude_and_fraction_met():
    v = verdict(
        dets(("dog", 0.95, DOG), ("dog", 0.95, CAT), ("dog", 0.95, DOG)),
        meta("counting", [{"class": "dog", "count": 2}], [{"class": "dog", "count": 3}]),
    )
    assert (v.include_met, v.exclude_met, v.fraction_met) == ([True], [False], 0.5)
    assert "expected dog<3, found 3" in v.reasons


def test_max_objects_caps_each_class():
    many = [("dog", 0.95, DOG)] * 20
    m = meta("counting", [{"class": "dog", "count": 16}], [{"class": "dog", "count": 17}])
    assert verdict(dets(*many), m).correct  # 20 detections, 16 kept: the exclude clause cannot fire
    assert not verdict(dets(*many), m, rules=Thresholds(max_objects=20)).correct


def test_max_overlap_removes_duplicates_of_one_class():
    objs = dets(("dog", 0.95, (10, 10, 40, 40)), ("dog", 0.94, (11, 10, 41, 40)), ("dog", 0.93, (60, 10, 90, 40)))
    assert len(select_objects(objs, "counting")["dog"]) == 3  # GenEval's default max_overlap 1.0: no removal
    kept = select_objects(objs, "counting", Thresholds(max_overlap=0.5))["dog"]
    np.testing.assert_array_equal(kept.scores, np.float32([0.95, 0.93]))  # IoU 30*31/(2*31*31-30*31) ~ 0.94 removed


def test_objects_sorted_most_confident_first():
    kept = select_objects(dets(("dog", 0.5, DOG), ("dog", 0.9, CAT), ("cat", 0.7, CAT)), "two_object")
    np.testing.assert_array_equal(kept["dog"].scores, np.float32([0.9, 0.5]))
    assert set(kept) == {"dog", "cat"}


# ------------------------------------------------------------------------------- the whole path
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("open_clip")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rewardzoo import testing as rzt
from rewardzoo.rewards.image.geneval import GenEval, _masked_crop

DOG_ID = CLASS_NAMES.index("dog")


def tiny_mask2former(seed: int = 0, favour: int | None = None):
    from transformers import Mask2FormerConfig, Mask2FormerForUniversalSegmentation, SwinConfig

    swin = SwinConfig(
        embed_dim=16,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_size=4,
        drop_path_rate=0.0,
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )
    cfg = Mask2FormerConfig(
        backbone_config=swin,
        feature_size=32,
        mask_feature_size=32,
        hidden_dim=32,
        encoder_feedforward_dim=64,
        encoder_layers=1,
        decoder_layers=2,
        num_attention_heads=2,
        dim_feedforward=64,
        num_queries=12,
        num_labels=80,
    )
    torch.manual_seed(seed)
    model = Mask2FormerForUniversalSegmentation(cfg).eval()
    if favour is not None:  # every query says "this class" with probability ~1
        with torch.no_grad():
            model.class_predictor.weight.zero_()
            model.class_predictor.bias.fill_(-10.0)
            model.class_predictor.bias[favour] = 10.0
    return model


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("geneval")
    out = {}
    for name, favour in (("random", None), ("dog", DOG_ID)):
        tiny_mask2former(favour=favour).save_pretrained(root / name)
        out[name] = str(root / name)
    out["clip"] = str(rzt.tiny_open_clip_dir(root / "clip", seed=0))
    return out


@pytest.fixture(scope="module")
def dog_reward(dirs):
    return GenEval(dirs["dog"], clip_model=dirs["clip"], clip_pretrained=None, shortest_edge=64, longest_edge=96)


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return [
        torch.from_numpy(rng.integers(0, 256, (3, h, w), dtype=np.uint8)) for h, w in ((48, 64), (48, 64), (40, 40))
    ]


def mmdet_reference(model, pixels, size, resized):
    """mmdet 2.x Mask2Former instance post-processing, from its source: every query's logits upsampled to the
    padded input, cropped, upsampled to the image; top-100 (query, class) pairs; score x mask score; boxes."""
    import torch.nn.functional as F

    with torch.no_grad():
        out = model(pixel_values=pixels)
    cls, masks = out.class_queries_logits[0], out.masks_queries_logits[0]
    masks = F.interpolate(masks[None], size=pixels.shape[-2:], mode="bilinear", align_corners=False)
    masks = masks[..., : resized[0], : resized[1]]
    masks = F.interpolate(masks, size=size, mode="bilinear", align_corners=False)[0]
    scores = F.softmax(cls, dim=-1)[:, :-1]
    n_cls = scores.shape[1]
    top, idx = scores.flatten().topk(100, sorted=False)
    labels, queries = idx % n_cls, idx // n_cls
    pred = masks[queries]
    binary = (pred > 0).float()
    mask_score = (pred.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
    det = top * mask_score
    boxes = []
    for m in binary.bool():
        xs, ys = torch.where(m.any(0))[0], torch.where(m.any(1))[0]
        boxes.append([xs[0], ys[0], xs[-1] + 1, ys[-1] + 1] if len(xs) and len(ys) else [0, 0, 0, 0])
    return labels.numpy(), det.numpy(), np.array(boxes, np.float32), binary.bool().numpy()


def test_detect_matches_mmdet_postprocessing(dog_reward, dirs, images):
    model = transformers.Mask2FormerForUniversalSegmentation.from_pretrained(dirs["random"]).eval()
    reward = GenEval(dirs["random"], clip_model=dirs["clip"], clip_pretrained=None, shortest_edge=64, longest_edge=96)
    img = images[0]
    pixels, resized = reward._preprocess(img[None])
    assert resized == (64, 85) and tuple(pixels.shape[-2:]) == (64, 96)  # 48x64 * 4/3, padded to 32
    labels, scores, boxes, masks = mmdet_reference(model, pixels, (48, 64), resized)
    got = reward.detect([img], min_scores=[0.0])[0]
    ref_order = sorted(range(len(labels)), key=lambda i: (CLASS_NAMES[labels[i]], -scores[i]))
    got_order = sorted(range(len(got)), key=lambda i: (got.labels[i], -got.scores[i]))
    assert len(got) == len(labels) == 100
    assert [got.labels[i] for i in got_order] == [CLASS_NAMES[labels[i]] for i in ref_order]
    np.testing.assert_allclose(got.scores[got_order], scores[ref_order], atol=1e-6)
    np.testing.assert_array_equal(got.boxes[got_order], boxes[ref_order])
    np.testing.assert_array_equal(got.masks[got_order], masks[ref_order])
    assert got.image_size == (64, 48) and got.masks.shape == (100, 48, 64)


def test_random_model_finds_nothing_and_scores_zero(dirs, images):
    reward = GenEval(dirs["random"], clip_model=dirs["clip"], clip_pretrained=None, shortest_edge=64, longest_edge=96)
    line = DATA.read_text().splitlines()[0]
    out = reward(image=images, metadata=[line] * 3)
    assert list(out.rewards) == [0.0, 0.0, 0.0]  # class probabilities ~1/81 < 0.3: no detections
    assert all(r.startswith("expected bench>=1, found 0") for r in out.extras["reason"])


def test_whole_path_dog_model(dog_reward, images):
    lines = [
        meta("single_object", [{"class": "dog", "count": 1}]),
        meta("single_object", [{"class": "cat", "count": 1}]),
        meta("two_object", [{"class": "dog", "count": 1}, {"class": "cat", "count": 1}]),
    ]
    out = dog_reward(image=images, metadata=[json.dumps(m) for m in lines])
    assert list(out.rewards) == [1.0, 0.0, 0.0]
    assert list(out.extras["fraction_met"]) == [1.0, 0.0, 0.5]
    assert json.loads(out.extras["verdicts"][2]) == [
        {"clause": "include dog x1", "met": True},
        {"clause": "include cat x1", "met": False},
    ]
    for key in ("correct", "partial", "exact", "fraction_met", "verdicts", "reason"):
        assert len(out.extras[key]) == 3


def test_batch_equals_one_at_a_time(dog_reward, images):
    lines = [json.dumps(meta("colors", [{"class": "dog", "count": 1, "color": c}])) for c in ("red", "blue", "white")]
    batch = dog_reward(image=images, metadata=lines)
    for i in range(3):
        one = dog_reward(image=[images[i]], metadata=[lines[i]])
        assert one.rewards[0] == batch.rewards[i]
        assert one.extras["reason"][0] == batch.extras["reason"][i]


def test_detector_batch_splits_the_forward_only(dog_reward, dirs, images):
    # dog_reward runs one image per forward (the default off CUDA); this one stacks all three
    stacked = GenEval(
        dirs["dog"],
        clip_model=dirs["clip"],
        clip_pretrained=None,
        shortest_edge=64,
        longest_edge=96,
        detector_batch=len(images),
    )
    assert dog_reward.detector_batch is None  # the first two images share a size: stacked, they run as one batch
    a, b = dog_reward.detect(images, min_scores=[0.3] * 3), stacked.detect(images, min_scores=[0.3] * 3)
    for x, y in zip(a, b):
        assert x.labels == y.labels
        np.testing.assert_allclose(x.scores, y.scores, atol=1e-5)
        np.testing.assert_array_equal(x.boxes, y.boxes)


def test_colour_matches_geneval_pipeline(dog_reward, dirs, images):
    """Crop as GenEval does (PIL composite on #999, crop to the box), open_clip's own preprocessing and zero-shot
    classifier (clip_benchmark's recipe) -> the same colour logits as the reward's batched path."""
    import open_clip
    from PIL import Image

    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{dirs['clip']}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{dirs['clip']}")
    model.eval()
    img = images[0]
    d = dog_reward.detect([img], min_scores=[0.3])[0]
    assert len(d) > 0
    box, mask = d.boxes[0], d.masks[0]
    pil = Image.fromarray(img.permute(1, 2, 0).numpy())
    ref_crop = Image.composite(pil, Image.new("RGB", pil.size, color="#999"), Image.fromarray(mask)).crop(
        tuple(box[:4].tolist())
    )
    ours = _masked_crop(img, mask, box, 153)
    np.testing.assert_array_equal(ours.permute(1, 2, 0).numpy(), np.asarray(ref_crop))
    with torch.no_grad():
        weights = []
        for c in COLORS:
            texts = [
                t.format(c=c)
                for t in ("a photo of a {c} dog", "a photo of a {c}-colored dog", "a photo of a {c} object")
            ]
            e = torch.nn.functional.normalize(model.encode_text(tokenizer(texts)), dim=-1).mean(0)
            weights.append(e / e.norm())
        clf = torch.stack(weights, dim=1)
        feat = torch.nn.functional.normalize(model.encode_image(preprocess(ref_crop)[None]), dim=-1)
        ref_logits = (100.0 * feat @ clf)[0]
    torch.testing.assert_close(dog_reward._color_classifier("dog"), clf, atol=1e-5, rtol=1e-4)
    ours_feat = dog_reward.clip.encode_images([ours])
    ours_logits = (100.0 * ours_feat @ dog_reward._color_classifier("dog"))[0]
    torch.testing.assert_close(ours_logits, ref_logits, atol=0.05, rtol=0)  # PIL vs torch bicubic resize
    top2 = ref_logits.topk(2).values
    if float(top2[0] - top2[1]) > 0.1:
        req = parse_metadata(meta("colors", [{"class": "dog", "count": 1, "color": "red"}]))
        colors = dog_reward.classify_colors([img], [select_objects(d, "colors")], [req])
        assert colors[0][0] == [COLORS[int(ref_logits.argmax())]]


def test_partial_score_option(dirs, images):
    reward = GenEval(
        dirs["dog"], clip_model=dirs["clip"], clip_pretrained=None, shortest_edge=64, longest_edge=96, score="partial"
    )
    m = json.dumps(meta("two_object", [{"class": "dog", "count": 1}, {"class": "cat", "count": 1}]))
    out = reward(image=images[:1], metadata=[m])
    assert out.rewards[0] == out.extras["partial"][0] <= 0.5  # cat term 0; dog term 1 - |1 - n| / 1


def test_missing_metadata_names_sample_and_field(dog_reward, images):
    with pytest.raises(InputError, match="'tag'") as info:
        dog_reward(image=images[:2], metadata=[json.dumps(meta("single_object", [{"class": "dog", "count": 1}])), "{}"])
    assert info.value.sample == 1 and info.value.field == "metadata"


def test_wrong_label_set_is_refused(tmp_path, dirs):
    from rewardzoo.errors import ConfigError

    model = tiny_mask2former()
    model.config.id2label = {i: f"thing{i}" for i in range(80)}
    model.save_pretrained(tmp_path / "m")
    with pytest.raises(ConfigError, match="COCO"):
        GenEval(str(tmp_path / "m"), clip_model=dirs["clip"], clip_pretrained=None)


def test_through_the_processor(dirs):
    """Metadata given as a mapping (the engine hands it over as JSON), a sample without metadata named."""
    from rewardzoo import RewardProcessor, Sample

    entry = {
        "name": "gen",
        "reward_model": "geneval",
        "model_path": dirs["dog"],
        "kwargs": {"clip_model": dirs["clip"], "clip_pretrained": None, "shortest_edge": 64, "longest_edge": 96},
    }
    proc = RewardProcessor([entry])
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    res = proc(
        [
            Sample(image=img, metadata=meta("single_object", [{"class": "dog", "count": 1}])),
            Sample(image=img, metadata=meta("single_object", [{"class": "cat", "count": 1}])),
        ]
    )
    assert list(res.rewards["gen"]) == [1.0, 0.0]
    with pytest.raises(InputError) as info:
        proc([Sample(image=img, metadata=meta("single_object", [{"class": "dog", "count": 1}])), Sample(image=img)])
    assert (info.value.field, info.value.sample) == ("metadata", 1)


def test_coco_label_spellings_are_accepted(tmp_path, dirs):
    """detectron2's COCO names (as the facebook/ checkpoints carry) map onto GenEval's by index."""
    d2 = list(CLASS_NAMES)
    for i, name in ((64, "mouse"), (65, "remote"), (66, "keyboard"), (62, "tv")):
        d2[i] = name
    model = tiny_mask2former()
    model.config.id2label = dict(enumerate(d2))
    model.save_pretrained(tmp_path / "m")
    reward = GenEval(str(tmp_path / "m"), clip_model=dirs["clip"], clip_pretrained=None)
    assert reward.class_names == CLASS_NAMES


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"score": "fraction"}, "score"),
        ({"threshold": 1.5}, "threshold"),
        ({"max_overlap": "x"}, "max_overlap"),
        ({"max_objects": 0}, "max_objects"),
        ({"background": 300}, "background"),
    ],
)
def test_bad_options_are_config_errors(dirs, kwargs, match):
    from rewardzoo.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        GenEval(dirs["random"], clip_model=dirs["clip"], clip_pretrained=None, **kwargs)


def test_bad_image_names_the_sample(dog_reward, images):
    m = json.dumps(meta("single_object", [{"class": "dog", "count": 1}]))
    with pytest.raises(InputError) as info:
        dog_reward(image=[images[0], np.zeros((0, 4, 3), np.uint8)], metadata=[m, m])
    assert (info.value.field, info.value.sample) == ("image", 1)
