"""edit_preservation: PSNR / SSIM / L1 outside the edit mask against scikit-image and torchmetrics on generated
edits with a known edited region; DINO / CLIP similarity against the backbones called directly; batch
invariance; bad inputs as InputErrors naming the reward, the field and the global sample; and an edit sample's
source and mask arriving through the manifest and the wire format."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from rewardzoo import RewardProcessor, Sample
from rewardzoo.errors import InputError
from rewardzoo.rewards.image.preservation import EditPreservation

pytest.importorskip("skimage.metrics", reason="scikit-image is the reference (pip install scikit-image)")

from .media import EDIT, edit_files, edit_pair, reference, t


@pytest.mark.parametrize("metric", ["psnr", "ssim", "l1"])
@pytest.mark.parametrize("with_mask", [False, True])
def test_pixel_metrics_equal_scikit_image_and_torchmetrics(metric, with_mask):
    pairs = [edit_pair(s) for s in range(3)]
    samples = [Sample(image=r, condition_images=[s, m] if with_mask else [s]) for s, r, m in pairs]
    got = RewardProcessor([{"name": "edit_preservation", "kwargs": {"metric": metric}}])(samples)
    want = [reference(metric, s, r, m if with_mask else None) for s, r, m in pairs]
    np.testing.assert_allclose(got.rewards["edit_preservation"], want, rtol=2e-5, atol=2e-6)
    kept = got.extras["edit_preservation"]["kept_fraction"]
    np.testing.assert_allclose(kept, 1 - (24 * 40) / (64 * 96) if with_mask else 1.0, rtol=1e-6)


def test_the_mask_makes_the_score_blind_to_the_edit_and_sees_damage_outside_it():
    src, res, mask = edit_pair(7)
    reward = EditPreservation(metric="psnr")
    redrawn = res.copy()
    redrawn[EDIT] = 255 - redrawn[EDIT]
    damaged = res.copy()
    damaged[:10] = 0
    scores = reward(image=[t(res), t(redrawn), t(damaged), t(src)], condition_images=[[t(src), t(mask)]] * 4).rewards
    assert float(scores[0]) == pytest.approx(float(scores[1]), abs=1e-9)  # the edit region is not looked at
    assert float(scores[2]) < float(scores[0]) - 3
    kept = int((mask < 128).sum())
    # untouched: scikit-image gives inf; the score is one 8-bit value off by one over K, finite
    assert float(scores[3]) == pytest.approx(10 * np.log10(3 * kept * 255.0**2), rel=1e-12)
    unmasked = reward(image=[t(res)], condition_images=[[t(src)]]).rewards
    assert float(unmasked[0]) < float(scores[0]) - 3  # without the mask the redrawn region counts


def test_scores_do_not_depend_on_the_batch_and_sizes_may_differ():
    pairs = [edit_pair(s, h=48 + 16 * (s % 2), w=80) for s in range(5)]
    samples = [Sample(image=r, condition_images=[s, m] if i % 2 else [s]) for i, (s, r, m) in enumerate(pairs)]
    for metric in ("ssim", "psnr"):
        batched = RewardProcessor([{"name": "edit_preservation", "batch_size": 5, "kwargs": {"metric": metric}}])
        single = RewardProcessor([{"name": "edit_preservation", "batch_size": 1, "kwargs": {"metric": metric}}])
        np.testing.assert_array_equal(
            batched(samples).rewards["edit_preservation"], single(samples).rewards["edit_preservation"]
        )


def test_direction_and_range_follow_the_metric():
    proc = RewardProcessor(
        [
            {"name": "l1", "reward_model": "edit_preservation", "kwargs": {"metric": "l1"}},
            {"name": "psnr", "reward_model": "edit_preservation", "kwargs": {"metric": "psnr"}},
        ]
    )
    l1, psnr = (proc.rewards[n].info for n in ("l1", "psnr"))
    assert (l1.higher_is_better, l1.score_range) == (False, (0.0, 1.0))
    assert (psnr.higher_is_better, psnr.score_range) == (True, (0.0, 160.0))


def test_psnr_has_no_100_db_cap_one_value_off_by_one_equals_scikit_image():
    """The issue's case: one value off by one in a 512x512 image is 107.09 dB in scikit-image
    (``peak_signal_noise_ratio``); the identical image (inf there) scores the same, the largest finite value."""
    from skimage.metrics import peak_signal_noise_ratio

    rng = np.random.default_rng(0)
    src = rng.integers(0, 255, size=(512, 512, 3), dtype=np.uint8)
    off = src.copy()
    off[100, 200, 1] += 1
    want = peak_signal_noise_ratio(src.astype(np.float64) / 255, off.astype(np.float64) / 255, data_range=1)
    assert want == pytest.approx(107.09, abs=5e-3)
    got = EditPreservation(metric="psnr")(image=[t(off), t(src)], condition_images=[[t(src)], [t(src)]]).rewards
    np.testing.assert_allclose(got, [want, want], rtol=1e-12)


@pytest.mark.parametrize(
    "conds, image, field, words",
    [
        (lambda s, m: [], None, "condition_images", "empty list"),
        (lambda s, m: [s, m[:, :50]], None, "condition_images", "the edit mask (condition_images[1]) is 50x64"),
        (lambda s, m: [s, np.full_like(m, 255)], None, "condition_images", "leaves no pixel outside the edit"),
        (lambda s, m: [s, s, s], None, "condition_images", "[source] or [source, mask]"),
        (lambda s, m: [s], np.zeros((64, 90, 3), np.uint8), "image", "the result is 90x64, its source"),
    ],
)
def test_bad_edit_inputs_name_reward_field_and_global_sample(conds, image, field, words):
    src, res, mask = edit_pair(1)
    good = Sample(image=res, condition_images=[src, mask])
    bad = Sample(image=res if image is None else image, condition_images=conds(src, mask))
    proc = RewardProcessor([{"name": "keep", "reward_model": "edit_preservation", "batch_size": 2}])
    with pytest.raises(InputError) as info:
        proc([good, good, good, bad])
    err = info.value
    assert (err.reward, err.field, err.sample) == ("keep", field, 3)
    assert words in str(err)


def test_unknown_metric_is_a_config_error():
    from rewardzoo.errors import ConfigError

    with pytest.raises(ConfigError, match="metric"):
        RewardProcessor([{"name": "edit_preservation", "kwargs": {"metric": "lpips"}}])


# ------------------------------------------------------------------------------------------ model-based
@pytest.fixture(scope="module")
def dino_dir(tmp_path_factory):
    from rewardzoo.testing import tiny_dino_dirs

    return tiny_dino_dirs(tmp_path_factory.mktemp("dino"))["vit"]


def test_dino_is_the_cosine_of_the_backbones_cls_tokens_and_pastes_the_edit_region(dino_dir):
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as TF
    from transformers import AutoModel

    pairs = [edit_pair(s) for s in range(2)]
    reward = EditPreservation(dino_dir, metric="dino", resize=64)
    got = reward(image=[t(r) for _, r, _ in pairs], condition_images=[[t(s)] for s, _, _ in pairs]).rewards
    model = AutoModel.from_pretrained(dino_dir, add_pooling_layer=False).eval()
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def cls(a):
        x = TF.resize(t(a).float() / 255, 64, interpolation=InterpolationMode.BILINEAR, antialias=False)
        with torch.no_grad():
            return model(pixel_values=((x - mean) / std)[None], interpolate_pos_encoding=True).last_hidden_state[0, 0]

    want = [float(F.cosine_similarity(cls(r), cls(s), dim=0)) for s, r, _ in pairs]
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    # with the mask, a result that differs from its source only inside the mask is the source: cosine 1
    src, res, mask = pairs[0]
    inside_only = src.copy()
    inside_only[EDIT] = res[EDIT]
    masked = reward(image=[t(inside_only)], condition_images=[[t(src), t(mask)]]).rewards
    assert float(masked[0]) == pytest.approx(1.0, abs=1e-5)
    # a result of another size is compared as a whole; with a mask it cannot be
    small = t(res[:48])
    assert -1 <= float(reward(image=[small], condition_images=[[t(src)]]).rewards[0]) <= 1
    with pytest.raises(InputError, match="the edit mask marks pixels of both"):
        reward(image=[small], condition_images=[[t(src), t(mask)]])


def test_clip_is_the_cosine_of_the_backbones_image_features(oc_dir):
    from rewardzoo.rewards.models.clip import load_clip_backbone

    pairs = [edit_pair(s) for s in range(2)]
    samples = [Sample(image=r, condition_images=[s]) for s, r, _ in pairs]
    got = RewardProcessor([{"name": "edit_preservation", "model_path": str(oc_dir), "kwargs": {"metric": "clip"}}])(
        samples
    ).rewards["edit_preservation"]
    backbone = load_clip_backbone(str(oc_dir))
    a = backbone.encode_images([Image.fromarray(r) for _, r, _ in pairs])
    b = backbone.encode_images([Image.fromarray(s) for s, _, _ in pairs])
    np.testing.assert_allclose(got, F.cosine_similarity(a, b).numpy(), atol=1e-5)


# ------------------------------------------------------------------------------------------ front ends
def test_a_manifest_carries_the_source_and_the_mask(tmp_path):
    from rewardzoo.cli import main

    rows, want = edit_files(tmp_path)
    (tmp_path / "edits.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "cfg.yaml").write_text("rewards:\n  - name: edit_preservation\n    kwargs: {metric: psnr}\n")
    assert (
        main(
            [
                "score",
                str(tmp_path / "cfg.yaml"),
                "--input",
                str(tmp_path / "edits.jsonl"),
                "--out",
                str(tmp_path / "out.jsonl"),
                "-q",
            ]
        )
        == 0
    )
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    got = [json.loads(line)["rewards"]["edit_preservation"] for line in lines]
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_the_wire_format_carries_the_source_and_the_mask(tmp_path, fmt):
    pytest.importorskip("msgpack")
    from rewardzoo.transport import wire

    rows, want = edit_files(tmp_path)
    samples = [
        {
            "image": Image.open(tmp_path / r["image"]),
            "prompt": r["prompt"],
            "condition_images": [Image.open(tmp_path / c) for c in r["condition_images"]],
        }
        for r in rows
    ]
    decoded = wire.decode_request(wire.encode_request(samples, fmt=fmt), fmt, wire.WireLimits()).samples
    assert [len(s["condition_images"]) for s in decoded] == [2, 1, 2]
    got = RewardProcessor([{"name": "edit_preservation", "kwargs": {"metric": "psnr"}}])(
        [Sample(**s) for s in decoded]
    ).rewards["edit_preservation"]
    np.testing.assert_allclose(got, want, rtol=1e-5)
