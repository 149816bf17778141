"""What several builder families share: making the directory a checkpoint is written to, and saving a state
dict as safetensors. Imports: the standard library at module level; safetensors inside :func:`save_safetensors`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def made_dir(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path`, created with its parents if missing."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_safetensors(state: Mapping[str, Any], path: Path) -> None:
    """Write the tensors of ``state`` (made contiguous, as safetensors requires) to the file ``path``."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
