"""Whether the Hugging Face hub (or a weights URL) can be reached, asked once per process with one request.

A reward whose weights are not on this machine would otherwise leave it to its library to find out: huggingface_hub
retries a hub it cannot reach (five times, with back-off, a warning each time), and a reward loading several files
does that once per file, for tens of seconds, before an error that says nothing about what to do. The loader asks
here first (:func:`unreachable`): with ``HF_HUB_OFFLINE=1`` no request at all; else one request without retries,
within :func:`probe_timeout` seconds, whose answer is kept for the process (per endpoint, or per URL host). Any HTTP
answer (even 401 or 404) means the hub is there, and the library's own download goes ahead as before.

huggingface_hub is imported inside the functions (``import rewardzoo`` stays light).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from urllib.parse import urlparse

#: The seconds the one request may take (``REWARDZOO_HUB_TIMEOUT`` overrides it).
DEFAULT_TIMEOUT = 5.0
_ANSWERS: dict[str, str | None] = {}
_LOCK = threading.Lock()


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value now."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return True
    return False


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Within: Hugging Face libraries make no request (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set, and the
    flag huggingface_hub read at import), so a file that is not cached fails at once instead of retrying."""
    import sys

    saved = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    constants = sys.modules.get("huggingface_hub.constants")
    before = getattr(constants, "HF_HUB_OFFLINE", None)
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if constants is not None:
        setattr(constants, "HF_HUB_OFFLINE", True)  # noqa: B010  (read by huggingface_hub at call time)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if constants is not None:
            setattr(constants, "HF_HUB_OFFLINE", before)  # noqa: B010


def endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT``, else huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def probe_timeout() -> float:
    """Seconds the one request may take: ``REWARDZOO_HUB_TIMEOUT`` when set to a positive number, else 5."""
    try:
        value = float(os.environ.get("REWARDZOO_HUB_TIMEOUT", ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def unreachable(repo: str | None = None, filename: str | None = None, url: str | None = None) -> str | None:
    """Why the hub (or ``url``'s host) cannot be reached, or None when it answers: ``HF_HUB_OFFLINE`` (no request),
    or the error of one HEAD request for ``repo``'s ``filename`` (``config.json`` when None; any answer counts) or
    for ``url``. Asked once per process and host."""
    if url is None and offline():
        return "HF_HUB_OFFLINE is set"
    key = url_host(url) if url is not None else endpoint()
    with _LOCK:
        if key in _ANSWERS:
            return _ANSWERS[key]
        answer = _ask_url(url) if url is not None else _ask_hub(repo or "", filename or "config.json")
        _ANSWERS[key] = answer
        return answer


def url_host(url: str) -> str:
    """``scheme://host[:port]`` of ``url``."""
    parts = urlparse(url)
    return f"{parts.scheme}://{parts.netloc}"


def forget() -> None:
    """Drop the kept answers (tests, and a process that waits for a network to come up)."""
    with _LOCK:
        _ANSWERS.clear()


def _ask_hub(repo: str, filename: str) -> str | None:
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.errors import OfflineModeIsEnabled
    except ImportError:
        return "huggingface_hub is not installed"
    target = hf_hub_url(repo, filename, endpoint=endpoint()) if repo.count("/") == 1 else f"{endpoint()}/api/models"
    try:
        get_hf_file_metadata(target, timeout=probe_timeout(), retry_on_errors=False)
    except OfflineModeIsEnabled:
        return "HF_HUB_OFFLINE is set"
    except Exception as exc:
        return _network_reason(exc, endpoint())
    return None


def _ask_url(url: str) -> str | None:
    import urllib.error
    import urllib.request

    try:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "rewardzoo"})
        with urllib.request.urlopen(request, timeout=probe_timeout()):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except Exception as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc} ({url_host(url)})"


def _network_reason(exc: BaseException, where: str) -> str | None:
    """The reason to report when ``exc`` (from huggingface_hub) means no answer came; None when one did."""
    seen: set[int] = set()
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        seen.add(id(item))
        response = getattr(item, "response", None)
        if response is not None and getattr(response, "status_code", None) is not None:
            return None  # an HTTP status: the hub is there
        name = type(item).__name__
        if any(word in name for word in ("Connect", "Timeout", "Network", "Protocol", "Offline")):
            return f"{name}: {str(item)[:200]} ({where})"
        item = item.__cause__ or item.__context__
    return None  # not a network failure: the library's own call reports it


def require_reachable(repo: str, files: str, filename: str | None = None) -> None:
    """Raise :class:`~rewardzoo.errors.MissingWeightsError` when ``repo``'s ``files`` (not in the cache: the caller
    looked) cannot be fetched now (:func:`unreachable`), naming the repository, the files and the fix."""
    from ..errors import MissingWeightsError

    reason = unreachable(repo, filename)
    if reason is None:
        return
    raise MissingWeightsError(
        f"cannot fetch {files} of the hub repository '{repo}' now ({reason}), and they are not on this machine: "
        "fetch them where the hub can be reached (`rewardzoo fetch CONFIG`, into a cache folder this machine reads: "
        "HF_HOME / HF_HUB_CACHE), or set model_path: to a local copy",
        repository=repo,
        files=(filename,) if filename else (),
    )
