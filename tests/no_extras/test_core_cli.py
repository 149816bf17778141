"""The command line: list, card, schema, demo, and `score` end to end on generated files."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from rewardzoo.cli import main
from rewardzoo.jobs import group_preserving_chunks
from rewardzoo.registry import entries
from rewardzoo.spec.sample import Sample


def _jpeg_kb(path) -> float:
    buf = io.BytesIO()
    Image.open(path).convert("RGB").save(buf, format="JPEG", quality=95)
    return len(buf.getvalue()) / 1000


@pytest.fixture
def manifest(tmp_path):
    rng = np.random.default_rng(0)
    media = tmp_path / "media"
    media.mkdir()
    lines = []
    for i in range(7):
        img = (rng.random((20 + i, 24, 3)) ** (i + 1) * 255).astype(np.uint8)
        Image.fromarray(img).save(media / f"{i}.png")
        lines.append(
            {
                "image": f"media/{i}.png",
                "prompt": f"p{i}",
                "dataset": "a" if i % 3 else "b",
                "group_id": i % 2,
                "metadata": {"i": i},
            }
        )
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines[:4]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[4:]))
    config = tmp_path / "cfg.yaml"
    config.write_text(
        "rewards:\n  - name: small\n    reward_model: jpeg_compressibility\n    batch_size: 3\n"
        "    applicable_datasets: [a]\n    weight: 2\n  - name: rank\n    reward_model: group_rank\n"
        "    kwargs: {base: jpeg_incompressibility}\n"
    )
    return tmp_path, path, config, media


def test_score_end_to_end(manifest, capsys):
    root, path, config, media = manifest
    out = root / "out" / "scores.jsonl"
    assert main(["score", str(config), "--input", str(path), "--out", str(out), "--chunk-size", "2"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 7
    kb = np.array([_jpeg_kb(media / f"{i}.png") for i in range(7)])
    for i, rec in enumerate(records):
        if i % 3:
            assert rec["rewards"]["small"] == pytest.approx(-kb[i] / 500, rel=1e-6)
        else:
            assert rec["rewards"]["small"] is None
        assert rec["applied"] == (["small", "rank"] if i % 3 else ["rank"])
    for parity in (0, 1):  # group_rank within each group (groups split across chunk boundaries otherwise)
        members = [i for i in range(7) if i % 2 == parity]
        order = np.argsort(np.argsort(kb[members]))
        ranks = [records[i]["rewards"]["rank"] for i in members]
        np.testing.assert_allclose(ranks, order / (len(members) - 1), atol=1e-6)
    total = [r["total"] for r in records]
    np.testing.assert_allclose(
        total, [2 * (r["rewards"]["small"] or 0) + r["rewards"]["rank"] for r in records], rtol=1e-5
    )


def test_score_bad_input_names_line_field_and_reward_and_writes_nothing(manifest, capsys):
    root, path, config, media = manifest
    (media / "4.png").write_bytes(b"garbage")  # sample 4 sits on line 6: line 5 of the manifest is blank
    out = root / "scores.jsonl"
    assert main(["score", str(config), "--input", str(path), "--out", str(out), "-q"]) != 0
    err = capsys.readouterr().err.strip()
    assert "line 6" in err and "field 'image'" in err and "reward 'small'" in err and "cannot read image" in err
    assert len(err.splitlines()) == 1
    assert not out.exists() and not list(root.glob(".scores.jsonl*"))


def test_score_malformed_manifest_line(manifest, capsys):
    root, path, config, _ = manifest
    path.write_text('{"image": "media/0.png"}\n{"imagee": "x.png"}\n')
    assert main(["score", str(config), "-i", str(path), "-o", str(root / "o.jsonl")]) != 0
    err = capsys.readouterr().err
    assert "line 2" in err and "field 'imagee'" in err and "did you mean 'image'" in err
    path.write_text('{"image": "media/0.png"}\nnot json\n')
    assert main(["score", str(config), "-i", str(path), "-o", str(root / "o.jsonl")]) != 0
    assert "line 2" in capsys.readouterr().err


def test_group_preserving_chunks_never_split_a_group():
    samples = [Sample(group_id=g) for g in [1, 2, 1, None, 2, 3, 1, None, 3]]
    chunks = group_preserving_chunks(samples, 2)
    assert sorted(i for c in chunks for i in c) == list(range(9))
    for gid in (1, 2, 3):
        holding = [c for c in chunks if any(samples[i].group_id == gid for i in c)]
        assert len(holding) == 1


def test_list_json_and_table(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == set(entries())
    assert main(["list", "--modality", "audio"]) == 0
    table = capsys.readouterr().out
    assert "dnsmos" in table and "clip_score" not in table


def test_card_and_schema(capsys):
    assert main(["card", "jpeg_compressibility"]) == 0
    assert "# jpeg_compressibility" in capsys.readouterr().out
    assert main(["card", "jpeg_compresibility"]) != 0
    assert "did you mean 'jpeg_compressibility'" in capsys.readouterr().err
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["required"] == ["rewards"]


def test_demo_prints_a_table_for_every_modality(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for word in ("image", "video", "audio", "jpeg_compressibility", "noise"):
        assert word in out


def test_score_with_a_reward_name_uses_the_example_config_of_its_card(manifest):
    root, path, _, media = manifest
    out = root / "by_name.jsonl"
    assert main(["score", "jpeg_incompressibility", "-i", str(path), "-o", str(out), "-q"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kb = [_jpeg_kb(media / f"{i}.png") for i in range(7)]
    np.testing.assert_allclose([r["rewards"]["jpeg_incompressibility"] for r in records], kb, rtol=1e-6)
    assert main(["score", "no_such_reward_or_config", "-i", str(path), "-o", str(out)]) != 0
