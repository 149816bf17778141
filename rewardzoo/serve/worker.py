"""A worker's main: ``python -m rewardzoo.serve.worker --address ADDR [--watch-fd N]``, in the
environment's interpreter. A front door, like ``serve``: it builds the entries it is sent with a
:class:`~rewardzoo.serve.service.RewardService` (one loader: equal models are built once) and answers score
messages (:mod:`rewardzoo.environments.channel`) with the same response maps the server sends.

It connects to the parent at ``ADDR`` (a Unix socket path, or ``tcp:127.0.0.1:PORT``) and proves itself with the
token in ``$REWARDZOO_WORKER_TOKEN``. It never outlives the parent: the watched pipe ``--watch-fd`` reaches end of
file when the parent dies (however it dies), and on Linux a parent-death signal (SIGTERM) is asked for too; a
worker whose parent died removes the private folder the parent made for it and kills its own process group (what
its rewards started); the parent kills that group when it stops or restarts the worker. The parent stops it by closing the
connection. Ctrl-C goes to the parent (which stops the worker); SIGTERM drains: a call in flight finishes and is
answered, then exit 0 (after a moment's wait, up to 2 s, to tell a dying parent from a live one).

On Linux the process the parent starts is a guardian (:func:`guard_descendants`): a child subreaper that forks the
worker and outlives it, so that whatever the worker's rewards started, a process that left the worker's session
included, is reparented to the guardian when its own parent dies and is ended when the worker ends, however the
worker ends (SIGKILL and the OOM killer included). The guardian forwards SIGTERM to the worker and exits with the
worker's status.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import Any

from ..core.loader import RewardLoader
from ..core.resolve import parse_specs
from ..environments.channel import Channel, ChannelClosed, SharedView
from ..errors import ConfigError, InputError, RegistryError, RewardOutputError
from ..spec.config import RewardConfig
from ..spec.sample import samples_of
from ..transport.wire import WireLimits, decode_request_map
from .service import RewardService

_OPEN = WireLimits(
    max_request_bytes=None,
    max_samples=None,
    max_pixels=None,
    max_request_pixels=None,
    max_frames=None,
    max_audio_seconds=None,
)  # the rewards' own limits apply, in their engine


class _State:
    busy = False
    stopping = False
    parent = os.getppid()
    watch_fd: int | None = None
    folder: str | None = None  # the parent's private folder of this worker (its socket), removed if it dies first
    cleaning = False  # tearing down after the parent died: a SIGTERM (the parent-death signal) must not cut it short


def _parent_gone() -> bool:
    """This worker was reparented, or the watched pipe is at end of file (the parent's end closed: it died); after
    a SIGTERM it waits a moment for the pipe (the parent's files may close a little after its death)."""
    if os.getppid() != _State.parent:  # reparented: the parent process is gone
        return True
    if _State.watch_fd is None:
        return False
    try:
        readable, _, _ = select.select([_State.watch_fd], [], [], 2.0 if _State.stopping else 0)
        return bool(readable) and os.read(_State.watch_fd, 1) == b""
    except OSError:
        return True


def _clean_up_after_parent(gone: bool = False) -> None:
    """A parent that died (SIGKILL) could not remove this worker's folder nor stop what its rewards started: the
    worker does both (the second ends this process too)."""
    _State.cleaning = True  # past here a SIGTERM changes nothing: this worker is ending either way
    if gone or _parent_gone():
        if _State.folder is not None:
            shutil.rmtree(_State.folder, ignore_errors=True)
        _kill_own_group()


def _kill_own_group() -> None:
    """SIGKILL this worker's process group (the parent started it as the leader of its own): the processes its
    rewards started, and this one."""
    if os.name == "posix" and os.getpgrp() == os.getpid():
        sys.stderr.flush()
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _on_term(signum: int, frame: Any) -> None:
    _State.stopping = True
    if not _State.busy and not _State.cleaning:
        raise SystemExit(0)


def _watch(fd: int) -> None:
    """End of file on the parent's pipe: the parent is gone, so is this worker."""
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    _clean_up_after_parent(gone=True)
    os._exit(0)


def _parent_death_signal() -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: stop as on SIGTERM
        except (OSError, AttributeError):
            pass


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def guard_descendants() -> None:
    """Linux: make this process a child subreaper and fork; the child returns and goes on as the worker, this
    process stays as its guardian and never returns (see the module docstring). Elsewhere, or when the kernel
    refuses, nothing happens and this process is the worker."""
    if not sys.platform.startswith("linux") or not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        return
    guardian = os.getpid()
    worker_pid: list[int] = []

    def forward(*_: Any) -> None:  # SIGTERM drains the worker, as it did when it was the started process
        if worker_pid:
            os.kill(worker_pid[0], signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    pid = os.fork()
    if pid == 0:  # the worker: gone with its guardian
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != guardian:  # the guardian died before the line above
            os._exit(1)
        _State.parent = guardian
        return
    worker_pid.append(pid)
    os._exit(_guard(pid))


def _guard(worker: int) -> int:
    """The guardian's life: wait for the worker (reaping the orphans that come to it meanwhile), end every
    process left below it, and give the worker's exit status (dying of the worker's signal, as the worker did)."""
    status = 0
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == worker:
            break
    while True:  # SIGKILL the children (orphans come here as their parents die), until there are none
        for child in _children(os.getpid()):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if os.WIFSIGNALED(status):
        sys.stderr.flush()
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


def _children(pid: int) -> list[int]:
    """The live children of ``pid``, from /proc (each process's parent in its stat line)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after the command name, which may hold spaces
        if int(fields[1]) == pid and fields[0] != b"Z":
            found.append(int(entry))
    return found


def connect(address: str) -> socket.socket:
    if address.startswith("tcp:"):
        host, _, port = address[4:].rpartition(":")
        return socket.create_connection((host, int(port)))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    return sock


class Worker:
    """The entries this worker was sent (stream name -> entry mapping) and the service over them."""

    def __init__(self) -> None:
        self.loader = RewardLoader()
        self.entries: list[dict[str, Any]] = []
        self.service: RewardService | None = None
        self.shared = SharedView()

    def load(self, entry: dict[str, Any]) -> dict[str, Any]:
        entries = [e for e in self.entries if e["name"] != entry["name"]] + [entry]
        specs = parse_specs(entries, "environment")
        service = RewardService(RewardConfig(specs, specs), loader=self.loader).load()
        self.entries, self.service = entries, service
        row = next(r for r in service.reward_list()["rewards"] if r["name"] == entry["name"])
        reward = service.processor(service.names).rewards[entry["name"]]
        info = reward.info
        facts = {
            key: getattr(info, key)
            for key in (
                "name",
                "implementation",
                "summary",
                "modality",
                "extra",
                "license",
                "source",
                "differentiable",
                "download",
            )
        }
        return {
            "row": row,
            "info": {**facts, "devices": list(info.devices) if info.devices else None, "device": reward.device},
        }

    def score(self, message: dict[str, Any]) -> dict[str, Any]:
        request = decode_request_map(self.shared.unpack(message["request"]), _OPEN)
        samples = samples_of(request.samples)
        if self.service is None:
            raise RuntimeError("the worker was asked to score before it was sent an entry")
        answer = self.service.score(self.service.key(request.rewards), [samples])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def error_map(exc: BaseException) -> dict[str, Any]:
    """What the parent needs to raise the same kind of error (see rewardzoo.environments.reward)."""
    kind = (
        "input"
        if isinstance(exc, InputError)
        else "config"
        if isinstance(exc, (ConfigError, RegistryError))
        else "output"
        if isinstance(exc, RewardOutputError)
        else "execution"
    )
    out = {"kind": kind, "type": type(exc).__name__, "message": getattr(exc, "message", None) or str(exc)}
    if isinstance(exc, InputError):
        out.update(field=exc.field, sample=exc.sample)
    elif isinstance(exc, ConfigError):
        out.update(field=exc.field)
    elif (samples := getattr(exc, "samples", None)) is not None:
        out.update(samples=list(samples))
    return out


def serve(channel: Channel, worker: Worker) -> int:
    while True:
        try:
            message, fds = channel.recv()
        except ChannelClosed:
            return 0
        try:
            worker.shared.adopt(fds, message.get("segments", 0))
        except (ValueError, OSError) as exc:  # descriptors that do not match the message: nothing can be read
            channel.send({"error": {"kind": "execution", "type": type(exc).__name__, "message": str(exc)}})
            continue
        _State.busy = True
        op = message.get("op")
        try:
            if op == "load":
                answer = {"ok": worker.load(message["entry"])}
            elif op == "score":
                answer = {"ok": worker.score(message)}
            elif op == "health":
                answer = {"ok": {"pid": os.getpid()}}
            elif op == "stop":
                channel.send({"ok": True})
                return 0
            else:
                answer = {"error": {"kind": "protocol", "type": "ValueError", "message": f"unknown op {op!r}"}}
        except Exception as exc:
            traceback.print_exc()
            answer = {"error": error_map(exc)}
        channel.send(answer)
        _State.busy = False
        if _State.stopping:
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rewardzoo.serve.worker")
    parser.add_argument("--address", required=True)
    parser.add_argument("--watch-fd", type=int, default=None)
    parser.add_argument("--parent-death-signal", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.parent_death_signal:
        _parent_death_signal()  # the guardian's, where there is one: its worker is tied to it
    guard_descendants()
    signal.signal(signal.SIGTERM, _on_term)
    if args.watch_fd is not None:
        _State.watch_fd = args.watch_fd
        threading.Thread(target=_watch, args=(args.watch_fd,), daemon=True, name="rewardzoo-parent-watch").start()
    if not args.address.startswith("tcp:") and os.path.basename(os.path.dirname(args.address)).startswith(
        "rewardzoo-worker-"
    ):
        _State.folder = os.path.dirname(args.address)
    channel = Channel(connect(args.address))
    channel.send(
        {
            "op": "hello",
            "token": os.environ.get("REWARDZOO_WORKER_TOKEN", ""),
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "executable": sys.executable,
        }
    )
    try:
        return serve(channel, Worker())
    finally:
        channel.close()
        _clean_up_after_parent()


if __name__ == "__main__":
    sys.exit(main())
