"""Worker processes: one per environment in this process, started on first use, never outliving it.

A :class:`Worker` starts ``python -m rewardzoo.serve.worker`` from its environment's interpreter
(:func:`~rewardzoo.environments.venvs.interpreter`), with rewardzoo's own folder first on its ``PYTHONPATH`` so
that it runs this rewardzoo's code, and waits for it to connect back on a Unix socket in a private folder
(loopback TCP where there are no Unix sockets) within the environment's ``start_timeout_s``. The worker's stdout
and stderr go to a file; its last lines are in every error about it.

Lifecycle: the entries it was sent are built again after a restart; a worker that dies (the connection closes,
the process exits) is restarted, at most ``max_restarts`` times over its life, each counted in
:attr:`Worker.restarts` and logged, and the call that met the death is retried once. A call that waits longer
than ``call_timeout_s`` for its answer kills the worker's process group (the worker runs in its own, so what the
reward started goes too) and is a :class:`~rewardzoo.errors.WorkerError`, not retried (a hang would repeat); the
next call starts the worker again, counted as a restart. An entry's deadline (its ``timeout_s``, read with
:func:`rewardzoo.core.deadlines.remaining` by the caller and passed as ``seconds``) bounds the wait the same way,
when it is the shorter bound: the worker is killed and the call is a :class:`~rewardzoo.errors.DeadlineError`
(an optional entry then abstains). A worker stops when
:meth:`Worker.close` is called (by the last entry that uses it, :meth:`rewardzoo.core.loader.RewardLoader.close`), at
interpreter exit (``atexit``), and when this process dies in any way, SIGKILL included: it watches a pipe whose
other end only this process holds (and on Linux asks for a parent-death signal when started from the main
thread; the signal follows the starting *thread*). A ``KeyboardInterrupt`` while waiting on it stops it.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DeadlineError, WorkerError
from ..spec.config import EnvironmentSpec
from .channel import Channel, ChannelClosed, SharedBuffer
from .venvs import interpreter, tail

log = logging.getLogger("rewardzoo.environments")
_STOP_GRACE_S = 5.0


class WorkerDied(ConnectionError):
    """The worker's process ended, or its connection did, while it was being asked something."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class Worker:
    """One worker process of one environment (see the module docstring). ``restarts``: how often it was
    started again after dying; ``pid``: its process id while it runs (the worker's, not its guardian's)."""

    def __init__(self, env: EnvironmentSpec) -> None:
        self.env = env
        self.restarts = 0
        self.users = 0
        self._entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._proc: subprocess.Popen | None = None
        self._channel: Channel | None = None
        self._shared: SharedBuffer | None = None
        self._watch_fd: int | None = None
        self._folder: Path | None = None
        self._stderr_path: Path | None = None
        self._timed_out = ""  # what a call ran past when it was killed: starting it again is a restart
        self._worker_pid: int | None = None  # the worker's own pid (below its guardian, on Linux)
        self.closed = False

    # -- what callers use ----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        if self._proc is None or _exited(self._proc):
            return None
        return self._worker_pid or self._proc.pid  # the worker's own, below its guardian

    @property
    def stderr_tail(self) -> str:
        return tail(self._stderr_path) if self._stderr_path is not None else ""

    def load(self, entry: dict[str, Any], *, name: str) -> dict[str, Any]:
        """Build ``entry`` (a plain entry mapping) in the worker; its answer (see :meth:`ask`): the served row and
        record, or the error the worker met building it. A restarted worker builds the entries it held again."""
        with self._lock:
            answer = self.ask({"op": "load", "entry": entry}, entry=name, bound="start_timeout_s")
            if "ok" in answer:
                self._entries[entry["name"]] = entry
            return answer

    def ask(
        self,
        message: dict[str, Any],
        *,
        entry: str | None,
        bound: str = "call_timeout_s",
        shared: str | None = None,
        seconds: float | None = None,
    ) -> dict[str, Any]:
        """Send one message and return the worker's answer map (``{"ok": ...}`` or ``{"error": ...}``),
        starting the worker when needed. ``bound``: the environment's setting that bounds the wait for the
        answer. ``shared``: the key of the message whose large arrays go through shared memory (when the worker
        has it). A worker that dies meanwhile is restarted (bounded) and asked once more; WorkerError when it
        dies again, cannot be restarted, does not start, or does not answer within the bound (then it is killed
        and the message is not sent again). ``seconds``: the caller's deadline, when shorter than the bound
        (past it the worker is killed the same way and the error is a DeadlineError)."""
        with self._lock:
            if self.closed:
                raise WorkerError("the worker was closed", entry=entry, environment=self.env.describe())
            for attempt in (1, 2):
                try:
                    if self._channel is None:
                        if self._timed_out:
                            self._count_restart(
                                f"the worker was killed after a call ran past {self._timed_out}", entry, "", then=""
                            )
                            self._timed_out = ""
                        self._start(entry)
                    sent = message
                    fds: tuple[int, ...] = ()
                    if shared is not None and self._shared is not None:
                        packed, fds, segments = self._shared.pack(message[shared])
                        sent = {**message, shared: packed, "segments": segments}
                    return self._exchange(sent, fds, bound, entry, seconds)
                except WorkerDied as exc:
                    stderr = self.stderr_tail
                    code = self._reap()
                    what = f"the worker (pid {exc.pid}) died{code}"
                    if attempt == 2:
                        raise WorkerError(
                            f"{what} again when the call was retried after a restart",
                            entry=entry,
                            environment=self.env.describe(),
                            stderr=stderr,
                        ) from None
                    self._count_restart(what, entry, stderr, then=" and retrying the call once")
                except BaseException:  # KeyboardInterrupt, a malformed frame: the stream is out of step
                    self._stop(kill=True)  # nobody waits for what it is doing
                    raise
            raise AssertionError("unreachable")

    def _count_restart(self, what: str, entry: str | None, stderr: str, *, then: str) -> None:
        """Count the restart ``what`` calls for; WorkerError when ``max_restarts`` are used up."""
        if self.restarts >= self.env.max_restarts:
            raise WorkerError(
                f"{what}; it was restarted {self.restarts} time(s) already (max_restarts: {self.env.max_restarts})",
                entry=entry,
                environment=self.env.describe(),
                stderr=stderr,
            ) from None
        self.restarts += 1
        log.warning(
            "rewardzoo: %s (%s); restarting it (restart %d of at most %d)%s",
            what,
            self.env.describe(),
            self.restarts,
            self.env.max_restarts,
            then,
        )

    def reset(self) -> None:
        """Stop the process (not counted as a restart); the next call starts it again."""
        with self._lock:
            self._stop(kill=True)

    def close(self) -> None:
        """Stop the worker: its connection closed, it exits (SIGTERM, then SIGKILL, after grace periods)."""
        with self._lock:
            self.closed = True
            self._stop()
        _LIVE.discard(self)

    # -- the process -----------------------------------------------------------------------------------
    def _start(self, entry: str | None) -> None:
        import importlib.util

        if importlib.util.find_spec("msgpack") is None:  # the channel's frames (the worker's env gets it built in)
            raise ConfigError(
                "entries with an environment need msgpack here: pip install msgpack (or 'rewardzoo[serve]')",
                entry=entry,
                field="environment",
            )
        python = interpreter(self.env)
        clean_stale_folders()
        self._folder = _private_folder()
        self._stderr_path = self._folder / "stderr.log"
        token = secrets.token_hex(16)
        listener, address = _listen(self._folder)
        read_fd, write_fd = os.pipe()  # the worker watches read_fd; write_fd dies with this process
        environ = {
            **os.environ,
            "REWARDZOO_WORKER_TOKEN": token,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([_package_path(self._folder), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
        command = [python, "-m", "rewardzoo.serve.worker", "--address", address]
        if os.name == "posix":
            command += ["--watch-fd", str(read_fd)]
            if threading.current_thread() is threading.main_thread():
                command.append("--parent-death-signal")
        try:
            with open(self._stderr_path, "wb") as err:
                self._proc = proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=err,
                    stderr=err,
                    env=environ,
                    pass_fds=(read_fd,) if os.name == "posix" else (),
                    start_new_session=os.name == "posix",
                )  # its group: killed whole
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            listener.close()
            raise WorkerError(
                f"the worker could not be started: {exc}", entry=entry, environment=self.env.describe()
            ) from None
        os.close(read_fd)
        self._watch_fd = write_fd
        _LIVE.add(self)
        try:
            sock = self._accept(listener, proc, entry)
        finally:
            listener.close()
        channel = Channel(sock)
        hello, _ = self._recv_within(channel, "start_timeout_s", entry, "to say hello")
        self._worker_pid = hello.get("pid") if isinstance(hello.get("pid"), int) else None
        if hello.get("op") != "hello" or not secrets.compare_digest(str(hello.get("token", "")), token):
            channel.close()
            self._stop()
            raise WorkerError(
                "the process that connected is not the worker (wrong token)",
                entry=entry,
                environment=self.env.describe(),
            )
        self._channel = channel
        self._shared = (
            SharedBuffer() if self.env.shared_memory and channel.passes_fds and SharedBuffer.available() else None
        )
        for name, spec in list(self._entries.items()):  # after a restart: build what it held again
            answer = self._exchange({"op": "load", "entry": spec}, (), "start_timeout_s", entry)
            if "error" in answer:
                raise WorkerError(
                    f"the restarted worker could not build entry '{name}' again: {answer['error'].get('message')}",
                    entry=entry,
                    environment=self.env.describe(),
                    stderr=self.stderr_tail,
                )

    def _accept(self, listener: socket.socket, proc: subprocess.Popen[bytes], entry: str | None) -> socket.socket:
        deadline = time.monotonic() + self.env.start_timeout_s
        while True:
            listener.settimeout(0.1)
            try:
                sock, _ = listener.accept()
                sock.settimeout(None)
                return sock
            except (TimeoutError, BlockingIOError):
                pass
            exited = _exited(proc)
            if exited or time.monotonic() > deadline:
                stderr = self.stderr_tail
                self._stop(kill=True)
                code = proc.returncode if exited else None
                what = (
                    f"the worker exited with status {code} before it connected"
                    if code is not None
                    else f"the worker did not connect within start_timeout_s={self.env.start_timeout_s:g} s "
                    "(it was stopped)"
                )
                raise WorkerError(what, entry=entry, environment=self.env.describe(), stderr=stderr)

    def _recv_within(
        self, channel: Channel, bound: str, entry: str | None, doing: str, seconds: float | None = None
    ) -> tuple[dict[str, Any], list[int]]:
        """The next message, waiting at most the environment's ``bound`` (a setting name; its value None: for
        ever), or ``seconds`` (a deadline) when shorter; past it the worker is killed."""
        channel.sock.settimeout(self._wait(bound, seconds))
        try:
            return channel.recv()
        except TimeoutError:
            raise self._too_long(bound, entry, doing, seconds) from None
        except (ChannelClosed, ConnectionError, OSError) as exc:
            raise WorkerDied(str(exc), self._proc.pid if self._proc else None) from None
        except ValueError as exc:  # not a MessagePack map: the stream is out of step
            stderr = self.stderr_tail
            self._stop()
            raise WorkerError(
                f"the worker answered a malformed message ({exc}); it was stopped",
                entry=entry,
                environment=self.env.describe(),
                stderr=stderr,
            ) from None
        finally:
            if channel.sock.fileno() != -1:
                channel.sock.settimeout(None)

    def _wait(self, bound: str, seconds: float | None) -> float | None:
        """The socket timeout of a wait bounded by the setting ``bound`` and a deadline ``seconds`` (None: none)."""
        limit: float | None = getattr(self.env, bound)
        return seconds if seconds is not None and (limit is None or seconds < limit) else limit

    def _too_long(
        self, bound: str, entry: str | None, doing: str, seconds: float | None = None
    ) -> WorkerError | DeadlineError:
        """The worker ran past the environment's ``bound`` (or the deadline ``seconds``, when shorter): it is
        killed, and this is the error to raise."""
        stderr = self.stderr_tail
        self._stop(kill=True)
        limit = getattr(self.env, bound)
        if seconds is not None and (limit is None or seconds < limit):
            self._timed_out = "its entry's deadline (timeout_s)"
            return DeadlineError(
                f"the worker of the {self.env.describe()} did not answer within the entry's deadline "
                f"({seconds:.3g} s left) {doing}; it was killed, the next call starts it again",
                reward=entry,
            )
        what = "it was stopped"
        if bound == "call_timeout_s":
            self._timed_out = bound
            what = "it was killed; the call is not retried (a hang would repeat), the next call starts it again"
        return WorkerError(
            f"the worker took longer than {bound}={getattr(self.env, bound):g} s {doing} ({what})",
            entry=entry,
            environment=self.env.describe(),
            stderr=stderr,
        )

    def _exchange(
        self,
        message: dict[str, Any],
        fds: tuple[int, ...],
        bound: str,
        entry: str | None = None,
        seconds: float | None = None,
    ) -> dict[str, Any]:
        channel, doing = self._channel, f"to answer '{message.get('op')}'"
        if channel is None:  # (the callers start the worker first)
            raise WorkerDied("the worker is not connected", self._proc.pid if self._proc else None)
        start = time.monotonic()
        channel.sock.settimeout(self._wait(bound, seconds))  # a worker that stops reading blocks the send too
        try:
            channel.send(message, fds)
        except TimeoutError:
            raise self._too_long(bound, entry, doing, seconds) from None
        except (ConnectionError, OSError) as exc:
            raise WorkerDied(str(exc), self._proc.pid if self._proc else None) from None
        left = None if seconds is None else max(seconds - (time.monotonic() - start), 1e-3)
        answer, _ = self._recv_within(channel, bound, entry, doing, left)
        return answer

    def _reap(self) -> str:
        """Forget the dead worker; ' with status N' (or a signal) when its exit is known."""
        proc = self._proc
        if proc is not None:
            _wait_exited(proc, 2.0)  # its connection closes a moment before it exits
        self._stop()
        code = proc.returncode if proc is not None else None
        if code is None:
            return ""
        return f" (killed by signal {-code})" if code < 0 else f" (exit status {code})"

    def _stop(self, *, kill: bool = False) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        proc, self._proc = self._proc, None
        worker, self._worker_pid = self._worker_pid, None
        if proc is not None and proc.returncode is None:
            if not _exited(proc):
                if kill:
                    _kill_worker(proc, worker)
                for then in (proc.terminate, proc.kill):  # an idle worker exits when its connection closes
                    if _wait_exited(proc, _STOP_GRACE_S):
                        break
                    then()
                _wait_exited(proc, None)
            _kill_group(proc)  # what the reward started goes too, on close, restart and timeout alike
            proc.wait()
        if self._watch_fd is not None:
            os.close(self._watch_fd)
            self._watch_fd = None
        if self._folder is not None:  # the stderr tail was read by whoever reports the stop
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = self._stderr_path = None


def _package_path(folder: Path) -> str:
    """A folder holding only this rewardzoo package (a link to it): first on the worker's path, so the worker
    runs this code without seeing the packages installed beside it (an installed rewardzoo's site-packages)."""
    package = Path(__file__).resolve().parents[1]
    link_dir = folder / "path"
    link_dir.mkdir()
    try:
        (link_dir / "rewardzoo").symlink_to(package, target_is_directory=True)
    except OSError:  # no symlinks (Windows without the privilege): the folder above the package
        return str(package.parent)
    return str(link_dir)


#: The bytes of a Unix socket path that fit every platform's ``sun_path`` (104-108 bytes).
_MAX_SOCKET_PATH = 100
_FOLDER_PREFIX = "rewardzoo-worker-"
#: Where a private folder goes when the temp dir's path is too long for a socket path in it.
_SHORT_BASES = ("/tmp", "/dev/shm")


def _private_folder() -> Path:
    """A new 0700 folder for one worker (its socket, its stderr), named after this process (see
    :func:`clean_stale_folders`): in the temp dir, or in a short base when a socket path there would be too long."""
    prefix = f"{_FOLDER_PREFIX}{os.getpid()}-"
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if not hasattr(socket, "AF_UNIX") or len(str(folder / "worker.sock").encode()) < _MAX_SOCKET_PATH:
        return folder
    for base in _SHORT_BASES:
        if (
            os.path.isdir(base)
            and os.access(base, os.W_OK | os.X_OK)
            and len(os.path.join(base, prefix + "x" * 8, "worker.sock").encode()) < _MAX_SOCKET_PATH
        ):
            folder.rmdir()
            return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    return folder


def _listen(folder: Path) -> tuple[socket.socket, str]:
    """A listener on a Unix socket in the worker's private (0700) folder; loopback TCP (with a warning: any local
    user could connect first; the token keeps them from posing as the worker) only where there is none."""
    path = str(folder / "worker.sock")
    if hasattr(socket, "AF_UNIX") and len(path.encode()) < _MAX_SOCKET_PATH:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        return listener, path
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    why = (
        "this platform has no Unix sockets"
        if not hasattr(socket, "AF_UNIX")
        else f"the socket path '{path}' is too long and no short private folder could be made"
    )
    log.warning(
        "rewardzoo: the worker connects back over loopback TCP (127.0.0.1:%d): %s; set TMPDIR to a short "
        "folder to use a Unix socket",
        port,
        why,
    )
    return listener, f"tcp:127.0.0.1:{port}"


def clean_stale_folders() -> list[Path]:
    """Remove the private folders that workers of dead processes of this user left in the temp dirs (a parent and
    a worker that were both SIGKILLed); a folder of a live process, another user's or an unnamed one stays."""
    removed = []
    for base in dict.fromkeys([tempfile.gettempdir(), *_SHORT_BASES]):
        try:
            candidates = list(Path(base).glob(f"{_FOLDER_PREFIX}*-*"))
        except OSError:
            continue
        for folder in candidates:
            owner = folder.name[len(_FOLDER_PREFIX) :].split("-", 1)[0]
            try:
                stat = folder.lstat()
                if (
                    not owner.isdigit()
                    or not folder.is_dir()
                    or folder.is_symlink()
                    or (hasattr(os, "getuid") and stat.st_uid != os.getuid())
                    or _process_alive(int(owner))
                ):
                    continue
            except OSError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds that pid
        return True
    return True


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the worker has exited, without reaping it (its pid, a zombie, still names its process group)."""
    if proc.returncode is not None:
        return True
    if hasattr(os, "waitid") and hasattr(os, "WNOWAIT"):
        try:
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return proc.poll() is not None
    return proc.poll() is not None


def _wait_exited(proc: subprocess.Popen, timeout: float | None) -> bool:
    """Wait up to ``timeout`` s (None: for ever) for the worker to exit, unreaped; whether it did."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not _exited(proc):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _kill_worker(proc: subprocess.Popen, worker: int | None) -> None:
    """SIGKILL the worker. Below a guardian (its pid differs from the started process's), the worker itself, so that
    the guardian lives to end what the worker's rewards started; else the started process."""
    if worker is not None and worker != proc.pid:
        try:
            os.kill(worker, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of the worker's process group (the processes its reward started). Only while the worker
    is unreaped: its zombie keeps the group's id from naming anything else."""
    if os.name != "posix" or proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()
_POOL: dict[EnvironmentSpec, Worker] = {}
_POOL_LOCK = threading.Lock()


def worker_for(env: EnvironmentSpec) -> Worker:
    """The worker of ``env`` in this process (one per environment: entries with the same one share it), counted
    as used by one more entry until :func:`release`."""
    with _POOL_LOCK:
        worker = _POOL.get(env)
        if worker is None or worker.closed:
            worker = _POOL[env] = Worker(env)
        worker.users += 1
        return worker


def release(worker: Worker) -> None:
    """An entry no longer uses ``worker``; the last one to go stops it."""
    with _POOL_LOCK:
        worker.users -= 1
        last = worker.users <= 0
        if last and _POOL.get(worker.env) is worker:
            del _POOL[worker.env]
    if last:
        worker.close()


def close_all() -> None:
    """Stop every worker of this process (also run at interpreter exit)."""
    with _POOL_LOCK:
        _POOL.clear()
    for worker in list(_LIVE):
        worker.close()


atexit.register(close_all)
