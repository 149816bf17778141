"""Rewards in worker processes: the same scores as in process, under the processor, the async runner and the
TRL adapter; one worker per environment; facts from the worker; lifecycle (restart, close, exit, parent death,
Ctrl-C, SIGTERM drain). The workers run this interpreter (``environment: {python: sys.executable}``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import rewardzoo
from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.environments.reward import WorkerReward

from .conftest import HERE, REPO, alive, gone_within, here_env, needs_linux, worker_pids
from .worker_rewards import brightness

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]


def _images(n: int, size: int = 64, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (size, size + 8, 3), dtype=np.uint8) for _ in range(n)]


def _samples(images, dataset=None):
    return [rewardzoo.Sample(image=img, prompt=f"p{i}", dataset=dataset) for i, img in enumerate(images)]


def test_scores_come_from_the_worker_and_equal_the_computation_in_process():
    images = _images(5) + _images(2, size=256, seed=1)  # small ones in the frame, large ones in shared memory
    config = load_config(
        {
            "rewards": [
                {
                    "name": "bright",
                    "reward_model": f"{HERE}:Brightness",
                    "device": "cpu",
                    "environment": here_env(),
                    "batch_size": 3,
                },
                {"name": "local", "reward_model": f"{HERE}:Brightness", "device": "cpu"},
            ]
        }
    )
    with RewardProcessor(config.rewards) as processor:
        result = processor(_samples(images))
        worker = processor.rewards["bright"].worker
        assert worker.pid is not None and worker.pid != os.getpid()
        np.testing.assert_allclose(result.rewards["bright"], brightness(images), rtol=1e-6)
        np.testing.assert_array_equal(result.rewards["bright"], result.rewards["local"])
        assert set(result.extras["bright"]["pid"]) == {float(worker.pid)}
        assert set(result.extras["local"]["pid"]) == {float(os.getpid())}
        assert list(result.extras["bright"]["device"]) == ["cpu"] * 7  # the entry's device, resolved in the worker
        assert worker._shared is not None and worker._shared.size >= 2 * 256 * 264 * 3  # the large ones went there


def test_the_socket_only_path_scores_the_same():
    images = _images(2, size=256, seed=2)
    reward = RewardLoader().load(
        {
            "name": "b",
            "reward_model": f"{HERE}:Brightness",
            "device": "cpu",
            "environment": here_env(shared_memory=False),
        }
    )
    try:
        out = reward(image=images, prompt=["a", "b"])
        np.testing.assert_allclose(out.rewards, brightness(images), rtol=1e-6)
        assert reward.worker._shared is None
    finally:
        reward.close()


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd")
def test_a_shared_memory_array_past_the_first_4_gib_is_read_in_place_by_the_worker():
    from rewardzoo.environments.channel import SharedView
    from rewardzoo.transport.wire import decode_image, dumps, loads

    # a parent's buffer of 4 GiB + 64 KiB, sparse (only the page written takes memory), an array past 2**32
    fd = os.memfd_create("rewardzoo-test")
    os.ftruncate(fd, 2**32 + 2**16)
    pixels = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    os.pwrite(fd, pixels.tobytes(), 2**32 + 8)
    shm = {"format": "raw", "dtype": "uint8", "shape": [16, 16, 3], "data": {"shm": [2**32 + 8, pixels.nbytes]}}
    message = loads(dumps({"op": "score", "image": shm}, "msgpack"), "msgpack")  # the frame's 64-bit offset
    view = SharedView()
    view.adopt([fd])
    np.testing.assert_array_equal(decode_image(view.unpack(message)["image"]), pixels)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd")
def test_arrays_in_shared_segments_are_passed_as_their_segments_and_the_others_copied():
    from rewardzoo.environments.channel import SharedBuffer, SharedView
    from rewardzoo.shared import sharedmem
    from rewardzoo.transport.wire import decode_image, decode_video, dumps, loads, raw_array

    rng = np.random.default_rng(4)
    with sharedmem.shared_arrays():
        video = sharedmem.empty((4, 320, 320, 3))  # 1.2 MB: a segment of its own
    video[:] = rng.integers(0, 256, video.shape, dtype=np.uint8)
    plain = rng.integers(0, 256, (200, 200, 3), dtype=np.uint8)  # ordinary memory: copied
    request = {"samples": [{"video": raw_array(video[1:]), "image": raw_array(plain)}]}
    buffer = SharedBuffer()
    try:
        packed, fds, segments = buffer.pack(request)
        assert segments == 1 and len(fds) == 2 and fds[-1] == sharedmem.segment_of(video.data)[0].fd
        assert packed["samples"][0]["video"]["data"] == {"shm": [video[0].nbytes, video[1:].nbytes, 0]}
        assert packed["samples"][0]["image"]["data"] == {"shm": [0, plain.nbytes]}
        assert buffer.size < video.nbytes  # the buffer holds the plain array only
        message = loads(dumps(packed, "msgpack"), "msgpack")
        view = SharedView()
        view.adopt([os.dup(fd) for fd in fds], segments)  # (the worker receives its own descriptors)
        sample = view.unpack(message)["samples"][0]
        np.testing.assert_array_equal(decode_video(sample["video"]), video[1:])
        np.testing.assert_array_equal(decode_image(sample["image"]), plain)
        with pytest.raises(ValueError, match="outside"):
            view.unpack({"data": {"shm": [0, 1, 1]}})  # no second segment came with it
        dup = os.dup(fds[0])
        with pytest.raises(ValueError, match="2 shared segments but carries 1"):
            view.adopt([dup], 2)
        with pytest.raises(OSError):
            os.fstat(dup)  # closed, not leaked
    finally:
        buffer.close()


def test_decoded_files_go_to_the_worker_in_their_own_shared_segments_not_copied(tmp_path):
    from PIL import Image

    from rewardzoo.shared import sharedmem

    images = _images(3, size=720, seed=3)  # 720x728 RGB: 1.5 MiB decoded, past sharedmem.MIN_BYTES
    paths = []
    for i, img in enumerate(images):
        Image.fromarray(img).save(tmp_path / f"{i}.png", compress_level=1)
        paths.append(str(tmp_path / f"{i}.png"))
    before = sharedmem.live_segments()
    entry = {"name": "b", "reward_model": f"{HERE}:Brightness", "device": "cpu", "environment": here_env()}
    with RewardProcessor([entry]) as processor:
        result = processor([rewardzoo.Sample(image=p, prompt="p") for p in paths])
        np.testing.assert_allclose(result.rewards["b"], brightness(images), rtol=1e-6)
        shared = processor.rewards["b"].worker._shared
        assert shared is not None and shared.size == 0  # nothing copied into the channel's buffer
        assert sharedmem.live_segments() == before  # the segments went with the arrays


def test_entries_with_one_environment_share_one_worker_and_facts_come_from_it():
    env = here_env()
    config = load_config(
        {
            "environment": env,
            "rewards": [
                {"name": "bright", "reward_model": f"{HERE}:Brightness", "kwargs": {"offset": 0.5}, "device": "cpu"},
                {"name": "centred", "reward_model": f"{HERE}:Centred", "device": "cpu"},
                {"name": "in_process", "reward_model": f"{HERE}:Length", "environment": None},
            ],
        }
    )
    assert config.rewards[2].environment is None and config.rewards[0].environment == config.rewards[1].environment
    with RewardProcessor(config.rewards) as processor:
        bright, centred, local = (processor.rewards[n] for n in ("bright", "centred", "in_process"))
        assert isinstance(bright, WorkerReward) and isinstance(centred, WorkerReward)
        assert not isinstance(local, WorkerReward)
        assert bright.worker is centred.worker and len(worker_pids()) == 1
        assert (bright.kind, centred.kind) == ("pointwise", "groupwise")
        assert bright.info.higher_is_better is False and bright.info.score_range == (0.0, 2.0)  # the class's, there
        assert set(bright.inputs.fields) == {"image", "prompt"}
        assert set(centred.inputs.fields) == {"completion", "group_id"}
        samples = [
            rewardzoo.Sample(image=img, prompt="x", completion="a" * (i + 1), group_id=i // 2)
            for i, img in enumerate(_images(4))
        ]
        result = processor(samples)
        np.testing.assert_allclose(result.rewards["bright"], brightness([s.image for s in samples]) + 0.5, rtol=1e-6)
        np.testing.assert_allclose(result.rewards["centred"], [-0.5, 0.5, -0.5, 0.5])
    assert worker_pids() == set()  # close() stopped the worker


def test_async_runner_and_the_trl_adapter_score_through_workers():
    from rewardzoo.integrations import trl_reward_funcs

    config = {
        "rewards": [
            {
                "name": "bright",
                "reward_model": f"{HERE}:Brightness",
                "async_reward": True,
                "device": "cpu",
                "environment": here_env(),
                "batch_size": 2,
            },
            {"name": "length", "reward_model": f"{HERE}:Length", "device": "cpu", "environment": here_env()},
        ]
    }
    images = _images(5)
    with RewardProcessor(load_config(config).rewards[:1]) as processor:
        with processor.incremental(timeout=60) as runner:
            runner.add(_samples(images[:3]))
            runner.add(_samples(images[3:]))
            result = runner.finalize()
        np.testing.assert_allclose(result.rewards["bright"], brightness(images), rtol=1e-6)
    loader = RewardLoader()
    funcs, weights = trl_reward_funcs(config, loader=loader)
    try:
        scores = funcs[1](prompts=["q", "q"], completions=["abc", "de"])
        assert scores == [3.0, 2.0] and weights == [1.0, 1.0]
    finally:
        loader.close()


def test_a_worker_that_dies_mid_call_is_restarted_counted_and_the_call_retried(tmp_path, caplog):
    marker = tmp_path / "died"
    reward = RewardLoader().load(
        {
            "name": "flaky",
            "reward_model": f"{HERE}:DiesOnce",
            "kwargs": {"marker": str(marker)},
            "device": "cpu",
            "environment": here_env(),
        }
    )
    try:
        first = reward.worker.pid
        images = _images(2, size=256, seed=4)  # in shared memory: the retry sends them again, to the new worker
        with caplog.at_level("WARNING", logger="rewardzoo.environments"):
            scores = reward(image=images).rewards  # died, restarted, retried
        np.testing.assert_allclose(scores, brightness(images), rtol=1e-6)
        assert marker.exists() and reward.worker.restarts == 1 and reward.worker.pid not in (None, first)
        assert not alive(first)
        assert "restart 1 of at most 3" in caplog.text and "exit status 7" in caplog.text
    finally:
        reward.close()


def test_close_and_exit_stop_the_worker():
    reward = RewardLoader().load(
        {"name": "b", "reward_model": f"{HERE}:Length", "device": "cpu", "environment": here_env()}
    )
    pid = reward.worker.pid
    reward.close()
    assert gone_within(pid, 1)
    script = textwrap.dedent(f"""
        import sys
        from rewardzoo.core.loader import RewardLoader
        reward = RewardLoader().load({{"name": "b", "reward_model": "{HERE}:Length",
                                       "device": "cpu", "environment": {{"python": sys.executable}}}})
        print(reward.worker.pid, flush=True)
    """)  # the script ends without closing anything: atexit stops the worker
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(REPO)])},
    )
    assert done.returncode == 0, done.stderr
    assert gone_within(int(done.stdout.split()[-1]), 2)


_PARENT = """
import os, signal, sys, threading, time
from rewardzoo.core.loader import RewardLoader
def entry(timeout):  # two timeouts: two environments, two workers
    return {{"name": "b", "reward_model": "{here}:{cls}", "device": "cpu", "kwargs": {kwargs},
             "environment": {{"python": sys.executable, "start_timeout_s": timeout}}}}
