"""``rewardzoo fetch`` against a local hub (huggingface_hub's own client, ``HF_ENDPOINT``), a run offline from the
fetched cache, the lock file, revision pins, and a missing weight failing fast with one error that says what to do.

The hub serves a tiny random-init transformers CLIP (PickScore's architecture family) at two commits with different
weights; the commands run as subprocesses from a folder outside the checkout, as a user runs them."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardzoo.core.hub_weights import check_locked, hub_cache_file
from rewardzoo.errors import ConfigError, MissingWeightsError, RewardZooError
from rewardzoo.shared import hub
from rewardzoo.shared.checkpoints import Checkpoint, Remote
from rewardzoo.shared.lockfile import Lock, LockedFile, read_lock, write_lock
from rewardzoo.spec.config import RewardSpec

from .fake_hub import FakeHub

REPO = "tiny-org/pickscore-tiny"
PROCESSOR = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"  # PickScore's default_processor: its configs come along
OLD, NEW = "a" * 40, "b" * 40
#: files of the repository the fetch must leave alone (not weights of this model, not configs)
UNWANTED = {"flax_model.msgpack": b"\0" * 64, "README.md": b"# tiny\n", "extra/other.safetensors": b"x" * 32}
_PROCESSOR_FILES = ("preprocessor_config.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two tiny CLIP directories (the old and the new commit of REPO), the hub serving them, a config pinning the
    old commit, a one-line manifest."""
    from PIL import Image

    from rewardzoo.testing.clip import tiny_hf_clip_dir

    root = tmp_path_factory.mktemp("fetch")
    old = tiny_hf_clip_dir(root / "old", seed=1)
    new = tiny_hf_clip_dir(root / "new", seed=2)
    server = FakeHub()
    server.add(REPO, OLD, {**_files(old), **UNWANTED})
    server.add(REPO, NEW, {**_files(new), **UNWANTED})
    server.add(PROCESSOR, "c" * 40, {n: (old / n).read_bytes() for n in _PROCESSOR_FILES if (old / n).is_file()})
    server.start()
    work = root / "work"
    work.mkdir()
    Image.new("RGB", (40, 40), (200, 40, 90)).save(work / "a.png")
    (work / "m.jsonl").write_text(json.dumps({"image": "a.png", "prompt": "a red square"}) + "\n")
    entry = {"name": "ps", "reward_model": "pickscore", "model_path": REPO, "device": "cpu", "revision": OLD}
    (work / "pinned.yaml").write_text(json.dumps({"rewards": [entry]}))
    entry = {k: v for k, v in entry.items() if k != "revision"}
    (work / "main.yaml").write_text(json.dumps({"rewards": [entry]}))
    yield {"root": root, "old": old, "new": new, "hub": server, "work": work}
    server.stop()


