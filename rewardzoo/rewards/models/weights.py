"""Weight resolution: the local file a reward's ``model_path`` (or a weights option) names.

A local file, a file in a local directory, an ``http(s)://`` URL (downloaded once into torch's hub cache) or a
file of a hub repository (``org/repo`` with a file name, or ``org/repo/path/file``; with ``HF_HUB_OFFLINE=1`` only
what the local cache holds). Every family that loads a weights file by path goes through
:func:`resolve_weights_file`; reading the file safely is :mod:`rewardzoo.shared.weights`' part.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ConfigError
from ...shared.hub import require_reachable
from ...shared.weights import loading


def resolve_weights_file(model_path: str | os.PathLike, filename: str | None = None) -> str:
    """A local path for a weights file named by ``model_path``.

    Accepts a local file; a local directory (``filename`` inside it); an ``http(s)://`` URL (downloaded
    once into torch's hub cache); a hub id ``org/repo`` (with ``filename``) or ``org/repo/path/file``.
    Raises :class:`ConfigError` naming ``model_path`` when the file cannot be found or fetched.
    """
    text = os.fspath(model_path)
    path = Path(text).expanduser()
    if path.is_file():
        return str(path)
    if path.is_dir():
        if filename and (path / filename).is_file():
            return str(path / filename)
        found = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".pth", ".pt", ".bin"))
        if len(found) == 1 and not filename:
            return str(found[0])
        raise ConfigError(
            f"'{text}' holds no weights file '{filename or '*.safetensors|*.pth|*.pt'}'", field="model_path"
        )
    if text.startswith(("http://", "https://")):
        from urllib.parse import unquote, urlparse

        import torch

        target = Path(torch.hub.get_dir()) / "checkpoints" / unquote(Path(urlparse(text).path).name)
        if not target.is_file():
            with loading(f"'{text}'", verb="download"):
                target.parent.mkdir(parents=True, exist_ok=True)
                torch.hub.download_url_to_file(text, str(target), progress=False)
        return str(target)
    parts = text.strip("/").split("/")
    if len(parts) < 2 or text.startswith((".", "/", "~")):
        raise ConfigError(f"weights file not found: '{text}'", field="model_path")
    repo, name = "/".join(parts[:2]), "/".join(parts[2:]) or filename
    if not name:
        raise ConfigError(f"'{text}' names a hub repository but no file in it", field="model_path")
    with loading(f"'{name}' from the hub repository '{repo}' (and '{text}' is not a local file)", verb="fetch"):
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        cached = try_to_load_from_cache(repo, name)
        if isinstance(cached, str):
            return cached
        require_reachable(repo, f"'{name}'", name)  # one request, not the client's retries, when it is not there
        return hf_hub_download(repo, name)
