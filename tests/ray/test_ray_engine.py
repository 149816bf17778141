"""``rewardzoo score --engine ray``: identical to local scoring, group-aware, resumable, fault tolerant."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'rewardzoo[ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'rewardzoo[ray]')")

from rewardzoo.cli import main

ROOT = Path(__file__).resolve().parents[2]
JPEG_CONFIG = (
    "rewards:\n  - name: small\n    reward_model: jpeg_compressibility\n    batch_size: 3\n"
    "    applicable_datasets: [a]\n    weight: 2\n  - name: rank\n    reward_model: group_rank\n"
    "    kwargs: {base: jpeg_incompressibility}\n"
)


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    # address="local": a fresh instance, also beside a `ray start` cluster or the address file a stopped one left
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    yield
    ray.shutdown()


@pytest.fixture
def manifest(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "media").mkdir()
    lines = []
    for i in range(11):
        img = (rng.random((20 + i, 24, 3)) ** (i % 4 + 1) * 255).astype(np.uint8)
        Image.fromarray(img).save(tmp_path / "media" / f"{i}.png")
        lines.append(
            {"image": f"media/{i}.png", "prompt": "p" * i, "dataset": "a" if i % 3 else "b", "group_id": i % 2}
        )
    path = tmp_path / "samples.jsonl"  # a blank line: sample 4 sits on line 6
    path.write_text("\n".join(json.dumps(x) for x in lines[:4]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[4:]))
    config = tmp_path / "cfg.yaml"
    config.write_text(JPEG_CONFIG)
    return tmp_path, path, config


def _score(config, path, out, *extra) -> int:
    return main(["score", str(config), "--input", str(path), "--out", str(out), "-q", *map(str, extra)])


def test_ray_equals_local_bit_for_bit_with_groups_larger_than_a_chunk(manifest, capsys):
    root, path, config = manifest
    assert _score(config, path, root / "local.jsonl", "--chunk-size", 2) == 0
    assert _score(config, path, root / "ray.jsonl", "--chunk-size", 2, "--engine", "ray", "--actors", 2) == 0
    assert (root / "ray.jsonl").read_bytes() == (root / "local.jsonl").read_bytes()
    err = capsys.readouterr().err
    assert "scored 11 rows" in err and "rows/s" in err
    assert not (root / "ray.jsonl.partial.jsonl").exists()


def test_parquet_output_has_a_column_per_reward_total_applied_and_index(manifest):
    import pyarrow.parquet as pq

    root, path, config = manifest
    assert _score(config, path, root / "local.jsonl") == 0
    assert _score(config, path, root / "ray.parquet", "--engine", "ray", "--actors", 2) == 0
    table = pq.read_table(root / "ray.parquet").to_pylist()
    local = [json.loads(line) for line in (root / "local.jsonl").read_text().splitlines()]
    assert [row["index"] for row in table] == list(range(11))
    for row, rec in zip(table, local):
        assert {k: row[k] for k in ("small", "rank")} == rec["rewards"]
        assert row["total"] == rec["total"] and row["applied"] == rec["applied"]


def test_bad_row_names_line_field_and_reward_and_writes_nothing(manifest, capsys):
    root, path, config = manifest
    (root / "media" / "4.png").write_bytes(b"garbage")
    out = root / "scores.jsonl"
    assert _score(config, path, out, "--engine", "ray", "--actors", 2) != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "line 6" in err and "field 'image'" in err and "reward 'small'" in err and "cannot read image" in err
    assert not out.exists()


def test_a_raising_reward_fails_the_job_without_retrying_forever(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": "p" * i}) for i in range(4)) + "\n")
    config = tmp_path / "cfg.yaml"
    config.write_text(
        "rewards:\n  - name: bad\n    reward_model: tests.no_extras.rewards:Broken\n    kwargs: {mode: raise}\n"
    )
    assert _score(config, path, tmp_path / "o.jsonl", "--engine", "ray") != 0
    err = capsys.readouterr().err
    assert "reward 'bad'" in err and "ZeroDivisionError: boom" in err and "line 1" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_dying_actor_is_restarted_and_every_row_scored_once(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": "p" * i}) for i in range(12)) + "\n")
    config = tmp_path / "cfg.yaml"
    marker = tmp_path / "killed"
    config.write_text(
        f"rewards:\n  - name: len\n    reward_model: tests.ray.rewards:KillOnce\n"
        f"    kwargs: {{marker: {str(marker)!r}}}\n"
    )
    out = tmp_path / "o.jsonl"
    assert _score(config, path, out, "--engine", "ray", "--actors", 2, "--chunk-size", 3) == 0
    assert marker.exists()  # an actor did die
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["rewards"]["len"] for r in records] == [float(i) for i in range(12)]


def test_resume_after_killing_the_driver_equals_a_local_run(tmp_path, capsys):
    n = 16
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": "p" * i, "group_id": i // 4}) for i in range(n)) + "\n")
    config = tmp_path / "cfg.yaml"
    config.write_text(
        "rewards:\n  - name: len\n    reward_model: tests.ray.rewards:SlowLength\n"
        "    kwargs: {delay: 0.4}\n  - name: rank\n    reward_model: group_rank\n"
        "    kwargs: {base: tests.no_extras.rewards:PromptLength}\n"
    )
    out = tmp_path / "ray.jsonl"
    partial = tmp_path / "ray.jsonl.partial.jsonl"
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rewardzoo.cli",
            "score",
            str(config),
            "-i",
            str(path),
            "-o",
            str(out),
            "-q",
            "--engine",
            "ray",
            "--chunk-size",
            "1",
            "--address",
            address,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and driver.poll() is None:
            if partial.exists() and len(partial.read_text().splitlines()) >= 8:
                break
            time.sleep(0.05)
        assert driver.poll() is None, "the driver finished before it could be interrupted"
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
    kept = len(partial.read_text().splitlines()) - 1  # its first line is the job's fingerprint
    assert 8 <= kept < n and not out.exists()
    other = tmp_path / "other.yaml"  # another job's partial rows are never taken: refused, naming what differs
    other.write_text(config.read_text().replace("delay: 0.4", "delay: 0.3"))
    before = partial.read_bytes()
    assert _score(other, path, out, "--engine", "ray", "--chunk-size", 1, "--resume") == 2
    assert "was written by another job: the config's reward entries" in capsys.readouterr().err
    assert partial.read_bytes() == before and not out.exists()
    assert _score(config, path, out, "--engine", "ray", "--chunk-size", 1, "--resume") == 0
    err = capsys.readouterr().err
    assert f"scored {n - kept} rows ({kept} resumed)" in err
    assert _score(config, path, tmp_path / "local.jsonl", "--chunk-size", 1) == 0
    assert out.read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert not partial.exists()


def test_a_manifest_named_like_the_partial_file_is_refused_and_kept(manifest, tmp_path):
    _root, path, config = manifest
    named = tmp_path / "o.jsonl.partial.jsonl"
    named.write_bytes(path.read_bytes())
    assert _score(config, named, tmp_path / "o.jsonl", "--engine", "ray") == 2
    assert named.read_bytes() == path.read_bytes() and not (tmp_path / "o.jsonl").exists()


def test_score_dataset_returns_a_ray_dataset(manifest):
    from rewardzoo.ray import score_dataset

    root, path, config = manifest
    assert _score(config, path, root / "local.jsonl", "--chunk-size", 3) == 0
    ds = score_dataset(path, config, chunk_size=3, actors=2)
    rows = sorted(ds.take_all(), key=lambda r: r["index"])
    local = [json.loads(line) for line in (root / "local.jsonl").read_text().splitlines()]
    assert [json.loads(r["record"]) for r in rows] == local
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for line in lines:
        line["image"] = str(root / line["image"])
    rows = sorted(score_dataset(ray.data.from_items(lines), config, chunk_size=3).take_all(), key=lambda r: r["index"])
    assert [json.loads(r["record"]) for r in rows] == local
    for line in lines:  # encoded image bytes in the Dataset's rows
        line["image"] = Path(line["image"]).read_bytes()
    rows = sorted(score_dataset(ray.data.from_items(lines), config, chunk_size=3).take_all(), key=lambda r: r["index"])
    assert [json.loads(r["record"]) for r in rows] == local


@pytest.mark.parametrize("media", ["paths", "bytes"])
def test_parquet_input_with_paths_or_encoded_bytes_equals_local(manifest, media, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root, path, config = manifest
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if media == "bytes":
        for row in rows:
            row["image"] = (root / row["image"]).read_bytes()
    pq.write_table(pa.Table.from_pylist(rows), root / "in.parquet")
    assert _score(config, path, root / "local.jsonl", "--chunk-size", 4) == 0
    assert _score(config, root / "in.parquet", root / "ray.jsonl", "--chunk-size", 4, "--engine", "ray") == 0
    assert (root / "ray.jsonl").read_bytes() == (root / "local.jsonl").read_bytes()
    if media == "bytes":  # a bad row is named by its row index, field and reward
        rows[3]["image"] = b"garbage"
        pq.write_table(pa.Table.from_pylist(rows), root / "bad.parquet")
        assert _score(config, root / "bad.parquet", root / "bad.jsonl", "--engine", "ray") != 0
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "row 3" in err and "field 'image'" in err and "cannot read image" in err
        assert not (root / "bad.jsonl").exists()


def test_parquet_video_and_audio_bytes_equal_local_paths(tmp_path):
    """Encoded video and audio bytes (the media the manifest supports besides images) score as their files do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pytest.importorskip("av", reason="the video extra is not installed")
    sf = pytest.importorskip("soundfile", reason="the audio extra is not installed")

    from rewardzoo.shared.video import write_video

    rng = np.random.default_rng(1)
    lines = []
    for i in range(4):
        write_video(tmp_path / f"{i}.mp4", (rng.random((4, 16, 16, 3)) * 255).astype(np.uint8), fps=4)
        clean = rng.standard_normal(800).astype(np.float32) * 0.1
        sf.write(tmp_path / f"{i}.wav", clean + 0.01 * (i + 1) * rng.standard_normal(800).astype(np.float32), 8000)
        sf.write(tmp_path / f"ref{i}.wav", clean, 8000)
        lines.append({"video": f"{i}.mp4", "audio": f"{i}.wav", "condition_audio": f"ref{i}.wav"})
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    config = tmp_path / "cfg.yaml"
    config.write_text(
        "rewards:\n  - name: flicker\n    reward_model: video_temporal_flickering\n"
        "  - name: sdr\n    reward_model: si_sdr\n"
    )
    rows = [{k: (tmp_path / v).read_bytes() for k, v in line.items()} for line in lines]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet", row_group_size=3)  # two row groups
    assert _score(config, path, tmp_path / "local.jsonl", "--chunk-size", 2) == 0
    assert _score(config, tmp_path / "in.parquet", tmp_path / "ray.jsonl", "--chunk-size", 2, "--engine", "ray") == 0
    local = (tmp_path / "local.jsonl").read_text()
    assert (tmp_path / "ray.jsonl").read_text() == local
    assert all(r["applied"] == ["flicker", "sdr"] for r in map(json.loads, local.splitlines()))