held = [RewardLoader().load(entry(60))]  # from the main thread: parent-death signal and watched pipe
if {two}:
    t = threading.Thread(target=lambda: held.append(RewardLoader().load(entry(61))))
    t.start(); t.join()  # from another thread: no parent-death signal (it follows the thread), the pipe alone
holder = held
print(*(r.worker.pid for r in held), flush=True)
print(*(r.worker._folder for r in held), flush=True)
{then}
"""


def _parent(cls: str, then: str, *, kwargs: str = "{}", two: bool = False) -> subprocess.Popen:
    script = _PARENT.format(here=HERE, cls=cls, kwargs=kwargs, then=then, two=two)
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(REPO)])},
    )


def test_a_sigkilled_parent_takes_its_workers_with_it():
    parent = _parent("Length", "time.sleep(120)", two=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        folders = [Path(f) for f in parent.stdout.readline().split()]
        assert len(set(pids)) == 2 and all(alive(p) for p in pids), parent.stderr.read() if not pids else ""
        assert all(f.is_dir() for f in folders)
        parent.kill()
        parent.wait(10)
        assert [gone_within(p, 5) for p in pids] == [True, True], "a worker outlived its SIGKILLed parent"
        assert [f.exists() for f in folders] == [False, False]  # each worker removed the folder its parent made
    finally:
        parent.kill()


def test_keyboard_interrupt_during_a_call_stops_the_worker():
    then = (  # Ctrl-C's handler first: a parent started in the background by a shell inherits SIGINT ignored
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "try:\n    holder[0](image=[__import__('numpy').zeros((8, 8, 3), 'uint8')], prompt=['x'])\n"
        "except KeyboardInterrupt:\n    print('interrupted', holder[0].worker.pid, flush=True)\n"
    )
    parent = _parent("Brightness", then, kwargs="{'delay_s': 60}")
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        parent.stdout.readline()  # the folders line: read here, or communicate() sees it only when it came late
        out, err = parent.communicate(timeout=30)
        assert out.split() == ["interrupted", "None"], err  # the worker was stopped before the exception left
        assert gone_within(pids[0], 2)
    finally:
        parent.kill()


def test_sigterm_drains_a_call_in_flight_then_the_worker_exits_0():
    reward = RewardLoader().load(
        {
            "name": "slow",
            "reward_model": f"{HERE}:Brightness",
            "kwargs": {"delay_s": 1.5},
            "device": "cpu",
            "environment": here_env(),
        }
    )
    try:
        process = reward.worker._proc
        images = _images(2)
        answers = []
        call = threading.Thread(target=lambda: answers.append(reward(image=images, prompt=["a", "b"])))
        call.start()
        time.sleep(0.7)  # the call is in flight in the worker
        os.kill(process.pid, signal.SIGTERM)
        call.join(30)
        np.testing.assert_allclose(answers[0].rewards, brightness(images), rtol=1e-6)
        assert process.wait(10) == 0
        assert reward.worker.restarts == 0
    finally:
        reward.close()