def _run(world, *args, offline: bool, endpoint: str | None = None, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")}
    base.update(HF_ENDPOINT=endpoint or world["hub"].url, HF_HUB_DISABLE_PROGRESS_BARS="1", **env)
    if offline:
        base["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", *args],
        cwd=world["work"],
        env=base,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _direct_score(folder: Path, image: Path) -> float:
    """PickScore of the manifest's one sample with the tiny model loaded from its own local folder."""
    from PIL import Image

    from rewardzoo.rewards.image.pickscore import PickScore

    reward = PickScore(str(folder), device="cpu")
    return float(reward([Image.open(image).convert("RGB")], ["a red square"]).rewards[0])


def test_fetch_downloads_exactly_the_files_verifies_them_and_a_run_loads_them_offline(world, monkeypatch, capsys):
    from huggingface_hub import constants

    from rewardzoo.cli import main

    cache, lock = world["root"] / "cache", world["work"] / "weights.lock"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite's setting, read when it was imported
    monkeypatch.setenv("HF_ENDPOINT", world["hub"].url)
    monkeypatch.chdir(world["work"])
    assert main(["fetch", "pinned.yaml", "--to", str(cache), "--lock", str(lock), "-q"]) == 0
    stdout = capsys.readouterr().out
    assert "model.safetensors" in stdout and "MiB" in stdout  # the plan: files and sizes
    served = dict(world["hub"].commit_of(REPO, OLD)[1])
    wanted = {n for n in served if n not in UNWANTED}
    snapshot = cache / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / OLD
    assert {p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()} == wanted
    locked = {(f.repository, f.file): f for f in read_lock(lock).files}
    for name in wanted:  # the lock states what the hub served at the pinned commit, computed here independently
        item = locked[(REPO, name)]
        assert item.revision == OLD and item.size == len(served[name])
        assert item.sha256 == hashlib.sha256(served[name]).hexdigest()
        assert (snapshot / name).read_bytes() == served[name]
    assert {f for (r, f) in locked if r == PROCESSOR} == {n for n in _PROCESSOR_FILES if (world["old"] / n).is_file()}
    assert "sha256" in stdout and "git blob id" in stdout  # LFS and plain files both verified

    before = len(world["hub"].requests)
    out = world["work"] / "scores.jsonl"
    args = ("score", "pinned.yaml", "--input", "m.jsonl", "--out", str(out), "-q")
    run = _run(world, *args, "--locked", str(lock), offline=True, HF_HOME=str(cache))
    assert run.returncode == 0, run.stderr
    assert len(world["hub"].requests) == before  # offline: not one request
    score = json.loads(out.read_text().splitlines()[0])["rewards"]["ps"]
    image = world["work"] / "a.png"
    assert score == pytest.approx(_direct_score(world["old"], image), rel=1e-5)
    assert score != pytest.approx(_direct_score(world["new"], image), rel=1e-3)  # the pin, not main
    tampered = json.loads(lock.read_text())
    for item in tampered["files"]:  # the weights the entry loads, as if another file had been locked
        if item["file"].endswith(".safetensors"):
            item["sha256"] = "0" * 64
    other = world["work"] / "other.lock"
    other.write_text(json.dumps(tampered))
    refused = _run(world, *args, "--locked", str(other), offline=True, HF_HOME=str(cache))
    assert refused.returncode != 0 and "lock" in refused.stderr  # --locked: only the locked bytes load
    missing = _run(world, *args, "--locked", str(world["work"] / "none.lock"), offline=True, HF_HOME=str(cache))
    assert missing.returncode != 0 and "cannot read the lock file" in missing.stderr


def test_a_missing_weight_fails_fast_with_one_error_that_says_what_to_do(world, tmp_path):
    with socket.socket() as s:  # a port nothing listens on: the hub cannot be reached
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    start = time.perf_counter()
    done = _run(
        world,
        *("score", "main.yaml", "--input", "m.jsonl", "--out", str(tmp_path / "o.jsonl"), "-q"),
        offline=False,
        endpoint=closed,
        HF_HOME=str(tmp_path / "empty"),
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr  # one error, no retry warnings
    error = lines[0]
    for part in ("entry 'ps'", REPO, "rewardzoo fetch", "model_path", "cannot be fetched now"):
        assert part in error
    assert elapsed < 60  # the libraries' retries took 30-60 s per reward; the check makes one attempt


def test_the_check_asks_the_hub_once_and_not_at_all_offline(world, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", world["hub"].url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.forget()
    before = len(world["hub"].requests)
    assert hub.unreachable(REPO, "config.json") == "HF_HUB_OFFLINE is set"
    assert len(world["hub"].requests) == before
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # the suite's conftest sets both
    assert hub.unreachable(REPO, "config.json") is None
    assert hub.unreachable(REPO, "model.safetensors") is None  # kept: no second request
    assert world["hub"].requests[before:] == [("HEAD", f"/{REPO}/resolve/main/config.json")]
    hub.forget()


def test_fetch_refuses_bytes_that_differ_from_the_hubs_checksum(world, tmp_path, monkeypatch):
    from huggingface_hub import constants

    from rewardzoo.jobs.fetch import run_fetch

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", world["hub"].url)
    monkeypatch.chdir(world["work"])
    world["hub"].corrupt.add((REPO, "model.safetensors"))
    try:
        with pytest.raises(MissingWeightsError, match=r"'model\.safetensors' of 'tiny-org/pickscore-tiny' has SHA-256"):
            run_fetch(["main.yaml"], to=str(tmp_path / "c"), lock_path=str(tmp_path / "l.lock"), quiet=True)
    finally:
        world["hub"].corrupt.clear()
    assert not (tmp_path / "l.lock").exists()


def test_a_locked_run_refuses_weights_other_than_the_locked_ones(tmp_path):
    snapshot = tmp_path / "hub" / "models--org--m" / "snapshots" / ("d" * 40)
    snapshot.mkdir(parents=True)
    weights = snapshot / "model.safetensors"
    weights.write_bytes(b"weights")
    assert hub_cache_file(weights) == ("org/m", "model.safetensors")
    part = Checkpoint("org/m", (weights,), remote=Remote("org/m"))
    spec = RewardSpec(name="e", reward_model="pickscore")
    lock = tmp_path / "r.lock"
    digest = hashlib.sha256(b"weights").hexdigest()
    write_lock(lock, Lock([LockedFile("org/m", "d" * 40, "model.safetensors", 7, digest)]))
    check_locked(spec, [part], str(lock))  # the same bytes: accepted
    weights.write_bytes(b"other bytes")
    with pytest.raises(MissingWeightsError, match=r"entry 'e'.*has SHA-256 .* the lock file .* says " + digest):
        check_locked(spec, [part], str(lock))
    write_lock(lock, Lock([LockedFile("org/other", None, "x.bin", 1, digest)]))
    with pytest.raises(MissingWeightsError, match="is not in the lock file"):
        check_locked(spec, [part], str(lock))
    (tmp_path / "bad.lock").write_text("{}")
    with pytest.raises(ConfigError, match="not a rewardzoo lock file"):
        check_locked(spec, [part], str(tmp_path / "bad.lock"))


def test_revisions_from_the_command_line_and_the_cards_note(monkeypatch):
    from rewardzoo.jobs import fetch

    assert fetch.parse_revisions(["v1", "org/m=abc"]) == {None: "v1", "org/m": "abc"}
    with pytest.raises(RewardZooError, match="REPO=REV"):
        fetch.parse_revisions(["=abc"])
    monkeypatch.setattr("rewardzoo.registry.read_card", lambda name: ({"revision": "f" * 40}, ""))
    spec = RewardSpec(name="ps", reward_model="pickscore")
    fetched = [fetch.FileToFetch(fetch.Wanted(repo="o/m", entries=["ps"]), "model.safetensors", "a" * 40, 1)]
    (note,) = fetch.card_revision_notes([spec], fetched)
    assert "entry 'ps'" in note and "f" * 40 in note and "aaaaaaaaaaaa" in note
    fetched[0].commit = "f" * 40
    assert fetch.card_revision_notes([spec], fetched) == []


def test_a_family_resolving_a_hub_file_directly_fails_without_a_request_offline(world):
    from rewardzoo.rewards.models.weights import resolve_weights_file

    hub.forget()
    before = len(world["hub"].requests)
    with pytest.raises(
        MissingWeightsError,
        match=r"cannot fetch 'HPS_v2\.1\.pt' of the hub repository 'nobody/absent' .*"
        r"HF_HUB_OFFLINE is set.*rewardzoo fetch CONFIG.*model_path",
    ):
        resolve_weights_file("nobody/absent", filename="HPS_v2.1.pt")
    assert len(world["hub"].requests) == before


VIDEOALIGN = "KwaiVGI/VideoReward"  # videoalign's default release
QWEN2_VL = "Qwen/Qwen2-VL-2B-Instruct"  # the base its model_config.json names: config and tokenizer only
VA_COMMIT, BASE_COMMIT = "d" * 40, "e" * 40


def test_fetch_downloads_videoalign_s_checkpoint_subfolder_its_config_and_its_base_s_configs(
    tmp_path, monkeypatch, capsys
):
    """VideoAlign reads ``model_config.json`` and ``checkpoint-<highest step>/model.pth`` of its release and the base
    model's config and tokenizer: fetch names and downloads exactly those (not an older step, the optimizer state,
    the base's weights) from the default repositories, and a run from that cache, offline, scores as the release
    loaded from its own folder."""
    import numpy as np
    from huggingface_hub import constants

    from rewardzoo.cli import main
    from rewardzoo.rewards.vlm.videoalign import VideoAlign
    from rewardzoo.shared.video import write_video
    from rewardzoo.testing import tiny_videoalign_release

    released, base, _, _ = tiny_videoalign_release(tmp_path / "va")
    config = json.loads((released / "model_config.json").read_text())
    config["model_config"]["model_name_or_path"] = QWEN2_VL  # as the published release names it
    release = {**_files(released), "model_config.json": json.dumps(config).encode()}
    release.update({"checkpoint-3/model.pth": b"old" * 64, "checkpoint-7/optimizer.pt": b"\0" * 64, "README.md": b"#"})
    base_files = {**_files(base), "model.safetensors": b"\0" * 64, "model.safetensors.index.json": b"{}"}
    server = FakeHub()
    server.add(VIDEOALIGN, VA_COMMIT, release)
    server.add(QWEN2_VL, BASE_COMMIT, base_files)
    server.start()
    try:
        work = tmp_path / "work"
        work.mkdir()
        rng = np.random.default_rng(0)
        write_video(work / "v.mp4", rng.integers(0, 256, (8, 64, 96, 3), dtype="uint8"), fps=4)
        (work / "m.jsonl").write_text(json.dumps({"video": "v.mp4", "prompt": "a cat on a mat"}) + "\n")
        kwargs = {"num_frames": 2, "min_pixels": 56 * 56}
        entry = {"name": "va", "reward_model": "videoalign", "device": "cpu", "kwargs": kwargs}
        (work / "va.yaml").write_text(json.dumps({"rewards": [entry]}))
        cache, lock = tmp_path / "cache", work / "va.lock"
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.chdir(work)
        assert main(["fetch", "va.yaml", "--dry-run", "--lock", str(lock)]) == 0
        planned = capsys.readouterr().out
        wanted = {"model_config.json", "checkpoint-7/model.pth"}
        base_wanted = {n for n in base_files if n not in ("model.safetensors", "model.safetensors.index.json")}
        for name in wanted | base_wanted:
            assert name in planned
        assert "checkpoint-3" not in planned and "optimizer" not in planned and "model.safetensors" not in planned
        assert not cache.exists() and not lock.exists()  # a dry run downloads nothing
        assert main(["fetch", "va.yaml", "--to", str(cache), "--lock", str(lock), "-q"]) == 0
        capsys.readouterr()
        snapshots = {
            repo: cache / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / commit
            for repo, commit in ((VIDEOALIGN, VA_COMMIT), (QWEN2_VL, BASE_COMMIT))
        }
        got = {
            repo: {p.relative_to(s).as_posix() for p in s.rglob("*") if p.is_file()} for repo, s in snapshots.items()
        }
        assert got[VIDEOALIGN] == wanted
        assert got[QWEN2_VL] == {
            n for n in base_files if n not in ("model.safetensors", "model.safetensors.index.json")
        }
        for item in read_lock(lock).files:  # the lock states what the hub served, computed here independently
            served = (release if item.repository == VIDEOALIGN else base_files)[item.file]
            assert item.sha256 == hashlib.sha256(served).hexdigest() and item.size == len(served)
        assert {(f.repository, f.file) for f in read_lock(lock).files} == {
            *((VIDEOALIGN, n) for n in wanted),
            *((QWEN2_VL, n) for n in got[QWEN2_VL]),
        }

        before = len(server.requests)
        out = work / "scores.jsonl"
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE")}
        env.update(HF_HOME=str(cache), HF_HUB_OFFLINE="1", HF_ENDPOINT=server.url, REWARDZOO_LOCK=str(lock))
        run = subprocess.run(
            [sys.executable, "-m", "rewardzoo.cli", "score", "va.yaml", "--input", "m.jsonl", "--out", str(out), "-q"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0, run.stderr
        assert len(server.requests) == before  # offline from the fetched cache: not one request
    finally:
        server.stop()
    score = json.loads(out.read_text().splitlines()[0])["rewards"]["va"]
    direct = VideoAlign(str(released), base_model=str(base), **kwargs)
    assert score == pytest.approx(float(direct(video=[str(work / "v.mp4")], prompt=["a cat on a mat"]).rewards[0]))