def test_encoded_media_in_rows_become_files_with_the_same_bytes(tmp_path):
    from rewardzoo.ray.inputs import decoded

    png = tmp_path / "a.png"
    Image.fromarray(np.zeros((4, 4, 3), dtype=np.uint8)).save(png)
    row = decoded(
        {"image": png.read_bytes(), "condition_images": [b"one", "x.png"], "audio": b"RIFF", "prompt": "p"},
        0,
        str(tmp_path),
    )
    assert Path(row["image"]).read_bytes() == png.read_bytes()  # decoded where a local run decodes a file
    assert Path(row["condition_images"][0]).read_bytes() == b"one" and row["condition_images"][1] == "x.png"
    assert Path(row["audio"]).read_bytes() == b"RIFF" and row["prompt"] == "p"


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bars_on_a_terminal_unless_quiet_and_a_final_line(manifest, capsys, monkeypatch, quiet):
    import re

    root, path, config = manifest
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # as on a terminal
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = not quiet  # the opposite of what the run must set
    args = ["score", str(config), "-i", str(path), "-o", str(root / "o.jsonl"), "--engine", "ray"]
    assert main(args + (["-q"] if quiet else [])) == 0
    assert ctx.enable_progress_bars is (not quiet) and ctx.enable_operator_progress_bars is (not quiet)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    found = re.fullmatch(
        r"rewardzoo: scored (\d+) rows \((\d+) resumed\) in ([\d.]+) s, ([\d.]+) rows/s, "
        r"on the running Ray session",
        last,
    )  # this module's instance: none started, none stopped
    assert found, last
    rows, resumed, wall, rate = int(found[1]), int(found[2]), float(found[3]), float(found[4])
    assert (rows, resumed) == (11, 0) and wall > 0 and abs(rate - rows / wall) <= 0.05 * rate + 0.1


