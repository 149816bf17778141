"""Residency: where a loaded reward's weights live between reward phases (an entry's ``offload:``).

``none``: on their device for the life of the processor. ``cpu``: moved to CPU memory (pinned where CUDA is
present) by :meth:`Residency.sleep`, back to their device at the next call (weights already on the CPU stay where
they are: nothing to copy). ``drop``: freed; a wake re-reads them, memory-mapped, from the checkpoint files the
reward was loaded from (:mod:`rewardzoo.core.weight_files`: each tensor bound, at the first drop, to the
checkpoint entry holding its exact bits), into the same ``Parameter`` / buffer objects (the module skeleton,
tokenizers and processors are kept; nothing is downloaded or rebuilt). Only tensors found in no checkpoint (a
buffer computed at load, a weight changed after loading) are written once to a process-private safetensors file.
A wake copies the weights into private memory and checks them against the digests of the bits that were live
(:func:`~rewardzoo.core.weight_files.read_entries`): a file rewritten since is a :class:`WakeError`, never other
weights, and no later write to a file reaches a woken model. After a WakeError the model is marked
(:data:`~rewardzoo.shared.weights.WAKE_FAILED`): the process's model caches and loaders build a fresh one for new
rewards, and closing never raises it.

Residency belongs to the loaded model, not to a reward class: the weights are the tensors of the ``torch.nn``
modules a reward declares it holds (:attr:`~rewardzoo.rewards.base.Reward.resources`, its inner rewards' with it),
and a wake from ``drop`` reads them back from the files that record names. A tensor shared by several loaded
rewards (train/eval dedup, shared backbones) sleeps once; one used by an entry with ``offload: none`` of the same
loader stays awake. The state is one per process (:func:`process_residency`), so a model shared across loaders
wakes through any of them. A model-free reward holds nothing: sleeping it does nothing.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import WakeError
from ..rewards.base import Reward
from ..shared.heap import release_heap
from ..shared.weights import WAKE_FAILED
from . import weight_files

__all__ = ["Residency", "WakeError", "module_tensors", "process_residency", "reward_modules", "reward_sessions"]


def reward_modules(reward: Reward) -> list[Any]:
    """The ``torch.nn.Module`` objects ``reward`` holds (its :attr:`~rewardzoo.rewards.base.Reward.resources`, its
    inner rewards' included), each once; none for a model-free reward."""
    return reward.resources.modules()


def reward_sessions(reward: Reward) -> list[Any]:
    """The ONNX sessions (:class:`~rewardzoo.rewards.models.onnx.ReleasableSession`) ``reward`` holds."""
    return reward.resources.sessions()


def module_tensors(modules: Iterable[Any]) -> list[Any]:
    """The parameters and buffers of ``modules`` (submodules included), each tensor object once."""
    out: dict[int, Any] = {}
    for module in modules:
        for tensor in (*module.parameters(), *module.buffers()):
            out.setdefault(id(tensor), tensor)
    return list(out.values())


@dataclass
class _Asleep:
    tensor: Any  # the Parameter / buffer object itself, kept (the skeleton)
    device: Any
    mode: str
    key: str


class Residency:
    """The sleep state of the tensors of one loader's rewards (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._asleep: dict[int, _Asleep] = {}
        # reward -> (what its record held, its tensors / its checkpoint files): redone when the record holds more
        self._tensors: weakref.WeakKeyDictionary[Reward, tuple[Any, list[Any]]] = weakref.WeakKeyDictionary()
        self._sources: weakref.WeakKeyDictionary[Reward, tuple[Any, list[str]]] = weakref.WeakKeyDictionary()
        self._count = itertools.count()
        self._folder: str | None = None  # where dropped weights are written (safetensors, once per tensor)
        self._files: dict[str, str] = {}  # tensor key -> its file
        self._spilled: dict[str, int] = {}  # tensor key -> its bytes in the drop file
        self._released: dict[int, Any] = {}  # id(session) -> the released ONNX session
        self._guards: dict[int, tuple[Any, list[Any]]] = {}  # sleeping module -> its forward pre-hooks
        self._bound: dict[str, weight_files.Entry] = {}  # tensor key -> its checkpoint entry
        self._spill: dict[str, weight_files.Entry] = {}  # tensor key -> its entry in the drop file
        self._unbound: set[str] = set()  # tensor keys found in no checkpoint (written to the drop file)

    def modules(self, reward: Reward) -> list[Any]:
        """The torch modules ``reward`` holds (its record)."""
        return reward.resources.modules()

    def sessions(self, reward: Reward) -> list[Any]:
        """The ONNX sessions ``reward`` holds (its record)."""
        return reward.resources.sessions()

    def sources(self, reward: Reward) -> list[str]:
        """The checkpoint files ``reward`` was loaded from: those under the files its record names (the loader
        resolves them at load, for an entry with ``offload: drop``)."""
        with self._lock:
            declared = tuple(reward.resources.files())
            found = self._sources.get(reward)
            if found is None or found[0] != declared:
                found = self._sources[reward] = (declared, weight_files.checkpoint_files(declared))
            return found[1]

    def tensors(self, reward: Reward) -> list[Any]:
        """The parameters and buffers of the modules ``reward`` holds, each once."""
        with self._lock:
            modules = self.modules(reward)
            held = tuple(id(m) for m in modules)
            found = self._tensors.get(reward)
            if found is None or found[0] != held:
                found = self._tensors[reward] = (held, module_tensors(modules))
            return found[1]

    def weight_bytes(self, reward: Reward) -> int:
        """The bytes of the reward's parameters and buffers on their device now (0 while dropped)."""
        return sum(t.data.numel() * t.data.element_size() for t in self.tensors(reward))

    def private_bytes(self, reward: Reward) -> int:
        """The bytes of ``reward``'s tensors that a wake from ``drop`` reads from the process-private drop file
        (tensors found in no checkpoint file); the others are read back from the checkpoint files."""
        with self._lock:
            return sum(self._spilled.get(self._key(t), 0) for t in self.tensors(reward))

    def is_asleep(self, reward: Reward) -> bool:
        with self._lock:
            return any(id(t) in self._asleep for t in self.tensors(reward)) or any(
                id(s) in self._released for s in self.sessions(reward)
            )

    def wake_failed(self, reward: Reward) -> bool:
        """Whether a wake of ``reward`` failed and none has succeeded since (its file gone or rewritten)."""
        return any(getattr(t, WAKE_FAILED, False) for t in self.tensors(reward))

    def sleep(self, plan: Iterable[tuple[Reward, str]], keep: Iterable[Reward] = ()) -> None:
        """Put each ``(reward, mode)`` to sleep (``cpu`` or ``drop``), except the tensors ``keep`` holds."""
        plan = list(plan)
        keep = list(keep)
        with self._lock:
            kept_sessions = {id(s) for r in keep for s in self.sessions(r)}
            for reward, _ in plan:  # an ONNX session is released (both modes) and recreated from its file
                for session in self.sessions(reward):
                    if id(session) not in kept_sessions and not session.released:
                        session.release()
                        self._released[id(session)] = session
            kept = {id(t) for r in keep for t in self.tensors(r)}
            todo: dict[int, tuple[Any, str]] = {}
            for reward, mode in plan:
                for tensor in self.tensors(reward):
                    if id(tensor) not in kept and id(tensor) not in self._asleep and tensor.data.numel():
                        old = todo.get(id(tensor))
                        todo[id(tensor)] = (tensor, "cpu" if old and old[1] == "cpu" else mode)
            if not todo:
                return
            import torch

            dropped = {self._key(t): t for t, mode in todo.values() if mode == "drop"}
            self._bind([r for r, mode in plan if mode == "drop"], dropped)
            self._write_spill({k: t for k, t in dropped.items() if k in self._unbound and k not in self._files})
            pin = torch.cuda.is_available()
            moved: set[int] = set()
            for tensor, mode in todo.values():
                key = self._key(tensor)
                record = _Asleep(tensor, tensor.data.device, mode, key)
                if mode == "drop":
                    tensor.data = torch.empty(0, dtype=tensor.dtype, device="cpu")
                    moved.add(id(tensor))
                elif tensor.data.device.type != "cpu":
                    host = tensor.data.to("cpu")
                    tensor.data = host.pin_memory() if pin else host
                    moved.add(id(tensor))
                # else: `cpu` and already on the CPU: nothing to copy, nothing a forward could miss
                self._asleep[id(tensor)] = record
            if moved:
                modules = {id(m): m for reward, _ in plan for m in self.modules(reward)}.values()
                self._guard([m for m in modules if any(id(t) in moved for t in module_tensors([m]))])
            if dropped:
                release_heap()

    def _bind(self, rewards: list[Reward], dropped: dict[str, Any]) -> None:
        """Bind the dropped tensors not bound yet to their checkpoint entries (once per tensor)."""
        for reward in rewards:
            own = {id(t) for t in self.tensors(reward)}
            wanted = {
                k: t for k, t in dropped.items() if id(t) in own and k not in self._bound and k not in self._unbound
            }
            found = weight_files.bind(wanted.values(), self.sources(reward)) if wanted else {}
            self._bound.update({k: found[id(t)] for k, t in wanted.items() if id(t) in found})
        self._unbound.update(k for k in dropped if k not in self._bound)

    def _guard(self, modules: list[Any]) -> None:
        """A forward pre-hook on every submodule of each sleeping module: a forward that does not come through a
        loaded reward's call (a reward built directly over a model cached across loaders, a backbone used by
        hand) wakes that module's tensors first, instead of running on freed or misplaced weights. A TorchScript
        module takes no hooks (Silero VAD's): it wakes through its reward's call only."""
        import torch

        for module in modules:
            if id(module) not in self._guards:
                hook = partial(self._wake_module_hook, module)
                subs = [sub for sub in module.modules() if not isinstance(sub, torch.jit.ScriptModule)]
                self._guards[id(module)] = (module, [sub.register_forward_pre_hook(hook) for sub in subs])

    def _wake_module_hook(self, module: Any, _sub: Any, _args: Any) -> None:
        with self._lock:
            tensors = module_tensors([module])
            self._wake_records([self._asleep[id(t)] for t in tensors if id(t) in self._asleep], None)
            self._unguard_awake()

    def _unguard_awake(self) -> None:
        """Remove the guards of modules none of whose tensors sleeps any more."""
        for key, (module, handles) in list(self._guards.items()):
            if not any(id(t) in self._asleep for t in module_tensors([module])):
                for handle in handles:
                    handle.remove()
                del self._guards[key]

    def wake(self, rewards: Iterable[Reward], name: str | None = None) -> None:
        """Bring the tensors of ``rewards`` back to their devices (a no-op for awake ones). WakeError (the reward
        ``name``, the file) when dropped weights cannot be read back; then they all stay asleep."""
        if not self._asleep and not self._released:  # the common case (no entry offloads): nothing to walk
            return
        with self._lock:
            rewards = list(rewards)
            for reward in rewards:
                for session in self.sessions(reward):
                    if id(session) in self._released:
                        try:
                            session.restore()
                        except Exception as exc:  # the model file gone since load
                            who = f"reward '{name}'" if name else "a reward"
                            raise WakeError(f"{who} cannot wake: {exc}; it stays asleep") from exc
                        del self._released[id(session)]
            todo = [self._asleep[id(t)] for r in rewards for t in self.tensors(r) if id(t) in self._asleep]
            self._wake_records(todo, name)
            if self._guards:
                self._unguard_awake()

    def _wake_records(self, todo: list[_Asleep], name: str | None) -> None:
        with self._lock:
            if not todo:
                return
            dropped = [rec for rec in todo if rec.mode == "drop"]
            loaded: dict[str, Any] = {}
            if dropped:
                loaded = self._read_dropped(dropped, name)
            for rec in todo:
                if rec.mode == "drop":
                    rec.tensor.data = loaded[rec.key].to(rec.device)
                elif rec.tensor.data.device != rec.device:
                    rec.tensor.data = rec.tensor.data.to(rec.device, non_blocking=True)
                self._asleep.pop(id(rec.tensor), None)
            if any(rec.device.type == "cuda" for rec in todo):
                import torch

                torch.cuda.synchronize()
            for rec in dropped:  # read back after a failed wake (the file restored): the model is whole again
                if getattr(rec.tensor, WAKE_FAILED, False):
                    delattr(rec.tensor, WAKE_FAILED)

    def wake_reward(self, reward: Reward) -> None:
        """Wake one reward (the hook the loader sets on every reward it builds)."""
        self.wake([reward], getattr(reward, "name", None))

    def _key(self, tensor: Any) -> str:
        """The tensor's key in the drop file, kept on the tensor itself (an id could be reused by a new tensor)."""
        key = getattr(tensor, "_rewardzoo_residency_key", None)
        if key is None:
            key = f"t{next(self._count)}"
            tensor._rewardzoo_residency_key = key
        return key

    def _write_spill(self, tensors: dict[str, Any]) -> None:
        """Write newly dropped tensors to a file of their own (weights written once, kept until exit)."""
        if not tensors:
            return
        from safetensors.torch import save_file

        folder = self._folder or tempfile.mkdtemp(prefix="rewardzoo-drop-")
        self._folder = folder
        path = os.path.join(folder, f"weights-{next(self._count)}.safetensors")
        host = {k: t.data.detach().to("cpu").contiguous() for k, t in tensors.items()}
        save_file(host, path)
        stat = weight_files.identity(path)
        for key, tensor in tensors.items():
            self._files[key] = path
            self._spilled[key] = tensor.data.numel() * tensor.data.element_size()
            self._spill[key] = weight_files.entry(path, key, stat, host[key])

    def _read_dropped(self, records: list[_Asleep], name: str | None) -> dict[str, Any]:
        """The tensors of dropped ``records`` (all of them, or WakeError naming ``name`` and the file; the
        tensors are then marked, see the module docstring)."""
        who = f"reward '{name}'" if name else "a reward"
        dtypes = {rec.key: rec.tensor.dtype for rec in records}
        devices = {rec.key: rec.device for rec in records}
        bound = {rec.key: self._bound[rec.key] for rec in records if rec.key in self._bound}
        spill = {rec.key: self._spill[rec.key] for rec in records if rec.key not in bound}
        try:
            out, renewed = weight_files.read_entries(bound, dtypes, devices=devices)
            spilled, renewed_spill = weight_files.read_entries(spill, dtypes, "dropped weights' file", devices)
        except OSError as exc:
            for rec in records:
                setattr(rec.tensor, WAKE_FAILED, True)
            raise WakeError(f"{who} cannot wake: {exc}; it stays asleep") from exc
        self._bound.update(renewed)  # the same bits in a file copied or restored: checked in full once
        self._spill.update(renewed_spill)
        out.update(spilled)
        return out

    def files(self, reward: Reward) -> list[str]:
        """The files a wake of ``reward`` reads its dropped weights from: its checkpoint files, and the drop file
        of tensors found in none (empty while nothing of it was dropped)."""
        keys = [self._key(t) for t in self.tensors(reward)]
        return sorted(
            {self._bound[k].path for k in keys if k in self._bound} | {self._files[k] for k in keys if k in self._files}
        )

    def close(self) -> None:
        for path in set(self._files.values()):
            _remove(path)
        if self._folder:
            _remove(self._folder)


_PROCESS: Residency | None = None
_PROCESS_LOCK = threading.Lock()


def process_residency() -> Residency:
    """The one :class:`Residency` of this process, shared by every loader: a model cached across loaders (a VLM
    backbone, a CLIP tower) that one loader put to sleep is woken by a call through any other."""
    global _PROCESS
    with _PROCESS_LOCK:
        if _PROCESS is None:
            import atexit

            _PROCESS = Residency()
            atexit.register(_PROCESS.close)
        return _PROCESS


def _remove(path: str) -> None:
    try:
        os.rmdir(path) if os.path.isdir(path) else os.remove(path)
    except OSError:
        pass
