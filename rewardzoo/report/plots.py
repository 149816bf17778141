"""The report's charts, drawn by matplotlib (imported here, on first use) as inline SVG text or PNG bytes."""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from .errors import ReportDependencyError

#: Most rewards whose Spearman values are printed in the heatmap's cells (the table below it has them all).
MAX_ANNOTATED = 25
#: Points drawn in a paired scatter at most (a seeded random subset beyond that keeps the SVG small).
MAX_SCATTER_POINTS = 2000
_COUNTER = itertools.count()
_XML_HEAD = re.compile(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", re.S)
_NAMESPACES = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise ReportDependencyError("matplotlib") from None
    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return matplotlib, Figure


@contextmanager
def _figure(width: float, height: float) -> Iterator:
    matplotlib, Figure = _matplotlib()
    # a salt per figure keeps the ids of clip paths and markers unique across the SVGs of one page
    style = {
        "svg.fonttype": "none",
        "svg.hashsalt": f"rz{next(_COUNTER)}",
        "font.size": 8,
        "font.family": "sans-serif",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "text.parse_math": False,
    }  # names are data: a `$` in a dataset or stream name is no math
    with matplotlib.rc_context(style):
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig


def _svg(fig) -> str:
    """The figure as SVG markup for inlining in HTML: no XML prologue, metadata or namespace URLs."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = _METADATA.sub("", _XML_HEAD.sub("", buf.getvalue()))
    text = _NAMESPACES.sub("", text).replace("xlink:href=", "href=")
    return text.replace("<svg ", '<svg role="img" ', 1)


def _png(fig, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def bin_edges(values: np.ndarray, max_bins: int = 50) -> np.ndarray:
    """Shared bin edges: about sqrt(n) bins (5 to ``max_bins``); one bin around the value when all are equal."""
    lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        half = max(abs(lo) * 0.05, 0.5)
        return np.array([lo - half, lo + half])
    bins = int(np.clip(np.sqrt(values.size), 5, max_bins))
    return np.linspace(lo, hi, bins + 1)


def histogram(series: Mapping[str, np.ndarray], xlabel: str, *, score_range: tuple[float, float] | None = None) -> str:
    """Step histograms of ``series`` (label -> finite values) over shared bins, one colour per label."""
    everything = np.concatenate(list(series.values()))
    edges = bin_edges(everything)
    with _figure(5.4, 2.5) as fig:
        ax = fig.add_subplot()
        for label, values in series.items():
            counts, _ = np.histogram(values, edges)
            ax.stairs(counts, edges, label=f"{label} (n={values.size})", fill=len(series) == 1, alpha=0.85)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("samples")
        if edges.size == 2:
            ax.set_xticks([float(everything[0])])
        if len(series) > 1:
            ax.legend(frameon=False, fontsize=7)
        return _svg(fig)


def group_spread_histogram(stds: np.ndarray, threshold: float, xlabel: str) -> str:
    """Histogram of within-group standard deviations, with the inseparability threshold marked."""
    edges = bin_edges(stds, max_bins=30)
    with _figure(3.6, 2.2) as fig:
        ax = fig.add_subplot()
        ax.stairs(np.histogram(stds, edges)[0], edges, fill=True, alpha=0.85)
        ax.axvline(threshold, color="#c0392b", linewidth=1, linestyle="--", label="threshold")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("groups")
        ax.legend(frameon=False, fontsize=7)
        return _svg(fig)


def correlation_heatmap(names: list[str], rho: np.ndarray) -> str:
    """The Spearman matrix as a diverging heatmap with each value printed in its cell."""
    k = len(names)
    side = min(9.0, 1.6 + 0.55 * k)
    with _figure(side + 1.2, side) as fig:
        ax = fig.add_subplot()
        shown = np.ma.masked_invalid(rho)
        image = ax.imshow(shown, vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(k), names, rotation=45, ha="right")
        ax.set_yticks(range(k), names)
        ax.spines[:].set_visible(False)
        for i in range(k if k <= MAX_ANNOTATED else 0):
            for j in range(k):
                value = rho[i, j]
                text = "n/a" if np.isnan(value) else f"{value:.2f}"
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if not np.isnan(value) and abs(value) > 0.6 else "black",
                )
        fig.colorbar(image, ax=ax, shrink=0.8, label="Spearman rho")
        return _svg(fig)


def paired_scatter(a: np.ndarray, b: np.ndarray, label_a: str, label_b: str, seed: int = 0) -> str:
    """B against A for each paired row (a seeded subset of :data:`MAX_SCATTER_POINTS` beyond that), y = x dashed."""
    if a.size > MAX_SCATTER_POINTS:
        keep = np.random.default_rng(seed).choice(a.size, MAX_SCATTER_POINTS, replace=False)
        a, b = a[keep], b[keep]
    lo, hi = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    with _figure(3.4, 3.2) as fig:
        ax = fig.add_subplot()
        ax.plot([lo, hi], [lo, hi], color="#888", linestyle="--", linewidth=0.8)
        ax.scatter(a, b, s=6, alpha=0.5, linewidths=0)
        ax.set_xlabel(f"A: {label_a}")
        ax.set_ylabel(f"B: {label_b}")
        ax.set_aspect("equal", adjustable="datalim")
        return _svg(fig)


def waveform_png(audio: np.ndarray, rate: int) -> bytes:
    """A small waveform picture (min/max envelope of mono ``audio``) as PNG bytes."""
    columns = 240
    if audio.size < columns:
        audio = np.pad(audio, (0, columns - audio.size))
    usable = audio[: audio.size - audio.size % columns]
    blocks = usable.reshape(columns, -1)
    t = np.arange(columns) * (audio.size / rate / columns)
    with _figure(2.4, 0.6) as fig:
        ax = fig.add_subplot()
        ax.fill_between(t, blocks.min(axis=1), blocks.max(axis=1), linewidth=0)
        ax.set_ylim(-1.05, 1.05)
        ax.axis("off")
        return _png(fig)


def step_curves(
    series: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]],
    ylabel: str,
    *,
    alarms: Sequence[int] = (),
    hline: float | None = None,
) -> str:
    """Lines over training steps (label -> steps, values, band low, band high; bands shaded), dashed red
    verticals at the ``alarms`` steps, an optional dotted horizontal at ``hline``."""
    with _figure(5.4, 2.4) as fig:
        ax = fig.add_subplot()
        for label, (steps, values, lo, hi) in series.items():
            marker = "o" if steps.size < 40 else None
            (line,) = ax.plot(steps, values, label=label, linewidth=1.2, marker=marker, markersize=2.5)
            if lo is not None and hi is not None:
                ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
        for k, step in enumerate(sorted(set(alarms))):
            ax.axvline(step, color="#c0392b", linewidth=0.9, linestyle="--", label="alarm" if k == 0 else None)
        if hline is not None:
            ax.axhline(hline, color="#888", linewidth=0.8, linestyle=":")
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.legend(frameon=False, fontsize=7)
        return _svg(fig)


def alarm_timeline(names: Sequence[str], steps: Sequence[int], span: tuple[int, int]) -> str:
    """One row per alarm name, a mark at each step it was raised, over the logged ``span`` of steps."""
    rows = list(dict.fromkeys(names))
    with _figure(5.4, 0.6 + 0.28 * len(rows)) as fig:
        ax = fig.add_subplot()
        ax.scatter(steps, [rows.index(n) for n in names], marker="|", s=120, color="#c0392b")
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlim(span[0] - 0.5, span[1] + 0.5)
        ax.set_xlabel("step")
        return _svg(fig)