def test_report_with_engine_ray_is_the_local_report(manifest):
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    pytest.importorskip("scipy", reason="the report extra is not installed")
    root, path, config = manifest
    (root / "local").mkdir()
    (root / "ray").mkdir()  # the same score file name in both (the report shows it)
    assert _score(config, path, root / "local" / "s.jsonl", "--report", root / "local" / "r.html") == 0
    assert _score(config, path, root / "ray" / "s.jsonl", "--engine", "ray", "--report", root / "ray" / "r.html") == 0
    # what two runs of one report differ in: the time, the folder, matplotlib's random SVG ids
    strip = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?|/(local|ray)/|\b(m|p|image)[0-9a-f]{10}\b")
    ray_html, local_html = (root / "ray" / "r.html").read_text(), (root / "local" / "r.html").read_text()
    assert strip.sub("", ray_html) == strip.sub("", local_html)
    assert _score(config, path, root / "x.parquet", "--engine", "ray", "--report", root / "x.html") != 0
    assert not (root / "x.parquet").exists()


def test_parquet_bytes_outside_the_media_columns_are_refused_before_scoring(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"prompt": b"abc"}]), tmp_path / "in.parquet")
    config = tmp_path / "cfg.yaml"
    config.write_text("rewards:\n  - name: len\n    reward_model: tests.no_extras.rewards:PromptLength\n")
    assert _score(config, tmp_path / "in.parquet", tmp_path / "o.jsonl", "--engine", "ray") != 0
    err = capsys.readouterr().err
    assert "column 'prompt' holds bytes" in err and "image, video, audio" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_reward_the_loader_refuses_fails_with_the_local_message(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"prompt": "p"}) + "\n")
    config = tmp_path / "cfg.yaml"
    config.write_text("rewards:\n  - name: bad\n    reward_model: tests.no_extras.rewards:NoSuchReward\n")
    assert _score(config, path, tmp_path / "local.jsonl") != 0
    local = capsys.readouterr().err.strip().splitlines()[-1]
    assert _score(config, path, tmp_path / "ray.jsonl", "--engine", "ray") != 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == local
    assert "NoSuchReward" in local and not (tmp_path / "ray.jsonl").exists()


