"""`rewardzoo report`: one self-contained HTML page about a score file or a training log.

This module holds the builders (:func:`build_report`, :func:`build_report_from_records`,
:func:`build_training_report`) and the command (:func:`cmd_report`); ``scores`` and ``inputs`` read and check the
inputs, ``stats``, ``plots``, ``sections``, ``media`` and ``page`` make the page, ``training`` the training page.
Light to import: matplotlib and SciPy (the ``report`` extra) come when a page is built. What a page holds:
``docs/report.md``.

A front door: may import every layer below, the job layer included (see :mod:`rewardzoo`); nothing but another
front door imports it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import (
    ManifestFileError,
    ReportConfigError,
    ReportDependencyError,
    ReportInputError,
    ReportMismatchError,
    ScoreFileError,
)

if TYPE_CHECKING:
    from ..jobs.inputs import InputRows
    from ..spec.config import RewardConfig

__all__ = [
    "build_report",
    "build_report_from_records",
    "build_training_report",
    "evaluation_inputs",
    "cmd_report",
    "add_report_arguments",
    "ReportInputError",
    "ScoreFileError",
    "ManifestFileError",
    "ReportMismatchError",
    "ReportConfigError",
    "ReportDependencyError",
]

DEFAULT_TOP = 8
MAX_TOP = 50


def build_report(
    scores_path: str | os.PathLike,
    *,
    manifest: str | os.PathLike | None = None,
    config: str | os.PathLike | Mapping[str, Any] | RewardConfig | None = None,
    out: str | os.PathLike = "report.html",
    compare: str | os.PathLike | None = None,
    top: int = DEFAULT_TOP,
    agreement: str | os.PathLike | None = None,
) -> Path:
    """Write the HTML report of ``scores_path`` (a ``rewardzoo score`` output) to ``out`` and return its path.

    ``manifest``: the manifest that was scored (adds media, prompts, datasets and groups); ``config``: the
    config it was scored with (a YAML path, a shipped config or reward name, a mapping or a RewardConfig),
    else reward facts come from the registry by column name; ``compare``: a second score file of the same
    samples (rows matched by position, or by ``id``); ``top``: best and worst samples shown per reward;
    ``agreement``: the ``agreement.json`` of ``rewardzoo evaluate`` (adds the agreement section: a table and a
    plot of the rewards side by side). :func:`evaluation_inputs` finds the three files of an evaluate folder.
    Bad inputs raise :class:`ReportInputError` / :class:`ReportConfigError` subclasses naming the file and line.
    """
    _check_options(top)
    from .agreement import read_agreement
    from .inputs import read_aligned_manifest
    from .scores import read_scores

    out = _checked_output(out, scores_path, manifest, config, compare, agreement)
    agreed = read_agreement(agreement) if agreement is not None else None
    scores = read_scores(scores_path)
    return _build(
        scores,
        lambda: read_aligned_manifest(manifest, scores) if manifest is not None else None,
        config,
        out,
        compare,
        top,
        agreed,
    )


def evaluation_inputs(folder: str | os.PathLike) -> dict[str, Path]:
    """The score file, manifest and agreement results of a ``rewardzoo evaluate --out`` folder (keys
    ``scores_path``, ``manifest``, ``agreement`` of :func:`build_report`); ReportInputError when one is missing."""
    root = Path(folder)
    found = {
        "scores_path": root / "scores.jsonl",
        "manifest": root / "members.jsonl",
        "agreement": root / "agreement.json",
    }
    for path in found.values():
        if not path.is_file():
            raise ReportInputError(
                "not a `rewardzoo evaluate --out` folder: it needs scores.jsonl, members.jsonl and agreement.json",
                path=path,
            )
    return found


def build_report_from_records(
    records: Sequence[Mapping[str, Any]],
    *,
    scores_path: str | os.PathLike,
    manifest: str | os.PathLike | None = None,
    rows: InputRows | None = None,
    config: str | os.PathLike | Mapping[str, Any] | RewardConfig | None = None,
    out: str | os.PathLike = "report.html",
    top: int = DEFAULT_TOP,
) -> Path:
    """:func:`build_report` of scores still in memory (``rewardzoo score --report``): ``records`` are the lines
    just written to ``scores_path``, ``rows`` the manifest ``manifest``'s rows as the job read them; the page is
    the one :func:`build_report` writes from the files."""
    _check_options(top)
    from .inputs import aligned_manifest
    from .scores import scores_of_records

    out = _checked_output(out, scores_path, manifest, config, None)
    scores = scores_of_records(records, scores_path)
    return _build(
        scores,
        lambda: (
            aligned_manifest(manifest, rows.samples, rows.numbers, scores, rows.ids)
            if manifest is not None and rows is not None
            else None
        ),
        config,
        out,
        None,
        top,
    )


def build_training_report(log_path: str | os.PathLike, *, out: str | os.PathLike = "report.html") -> Path:
    """Write the HTML report of a RewardMonitor log (``monitor.jsonl``) to ``out`` and return its path.

    A bad line raises :class:`~rewardzoo.monitor.log.MonitorLogError` naming the file and line."""
    _require("matplotlib")
    from ..jobs.output import check_output, write_text
    from ..monitor.log import read_monitor_log
    from .training import render_training

    out = check_output(
        Path(out),
        {"the training log": Path(log_path)},
        holds="the report",
        example="report.html",
        error=ReportInputError,
    )
    log = read_monitor_log(log_path)
    write_text(out, render_training(log, _versions()))
    return out


def _check_options(top: Any) -> None:
    _require("matplotlib")
    _require("scipy")
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP:
        raise ReportConfigError(f"--top must be an integer from 0 to {MAX_TOP}, got {top!r}")


def _checked_output(
    out: str | os.PathLike, scores: Any, manifest: Any, config: Any, compare: Any, agreement: Any = None
) -> Path:
    """Refuse an output that would overwrite an input or cannot be written, before any work."""
    from ..jobs.output import check_output

    inputs = {"the score file": scores, "--manifest": manifest, "--compare": compare, "--agreement": agreement}
    if isinstance(config, (str, os.PathLike)):
        inputs["--config"] = config
    return check_output(
        Path(out),
        {k: Path(v) for k, v in inputs.items() if v is not None},
        holds="the report",
        example="report.html",
        error=ReportInputError,
    )


def _build(scores, read_rows, config, out: Path, compare, top: int, agreement=None) -> Path:
    from ..jobs.output import write_text
    from . import media
    from .inputs import check_datasets, load_report_config, match_rows, reward_metas
    from .scores import read_scores
    from .sections import Comparison, ReportContext

    cfg = load_report_config(config) if config is not None else None
    label = _config_label(config)
    metas = reward_metas(scores, cfg, f"the config {label}")
    rows = read_rows()
    if rows is not None and cfg is not None:
        check_datasets(scores, rows, metas)
    comparison = None
    if compare is not None:
        other = read_scores(compare)
        if not set(other.names) & set(scores.names):
            raise ReportMismatchError(
                f"the score files share no reward ('{scores.path}': {', '.join(scores.names)}; "
                f"'{other.path}': {', '.join(other.names)})"
            )
        a_ids = scores.ids if scores.ids is not None else (rows.ids if rows is not None else None)
        comparison = Comparison(other, *match_rows(scores, a_ids, other))
    ctx = ReportContext(scores, metas, rows, label, top, media.MediaEmbedder(budget=media.MEDIA_BUDGET), comparison)
    write_text(out, _render(ctx, agreement))
    return out


def _render(ctx, agreement=None) -> str:
    from .page import document
    from .sections import (
        compare_section,
        correlation_section,
        disagreement_section,
        groups_section,
        header,
        method_section,
        reward_section,
    )

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
    if agreement is not None:
        from .agreement import agreement_section

        sections.append(agreement_section(agreement))
        nav.append(("agreement", "agreement"))
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


# ---------------------------------------------------------------------------------------------- CLI
def add_report_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` (the ``report`` subparser) its arguments and :func:`cmd_report` as its function."""
    parser.add_argument(
        "scores",
        help="JSONL written by `rewardzoo score` (one line per manifest line), or a "
        "training log written by RewardMonitor (curves, alarms, inseparable groups)",
    )
    parser.add_argument("--manifest", "-m", help="the manifest that was scored: adds media, prompts, datasets, groups")
    parser.add_argument(
        "--config",
        "-c",
        help="the config it was scored with (YAML path, shipped config or reward "
        "name); default: reward facts from the registry by column name",
    )
    parser.add_argument("--out", "-o", default="report.html", help="HTML file to write (default: report.html)")
    parser.add_argument(
        "--compare",
        metavar="OTHER_SCORES",
        help="a second score file of the same samples: paired differences and win rates (B = this file)",
    )
    parser.add_argument(
        "--agreement",
        metavar="AGREEMENT_JSON",
        help="the agreement.json of `rewardzoo evaluate`: adds its agreement section (table and plot); "
        "or pass the evaluate --out folder itself as the score file",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        help=f"best and worst samples shown per reward (0-{MAX_TOP}, default {DEFAULT_TOP})",
    )
    parser.set_defaults(func=cmd_report)
    return parser


def cmd_report(args: argparse.Namespace) -> int:
    """Run ``rewardzoo report`` from parsed arguments; prints the path written."""
    from ..monitor.log import is_monitor_log

    if is_monitor_log(args.scores):
        given = [
            flag
            for flag, value in (
                ("--manifest", args.manifest),
                ("--config", args.config),
                ("--compare", args.compare),
                ("--agreement", args.agreement),
            )
            if value is not None
        ]
        if given:
            raise ReportConfigError(f"{', '.join(given)} apply to a score file; '{args.scores}' is a training log")
        out = build_training_report(args.scores, out=args.out)
        print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
        return 0
    files: dict[str, Any] = {"scores_path": args.scores, "manifest": args.manifest, "agreement": args.agreement}
    if Path(args.scores).is_dir():  # a `rewardzoo evaluate --out` folder: its scores, members and agreement
        found = evaluation_inputs(args.scores)
        files = {k: v if files.get(k) is None or k == "scores_path" else files[k] for k, v in found.items()}
    out = build_report(
        files["scores_path"],
        manifest=files["manifest"],
        agreement=files["agreement"],
        config=args.config,
        out=args.out,
        compare=args.compare,
        top=args.top,
    )
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0
