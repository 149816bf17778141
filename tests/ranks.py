"""Start a test worker module as several gloo ranks on this machine, with a bounded wait.

Each rank runs ``python -m WORKER RANK WORLD PORT OUT`` from the repository root, where OUT is
``out_dir / f"rank{RANK}.pkl"``, the file the worker pickles its results into.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ROOT = Path(__file__).resolve().parents[1]


def launch_ranks(
    worker: str, out_dir: Path, *, world: int = 2, timeout: float = 120.0
) -> tuple[list[int], list[str], list[Path]]:
    """Run the ranks of module ``worker`` to completion; (return codes, logs, result files). Fails the
    test if they hang."""
    port = str(free_port())
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    files = [out_dir / f"rank{r}.pkl" for r in range(world)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", worker, str(r), str(world), port, str(files[r])],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    start, logs = time.monotonic(), []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=max(1.0, timeout - (time.monotonic() - start)))[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.communicate()
        pytest.fail(f"the {world}-rank launch of {worker} did not finish within {timeout} s")
    return [p.returncode for p in procs], logs, files


def load_result(path: Path, log: str):
    assert path.exists(), f"{path.name} was not written:\n{log}"
    return pickle.loads(path.read_bytes())


def finish_rank(outfile: str | Path, result: object) -> None:
    """A worker's last step: pickle ``result`` to ``outfile``, wait for every rank, leave the process group."""
    import torch.distributed as dist

    Path(outfile).write_bytes(pickle.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


def run_rank(main: Callable[[], None]) -> None:
    """Run a worker's ``main``; on any failure print the traceback and exit 1 at once, so that a rank
    left waiting in a collective cannot keep the process alive."""
    try:
        main()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