def test_an_entry_in_its_own_environment_scores_under_ray_actors_as_locally(manifest):
    """Each actor starts the entry's worker (a child of the actor's process) and scores through it."""
    root, path, _ = manifest
    config = root / "worker.yaml"
    config.write_text(
        "rewards:\n  - name: bright\n    reward_model: tests.environments.worker_rewards:Brightness\n"
        f"    device: cpu\n    environment: {{python: {sys.executable}}}\n"
    )
    assert _score(config, path, root / "local.jsonl") == 0
    assert _score(config, path, root / "ray.jsonl", "--engine", "ray", "--actors", 2) == 0
    local = [json.loads(line) for line in (root / "local.jsonl").read_text().splitlines()]
    remote = [json.loads(line) for line in (root / "ray.jsonl").read_text().splitlines()]
    assert [r["rewards"] for r in remote] == [r["rewards"] for r in local]
    from tests.environments.worker_rewards import brightness

    images = [Image.open(root / "media" / f"{i}.png").convert("RGB") for i in range(11)]
    np.testing.assert_allclose([r["rewards"]["bright"] for r in local], brightness(images), rtol=1e-6)


def test_an_edit_rows_source_and_mask_arrive_as_encoded_bytes(tmp_path):
    """A Ray row of an edit (condition_images = [source, mask] as Parquet bytes) scores as the files do locally,
    and as scikit-image's PSNR outside the mask says."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pytest.importorskip("skimage")
    from tests.image.media import edit_files

    rows, want = edit_files(tmp_path, n=4)
    (tmp_path / "edits.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    config = tmp_path / "cfg.yaml"
    config.write_text("rewards:\n  - name: edit_preservation\n    kwargs: {metric: psnr}\n")
    encoded = [
        {
            **r,
            "image": (tmp_path / r["image"]).read_bytes(),
            "condition_images": [(tmp_path / c).read_bytes() for c in r["condition_images"]],
        }
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(encoded), tmp_path / "edits.parquet")
    assert _score(config, tmp_path / "edits.jsonl", tmp_path / "local.jsonl") == 0
    assert (
        _score(config, tmp_path / "edits.parquet", tmp_path / "bytes.jsonl", "--engine", "ray", "--chunk-size", 2) == 0
    )
    local = (tmp_path / "local.jsonl").read_bytes()
    assert (tmp_path / "bytes.jsonl").read_bytes() == local
    got = [json.loads(line)["rewards"]["edit_preservation"] for line in local.decode().splitlines()]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_ids_metadata_and_extras_equal_local_in_jsonl_parquet_and_after_a_resume(tmp_path, capsys):
    """Issue 50: the Ray engine writes the local rows (id, metadata, --extras) as JSONL and as Parquet, and a
    resumed Ray run writes the rows of an uninterrupted local one."""
    import pyarrow.parquet as pq

    armed = tmp_path / "armed"
    config = tmp_path / "c.yaml"
    config.write_text(
        "rewards:\n  - name: words\n    reward_model: tests.no_extras.rewards:Spelled\n"
        f"    kwargs: {{armed: {json.dumps(str(armed))}, trip: sea}}\n"
    )
    prompts = ["an owl", "quiet night", "sea", "a long prompt", "rain", "sun"]
    lines = [{"id": f"r{k}", "prompt": p, "metadata": {"k": k}} for k, p in enumerate(prompts)]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    common = ("--chunk-size", 2, "--extras")
    assert _score(config, path, tmp_path / "local.jsonl", *common) == 0
    assert _score(config, path, tmp_path / "local.parquet", *common) == 0
    assert _score(config, path, tmp_path / "ray.parquet", *common, "--engine", "ray") == 0
    assert pq.read_table(tmp_path / "ray.parquet").equals(pq.read_table(tmp_path / "local.parquet"))
    armed.touch()
    assert _score(config, path, tmp_path / "ray.jsonl", *common, "--engine", "ray") == 2
    assert "interrupted on purpose" in capsys.readouterr().err
    armed.unlink()
    assert _score(config, path, tmp_path / "ray.jsonl", *common, "--engine", "ray", "--resume") == 0
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    rows = [json.loads(x) for x in (tmp_path / "ray.jsonl").read_text().splitlines()]
    assert [(r["id"], r["metadata"], r["extras"]["words"]["shout"]) for r in rows] == [
        (x["id"], x["metadata"], x["prompt"].upper()) for x in lines
    ]
