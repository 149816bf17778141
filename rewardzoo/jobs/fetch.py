"""``rewardzoo fetch CONFIG_OR_NAMES``: download the files each entry loads, verify them, write a lock file.

What an entry loads is what ``rewardzoo plan`` reads (:meth:`~rewardzoo.rewards.base.Reward.weight_files`), with the
repository each part comes from (:class:`~rewardzoo.shared.checkpoints.Remote`): a file of a hub repository (the
first of its candidate names the repository holds: ``open_clip_model.safetensors`` before
``open_clip_pytorch_model.bin``), a whole hub model (its weights, safetensors before pickles, with its configuration
and tokenizer files; nothing else of the repository), or a URL (into torch's hub cache). A reward whose class
names a ``default_processor`` (the tokenizer and image-processor repository it reads for a hub model) gets that
repository's configuration files too.

The repository's file list (``model_info`` with file metadata) gives each file's size and checksum: after the
download a file must have that size and, for a file in LFS, that SHA-256 (else its git blob id). The lock file
(:mod:`rewardzoo.shared.lockfile`) records each file's repository, resolved commit, name, size and SHA-256; with
``--locked`` the fetch takes the lock's commits and refuses bytes that differ from it; a run with
``REWARDZOO_LOCK=PATH`` loads only locked bytes (:mod:`rewardzoo.core.hub_weights`).

Files go into the Hugging Face cache (``HF_HUB_CACHE``; ``--to DIR``: ``DIR/hub``, the cache of ``HF_HOME=DIR``) and
torch's hub cache (``--to DIR``: ``DIR/torch``, that of ``TORCH_HOME=DIR/torch``), where the libraries look for them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.resolve import parse_spec, resolve_config
from ..errors import ConfigError, MissingWeightsError, RegistryError, RewardZooError
from ..registry import find
from ..shared.checkpoints import Checkpoint, Remote, format_size
from ..shared.hub import endpoint as hub_endpoint
from ..shared.lockfile import Lock, LockedFile, git_blob_sha1, read_lock, sha256_file, write_lock
from ..spec.config import RewardSpec

#: The lock file written (and read with ``--locked``) when ``--lock`` names none.
DEFAULT_LOCK = "rewardzoo.lock"
#: The configuration and tokenizer files fetched with a whole hub model (top-level files only; ``.jinja``: a
#: processor's chat template, saved beside its config by recent transformers).
_CONFIG_FILE = re.compile(r"^[^/]+\.(json|txt|model|tiktoken|jinja)$|^[^/]*(vocab|merges|tokenizer)[^/]*$")


@dataclass
class Wanted:
    """One source an entry loads from: a hub ``repo`` (``files``: candidate names, the first present wins; ``newest``:
    the highest-numbered file matching it; neither: the whole model; ``configs_only``: only its configuration files)
    or a ``url`` saved as ``target``."""

    repo: str | None = None
    files: tuple[str, ...] = ()
    url: str | None = None
    target: str | None = None
    revision: str | None = None
    configs_only: bool = False
    newest: str | None = None
    entries: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.repo, self.files, self.url, self.revision, self.configs_only, self.newest)

    @property
    def where(self) -> str:
        return self.url or str(self.repo)


@dataclass
class FileToFetch:
    """One file of the fetch: its source, the commit it resolves to (None for a URL), its size and checksums as the
    hub states them (None when it states none), and where it ended up."""

    wanted: Wanted
    file: str
    commit: str | None
    size: int | None
    lfs_sha256: str | None = None
    blob_id: str | None = None
    path: Path | None = None
    sha256: str | None = None
    verified: str = ""


def entry_specs(sources: Sequence[str]) -> list[RewardSpec]:
    """The entries (train and eval, deduplicated by name) of every config, reward name or shipped config named."""
    specs: dict[str, RewardSpec] = {}
    for source in sources:
        config = resolve_config(source)
        for spec in (*config.rewards, *config.eval_rewards):
            specs.setdefault(spec.name, spec)
    return list(specs.values())


def wanted_sources(specs: Iterable[RewardSpec], revisions: Mapping[str | None, str] | None = None) -> list[Wanted]:
    """Every source the entries load from (their inner rewards' too), merged by source. ``revisions``: a revision
    per repository (key None: every repository); an entry's own ``revision:`` comes first."""
    revisions = dict(revisions or {})
    out: dict[tuple[Any, ...], Wanted] = {}
    todo = list(specs)
    while todo:
        spec = todo.pop(0)
        cls, kwargs, inner = _reward_class(spec)
        todo.extend(inner)
        if cls is None:
            continue
        try:
            parts: list[Checkpoint] = list(cls.weight_files(spec.model_path, kwargs))
        except ConfigError as exc:
            raise ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        found: list[Wanted] = []
        for part in parts:
            remote: Remote | None = part.remote
            if remote is None:
                continue
            if remote.url is not None:
                found.append(Wanted(url=remote.url, target=remote.target))
                continue
            revision = spec.revision or revisions.get(remote.repo) or revisions.get(None)
            found.append(
                Wanted(
                    repo=remote.repo,
                    files=remote.files,
                    revision=revision,
                    configs_only=remote.configs_only,
                    newest=remote.newest,
                )
            )
        processor = _processor_repo(cls, spec, kwargs)
        if processor is not None:
            found.append(Wanted(repo=processor, configs_only=True, revision=revisions.get(processor)))
        for item in found:
            merged = out.setdefault(item.key, item)
            if spec.name not in merged.entries:
                merged.entries.append(spec.name)
    return list(out.values())


def _reward_class(spec: RewardSpec) -> tuple[Any, dict[str, Any], list[RewardSpec]]:
    try:
        cls: Any = find(spec.reward_model).load_class()
    except RegistryError as exc:
        raise exc.in_entry(spec.name, "reward_model") if exc.entry is None else exc from exc.__cause__
    kwargs, entries = cls.inner_rewards(dict(spec.kwargs), model_path=spec.model_path, device="cpu", dtype="float32")
    inner = [
        parse_spec({"name": f"{spec.name}.{param}", **entry}, f"{spec.name}: {param}")
        for param, entry in entries.items()
    ]
    return cls, kwargs, inner


def _processor_repo(cls: Any, spec: RewardSpec, kwargs: Mapping[str, Any]) -> str | None:
    """The hub repository a reward takes its tokenizer and image-processor configs from: its ``processor_path``
    option when that is a hub id, else its class's ``default_processor``; None for a local ``model_path``."""
    default = getattr(cls, "default_processor", None)
    if not isinstance(default, str) or (spec.model_path and Path(spec.model_path).expanduser().exists()):
        return None
    option = kwargs.get("processor_path")
    chosen = str(option) if option else default
    if Path(chosen).expanduser().exists() or chosen.count("/") != 1:
        return None
    return chosen


def hub_files(items: Sequence[Wanted], *, endpoint: str | None = None) -> list[FileToFetch]:
    """The files of the hub sources ``items``, as their repositories list them at their revisions (one
    ``model_info`` per repository and revision), and each URL source as one file of unknown size."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint or hub_endpoint())
    infos: dict[tuple[str, str | None], Any] = {}
    out: list[FileToFetch] = []
    # a repository fetched as a whole model brings its configs: its configs-only source is skipped
    skipped_processors = {w.repo for w in items if not (w.configs_only or w.files or w.newest or w.url)}
    for item in items:
        if item.url is not None:
            out.append(FileToFetch(item, os.path.basename(str(item.target)), None, None))
            continue
        assert item.repo is not None
        if item.configs_only and item.repo in skipped_processors:
            continue  # the same repository is fetched as a model
        key = (item.repo, item.revision)
        if key not in infos:
            try:
                infos[key] = api.model_info(item.repo, revision=item.revision, files_metadata=True)
            except Exception as exc:
                raise MissingWeightsError(
                    f"cannot list '{item.repo}'{f' at revision {item.revision}' if item.revision else ''} on the hub "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''})",
                    entry=item.entries[0] if item.entries else None,
                    repository=item.repo,
                ) from None
        info = infos[key]
        siblings = {s.rfilename: s for s in info.siblings or ()}
        for name in _select(item, siblings, items):
            s = siblings[name]
            lfs = getattr(s, "lfs", None)
            size = lfs.size if lfs is not None else s.size
            out.append(FileToFetch(item, name, info.sha, size, lfs.sha256 if lfs is not None else None, s.blob_id))
    return out


def _select(item: Wanted, siblings: Mapping[str, Any], items: Sequence[Wanted]) -> list[str]:
    names = sorted(siblings)
    if item.files:
        chosen = next((f for f in item.files if f in siblings), None)
        if chosen is None:
            raise MissingWeightsError(
                f"'{item.repo}' holds none of {', '.join(item.files)}",
                entry=item.entries[0] if item.entries else None,
                repository=item.repo,
                files=item.files,
            )
        return [chosen]
    if item.newest is not None:
        return [_newest(item, names)]
    configs = [n for n in names if _CONFIG_FILE.match(n) and n != ".gitattributes"]
    if item.configs_only:  # a base model's config and tokenizer: not the index of weights it does not fetch
        return [n for n in configs if not n.endswith(".index.json")]
    top = [n for n in names if "/" not in n]
    weights = [n for n in top if n.endswith(".safetensors")] or [n for n in top if n.endswith((".bin", ".pth", ".pt"))]
    if not weights:
        raise MissingWeightsError(
            f"'{item.repo}' holds no weights file (.safetensors, .bin, .pth, .pt) at its top level",
            entry=item.entries[0] if item.entries else None,
            repository=item.repo,
        )
    return sorted(set(configs) | set(weights))


def _newest(item: Wanted, names: Sequence[str]) -> str:
    """The repository file matching ``item.newest`` with the highest number (a release's latest checkpoint)."""
    pattern = re.compile(str(item.newest))
    numbered = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
    if not numbered:
        raise MissingWeightsError(
            f"'{item.repo}' holds no file matching {item.newest}",
            entry=item.entries[0] if item.entries else None,
            repository=item.repo,
        )
    return max(numbered)[1]


def download(files: list[FileToFetch], *, cache: Path | None, torch_dir: Path | None, quiet: bool) -> None:
    """Download each file (huggingface_hub's own client for hub files: its cache layout, its progress bars) and
    record its path and SHA-256, checking it against what the hub stated (size; LFS SHA-256, else git blob id)."""
    for f in files:
        if f.wanted.url is not None:
            f.path = _download_url(f.wanted.url, _url_target(f.wanted, torch_dir), quiet)
        else:
            f.path = _download_hub(f, cache, quiet)
        f.sha256 = sha256_file(f.path)
        f.verified = _verify(f)


def _download_hub(f: FileToFetch, cache: Path | None, quiet: bool) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    assert f.wanted.repo is not None
    revision = f.wanted.revision or "main"  # a branch or tag name: the cache records where it points (refs/)
    if quiet:
        disable_progress_bars()
    try:
        path = Path(hf_hub_download(f.wanted.repo, f.file, revision=revision, cache_dir=cache, endpoint=hub_endpoint()))
    except Exception as exc:
        raise MissingWeightsError(
            f"cannot download '{f.file}' of '{f.wanted.repo}' ({type(exc).__name__}: {str(exc)[:300]})",
            entry=f.wanted.entries[0] if f.wanted.entries else None,
            repository=f.wanted.repo,
            files=(f.file,),
        ) from None
    finally:
        if quiet:
            enable_progress_bars()
    if f.commit and f.commit not in path.parts:
        raise RewardZooError(
            f"'{f.wanted.repo}' moved from commit {f.commit} while it was fetched ({path}); run `rewardzoo fetch` again"
        )
    return path


def _url_target(item: Wanted, torch_dir: Path | None) -> Path:
    target = Path(str(item.target))
    if torch_dir is None:
        return target
    return torch_dir / "hub" / "checkpoints" / target.name


def _download_url(url: str, target: Path, quiet: bool) -> Path:
    if target.is_file():
        return target
    import urllib.request

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            bar = _bar(total, target.name, quiet)
            while chunk := response.read(1 << 20):
                out.write(chunk)
                bar.update(len(chunk))
            bar.close()
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise MissingWeightsError(f"cannot download {url}: {exc}", repository=url) from None
    return target


def _bar(total: int | None, name: str, quiet: bool) -> Any:
    from tqdm.auto import tqdm  # type: ignore[import-untyped]  # huggingface_hub's dependency

    return tqdm(total=total, unit="B", unit_scale=True, desc=name, disable=quiet, file=sys.stderr)


def _verify(f: FileToFetch) -> str:
    assert f.path is not None and f.sha256 is not None
    size = f.path.stat().st_size
    where = f"'{f.file}' of '{f.wanted.where}'"
    if f.size is not None and size != f.size:
        raise MissingWeightsError(
            f"{where} has {size} bytes, the hub states {f.size}: delete {f.path} and fetch again",
            repository=f.wanted.where,
            files=(f.file,),
        )
    if f.lfs_sha256 is not None:
        if f.sha256 != f.lfs_sha256:
            raise MissingWeightsError(
                f"{where} has SHA-256 {f.sha256}, the hub states {f.lfs_sha256}: delete {f.path} and fetch again",
                repository=f.wanted.where,
                files=(f.file,),
            )
        return "sha256"
    if f.blob_id is not None:
        blob = git_blob_sha1(f.path)
        if blob != f.blob_id:
            raise MissingWeightsError(
                f"{where} has git blob id {blob}, the hub states {f.blob_id}: delete {f.path} and fetch again",
                repository=f.wanted.where,
                files=(f.file,),
            )
        return "git blob id"
    found = re.search(r"-([0-9a-f]{8,64})\.[A-Za-z]+$", f.file)  # torch hub's convention: a SHA-256 prefix
    if f.wanted.url is not None and found and f.sha256.startswith(found.group(1)):
        return "sha256 prefix in the name"
    return "unverified (the source states no checksum)"


def check_against_lock(files: Sequence[FileToFetch], lock: Lock, lock_path: str) -> None:
    """With ``--locked``: every file is in the lock with the same commit and SHA-256."""
    for f in files:
        locked = next((x for x in lock.files_of(f.wanted.where) if x.file == f.file), None)
        if locked is None:
            raise MissingWeightsError(
                f"'{f.file}' of '{f.wanted.where}' is not in the lock file {lock_path}; fetch without --locked to "
                "renew the lock",
                entry=f.wanted.entries[0] if f.wanted.entries else None,
                repository=f.wanted.where,
                files=(f.file,),
            )
        if f.sha256 is not None and f.sha256 != locked.sha256:
            raise MissingWeightsError(
                f"'{f.file}' of '{f.wanted.where}' has SHA-256 {f.sha256}, the lock file {lock_path} says "
                f"{locked.sha256}",
                entry=f.wanted.entries[0] if f.wanted.entries else None,
                repository=f.wanted.where,
                files=(f.file,),
            )


def locked_revisions(lock: Lock) -> dict[str | None, str]:
    """The commit of each hub repository of ``lock``."""
    return {f.repository: f.revision for f in lock.files if f.revision is not None}


def parse_revisions(values: Sequence[str]) -> dict[str | None, str]:
    """``--revision`` values: ``REPO=REV`` for one repository, a bare ``REV`` for every repository."""
    out: dict[str | None, str] = {}
    for value in values:
        repo, sep, rev = value.rpartition("=")
        if not rev or (sep and not repo):
            raise RewardZooError(f"--revision takes REV or REPO=REV, got {value!r}")
        out[repo or None] = rev
    return out


def run_fetch(
    sources: Sequence[str],
    *,
    to: str | None = None,
    revisions: Sequence[str] = (),
    lock_path: str | None = None,
    locked: bool = False,
    dry_run: bool = False,
    quiet: bool = False,
    out: Any = None,
) -> list[FileToFetch]:
    """``rewardzoo fetch``: list, download, verify, lock (see the module docstring); returns the files."""
    out = out or sys.stdout
    lock_file = lock_path or DEFAULT_LOCK
    pins = parse_revisions(revisions)
    lock = read_lock(lock_file) if locked else None
    if lock is not None:
        pins = {**locked_revisions(lock), **pins}
    specs = entry_specs(sources)
    items = wanted_sources(specs, pins)
    if lock is not None:
        items = [replace(w, revision=w.revision or lock.revision_of(w.where)) for w in items]
    files = hub_files(items)
    cache = Path(to).expanduser() / "hub" if to else None
    torch_dir = Path(to).expanduser() / "torch" if to else None
    _print_plan(files, specs, out)
    for note in card_revision_notes(specs, files):
        print(f"note: {note}", file=out)
    if dry_run or not files:
        return files
    download(files, cache=cache, torch_dir=torch_dir, quiet=quiet)
    if lock is not None:
        check_against_lock(files, lock, lock_file)
    for f in files:
        print(f"  {f.wanted.where}  {f.file}: {f.verified}", file=out)
    if not locked:
        write_lock(lock_file, Lock([_locked(f) for f in files]))
        print(f"wrote the lock file {lock_file} ({len(files)} files)", file=out)
    if to:
        root = Path(to).expanduser().resolve()
        print(
            f"run with: HF_HOME={root} TORCH_HOME={root / 'torch'} HF_HUB_OFFLINE=1 (add REWARDZOO_LOCK="
            f"{Path(lock_file).resolve()} to load only the locked weights)",
            file=out,
        )
    return files


def card_revision_notes(specs: Sequence[RewardSpec], files: Sequence[FileToFetch]) -> list[str]:
    """A note for each entry loading its reward's own repository at another commit than the ``revision:`` its card
    says its figures came from."""
    from ..registry import read_card

    notes = []
    for spec in specs:
        if spec.model_path is not None or spec.revision is not None:
            continue
        try:
            revision = read_card(spec.reward_model)[0].get("revision")
        except RewardZooError:
            continue
        fetched = {f.commit for f in files if spec.name in f.wanted.entries and f.commit and not f.wanted.configs_only}
        commit = isinstance(revision, str) and re.fullmatch(r"[0-9a-f]{7,40}", revision)
        if commit and fetched and not any(c.startswith(str(revision)) for c in fetched):
            notes.append(
                f"entry '{spec.name}': its card's figures came from revision {revision}; fetched "
                f"{', '.join(sorted(c[:12] for c in fetched))} (pin it with `revision: {revision}`)"
            )
    return notes


def _locked(f: FileToFetch) -> LockedFile:
    assert f.path is not None and f.sha256 is not None
    return LockedFile(
        repository=f.wanted.where,
        revision=f.commit,
        file=f.file,
        size=f.path.stat().st_size,
        sha256=f.sha256,
        entries=tuple(f.wanted.entries),
    )


def _print_plan(files: Sequence[FileToFetch], specs: Sequence[RewardSpec], out: Any) -> None:
    if not files:
        print(f"nothing to fetch: the {len(specs)} entries load no hub or URL files", file=out)
        return
    rows: list[list[object]] = [["entries", "repository", "revision", "file", "size"]]
    for f in files:
        rows.append(
            [
                ", ".join(f.wanted.entries),
                f.wanted.where,
                (f.commit or "-")[:12],
                f.file,
                format_size(f.size) if f.size is not None else "unknown",
            ]
        )
    print(_table(rows), file=out)
    known = sum(f.size or 0 for f in files)
    print(f"{len(files)} files, {format_size(known)}", file=out)


def _table(rows: list[list[object]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
