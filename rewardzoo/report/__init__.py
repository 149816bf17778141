"""`rewardzoo report`: one self-contained HTML page about a score file.

    rewardzoo report SCORES.jsonl [--manifest MANIFEST.jsonl] [--config CONFIG] [--out report.html]
                     [--compare OTHER_SCORES.jsonl] [--top K]

The page holds, per reward, its statistics, a histogram and the best and worst samples with their media;
across rewards, a Spearman matrix and the samples two rewards disagree on; per group, how well each
reward separates the members; with ``--compare``, paired differences and win rates with bootstrap
intervals. It opens offline: charts are inline SVG, media are downscaled base64 ``data:`` URIs, there is
no script and no external reference. Importing this package is light; matplotlib and SciPy (the
``report`` extra) are imported when a report is built. A front door: it may import every layer below it (see
:mod:`rewardzoo`); nothing but another front door imports it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .errors import (ManifestFileError, ReportConfigError, ReportDependencyError, ReportInputError,
                     ReportMismatchError, ScoreFileError)

if TYPE_CHECKING:
    from ..config import RewardConfig

__all__ = ["build_report", "cmd_report", "add_report_arguments", "ReportInputError", "ScoreFileError",
           "ManifestFileError", "ReportMismatchError", "ReportConfigError", "ReportDependencyError"]

DEFAULT_TOP = 8
MAX_TOP = 50


def build_report(scores_path: str | os.PathLike, *, manifest: str | os.PathLike | None = None,
                 config: str | os.PathLike | Mapping[str, Any] | "RewardConfig" | None = None,
                 out: str | os.PathLike = "report.html", compare: str | os.PathLike | None = None,
                 top: int = DEFAULT_TOP) -> Path:
    """Write the HTML report of ``scores_path`` (a ``rewardzoo score`` output) to ``out`` and return its path.

    ``manifest``: the manifest that was scored (adds media, prompts, datasets and groups); ``config``: the
    config it was scored with (a YAML path, a shipped config or reward name, a mapping or a RewardConfig),
    else reward facts come from the registry by column name; ``compare``: a second score file of the same
    samples (rows matched by position, or by ``id``); ``top``: best and worst samples shown per reward.
    Bad inputs raise :class:`ReportInputError` / :class:`ReportConfigError` subclasses naming the file and line.
    """
    _require("matplotlib")
    _require("scipy")
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP:
        raise ReportConfigError(f"--top must be an integer from 0 to {MAX_TOP}, got {top!r}")
    from . import media
    from .inputs import check_datasets, load_report_config, match_rows, read_aligned_manifest, reward_metas
    from .scores import read_scores
    from .sections import Comparison, ReportContext

    inputs = {"the score file": scores_path, "--manifest": manifest, "--compare": compare}
    if isinstance(config, (str, os.PathLike)):
        inputs["--config"] = config
    out = _checked_output(Path(out), {k: Path(v) for k, v in inputs.items() if v is not None})
    scores = read_scores(scores_path)
    cfg = load_report_config(config) if config is not None else None
    label = _config_label(config)
    metas = reward_metas(scores, cfg, f"the config {label}")
    rows = read_aligned_manifest(manifest, scores) if manifest is not None else None
    if rows is not None and cfg is not None:
        check_datasets(scores, rows, metas)
    comparison = None
    if compare is not None:
        other = read_scores(compare)
        if not set(other.names) & set(scores.names):
            raise ReportMismatchError(f"the score files share no reward ('{scores.path}': {', '.join(scores.names)}; "
                                      f"'{other.path}': {', '.join(other.names)})")
        a_ids = scores.ids if scores.ids is not None else (rows.ids if rows is not None else None)
        comparison = Comparison(other, *match_rows(scores, a_ids, other))
    ctx = ReportContext(scores, metas, rows, label, top, media.MediaEmbedder(budget=media.MEDIA_BUDGET), comparison)
    html = _render(ctx)
    _write_atomically(out, html)
    return out


def _render(ctx) -> str:
    from .page import document
    from .sections import (compare_section, correlation_section, disagreement_section, groups_section, header,
                           method_section, reward_section)

    nav = [(ctx.reward_anchor(i), m.name) for i, m in enumerate(ctx.metas)]
    sections = [reward_section(ctx, i) for i in range(len(ctx.metas))]
    corr, rho, keep = correlation_section(ctx)
    sections += [corr, disagreement_section(ctx, rho, keep)]
    nav += [("correlation", "correlation"), ("disagreement", "disagreement")]
    if ctx.manifest is not None and ctx.manifest.groups is not None:
        sections.append(groups_section(ctx))
        nav.append(("groups", "groups"))
    if ctx.comparison is not None:
        sections.append(compare_section(ctx))
        nav.append(("compare", "compare"))
    sections.append(method_section(ctx))
    nav.append(("method", "method"))
    date = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return document(f"rewardzoo report: {ctx.scores.path.name}", header(ctx, _versions(), date), nav, sections)


def _require(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ReportDependencyError(module)


def _versions() -> dict[str, str]:
    from importlib import metadata

    from .. import __version__

    found = {"rewardzoo": __version__}
    for dist in ("numpy", "scipy", "matplotlib", "Pillow"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    found["Python"] = platform.python_version()
    return found


def _config_label(config: Any) -> str | None:
    if config is None:
        return None
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config)
    return f"(a {type(config).__name__} given in Python)"


def _checked_output(out: Path, inputs: dict[str, Path]) -> Path:
    """Refuse an output that would overwrite an input or cannot be written, before any work."""
    for what, path in inputs.items():
        if (path.exists() and out.exists() and out.samefile(path)) or out.resolve() == path.resolve():
            raise ReportInputError(f"--out '{out}' is {what}; write the report to another file")
    if out.is_dir():
        raise ReportInputError(f"--out '{out}' is a directory; give a file path such as {out / 'report.html'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(prefix=f".{out.name}.", dir=out.parent).close()
    except OSError as exc:
        raise ReportInputError(f"--out '{out}' cannot be written: {exc.strerror or exc}") from None
    return out


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep a report meant for sharing from its readers
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------- CLI
def add_report_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` (the ``report`` subparser) its arguments and :func:`cmd_report` as its function."""
    parser.add_argument("scores", help="JSONL written by `rewardzoo score` (one line per manifest line)")
    parser.add_argument("--manifest", "-m", help="the manifest that was scored: adds media, prompts, datasets, groups")
    parser.add_argument("--config", "-c", help="the config it was scored with (YAML path, shipped config or reward "
                                               "name); default: reward facts from the registry by column name")
    parser.add_argument("--out", "-o", default="report.html", help="HTML file to write (default: report.html)")
    parser.add_argument("--compare", metavar="OTHER_SCORES", help="a second score file of the same samples: paired "
                                                                  "differences and win rates (B = this file)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP,
                        help=f"best and worst samples shown per reward (0-{MAX_TOP}, default {DEFAULT_TOP})")
    parser.set_defaults(func=cmd_report)
    return parser


def cmd_report(args: argparse.Namespace) -> int:
    """Run ``rewardzoo report`` from parsed arguments; prints the path written."""
    out = build_report(args.scores, manifest=args.manifest, config=args.config, out=args.out,
                       compare=args.compare, top=args.top)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0
