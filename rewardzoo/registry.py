"""Static, lazy table of rewards: lowercase name -> implementation path and metadata.

Nothing here imports a reward module; :func:`resolve` does, when a reward is built. Besides the
table, a reward can be named by its Python path (``pkg.mod:Class`` or ``pkg.mod.Class``), registered
from user code with :func:`register`, or published by a third-party package under the entry-point
group ``rewardzoo.rewards``.

The metadata columns repeat the class attributes so that ``rewardzoo list`` needs no import; a test
checks that table, classes and model cards agree.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Callable, TypeVar

from .errors import MissingExtraError, RegistryError, did_you_mean

INF = math.inf


@dataclass(frozen=True)
class RewardEntry:
    """One registry row. ``download``: the reward needs weights that are not shipped with a package."""

    target: str
    modality: str
    kind: str
    extra: str | None
    higher_is_better: bool
    score_range: tuple[float, float]
    download: bool
    summary: str


def _e(target, modality, kind, extra, score_range, summary, *, download=True, higher_is_better=True):
    return RewardEntry(target, modality, kind, extra, higher_is_better, score_range, download, summary)


_R = "rewardzoo.rewards."

REGISTRY: dict[str, RewardEntry] = {
    # image
    "jpeg_compressibility": _e(_R + "image.jpeg:JpegCompressibility", "image", "pointwise", None, (-INF, 0.0),
                               "-(JPEG q95 size in kB) / 500 (flow_grpo)", download=False),
    "jpeg_incompressibility": _e(_R + "image.jpeg:JpegIncompressibility", "image", "pointwise", None, (0.0, INF),
                                 "JPEG q95 size in kB (flow_grpo)", download=False),
    "clip_score": _e(_R + "image.clip_score:ClipScore", "image", "pointwise", "image", (0.0, 2.5),
                     "CLIPScore, 2.5 * max(cos(image, text), 0)"),
    "pickscore": _e(_R + "image.pickscore:PickScore", "image", "pointwise", "image", (-INF, INF),
                    "PickScore, logit_scale * cos(image, text) * scale"),
    "hpsv2": _e(_R + "image.hpsv2:HPSv2", "image", "pointwise", "image", (-1.0, 1.0),
                "HPSv2/v2.1 human preference, cos(image, text)"),
    "laion_aesthetic": _e(_R + "image.aesthetic:LaionAesthetic", "image", "pointwise", "image", (-INF, INF),
                          "LAION aesthetic predictor v2 (CLIP ViT-L/14 + MLP), about 1-10"),
    "clip_image_similarity": _e(_R + "image.similarity:ClipImageSimilarity", "image", "pointwise", "image",
                                (-1.0, 1.0), "CLIP cosine between image and its condition image(s)"),
    # video
    "video_temporal_flickering": _e(_R + "video.flickering:TemporalFlickering", "video", "pointwise", "video",
                                    (0.0, 1.0), "VBench temporal flickering, (255 - mean frame MAE) / 255",
                                    download=False),
    "video_subject_consistency": _e(_R + "video.consistency:SubjectConsistency", "video", "pointwise", "video",
                                    (0.0, 1.0), "VBench subject consistency on DINO features"),
    "video_background_consistency": _e(_R + "video.consistency:BackgroundConsistency", "video", "pointwise",
                                       "video", (0.0, 1.0), "VBench background consistency on CLIP features"),
    "video_clip_score": _e(_R + "video.frame_scores:VideoClipScore", "video", "pointwise", "video", (0.0, 2.5),
                           "mean CLIPScore of sampled frames against the prompt"),
    "video_aesthetic": _e(_R + "video.frame_scores:VideoAesthetic", "video", "pointwise", "video", (-INF, INF),
                          "mean LAION aesthetic score of sampled frames"),
    # audio
    "dnsmos": _e(_R + "audio.dnsmos:DNSMOS", "audio", "pointwise", "audio", (1.0, 5.0),
                 "DNSMOS P.835 / P.808 speech quality MOS (weights ship in speechmos)", download=False),
    "clap_score": _e(_R + "audio.clap:ClapScore", "audio", "pointwise", "audio", (-1.0, 1.0),
                     "CLAP cosine between audio and prompt"),
    "loudness": _e(_R + "audio.loudness:Loudness", "audio", "pointwise", "audio", (-INF, 0.0),
                   "-|integrated loudness (BS.1770-4) - target LUFS|", download=False),
    "audio_clipping": _e(_R + "audio.clipping:AudioClipping", "audio", "pointwise", "audio", (0.0, 1.0),
                         "1 - fraction of samples at or beyond full scale", download=False),
    # groupwise
    "group_rank": _e(_R + "group.ranking:GroupRank", "group", "groupwise", None, (0.0, 1.0),
                     "rank of the base score within its group, rank / (n - 1)", download=False),
    "pairwise_winrate": _e(_R + "group.ranking:PairwiseWinRate", "group", "groupwise", None, (0.0, 1.0),
                           "Pref-GRPO pairwise win rate within the group", download=False),
    "group_normalized": _e(_R + "group.ranking:GroupNormalized", "group", "groupwise", None, (-INF, INF),
                           "(base - group mean) / (group std + eps)", download=False),
    # text / sequence
    "sequence_reward": _e(_R + "text.sequence_reward:SequenceReward", "text", "pointwise", "text", (-INF, INF),
                          "scalar or binned reward head over prompt + completion tokens"),
    "implicit_prm": _e(_R + "text.implicit_prm:ImplicitPRMReward", "text", "pointwise", "text", (-INF, INF),
                       "implicit process reward, beta * sum log(pi / pi_ref) over the completion"),
}

#: Modules each extra brings; a reward's extra counts as installed when all are importable.
EXTRA_MODULES: dict[str, tuple[str, ...]] = dict(
    image=("torch", "torchvision", "open_clip", "transformers"),
    video=("torch", "torchvision", "transformers", "open_clip", "av"),
    audio=("torch", "torchaudio", "soundfile", "onnxruntime", "speechmos", "scipy", "transformers"),
    text=("torch", "transformers"),
)

_USER: dict[str, type] = {}
_PLUGINS: dict[str, str] | None = None
T = TypeVar("T", bound=type)


def register(name: str) -> Callable[[T], T]:
    """Class decorator: make a user reward available under ``name`` (lowercased) in configs."""
    key = name.lower()

    def deco(cls: T) -> T:
        if key in REGISTRY:
            raise RegistryError(f"cannot register '{key}': a built-in reward has that name")
        _USER[key] = cls
        return cls

    return deco


def _plugins() -> dict[str, str]:
    global _PLUGINS
    if _PLUGINS is None:
        from importlib.metadata import entry_points

        _PLUGINS = {ep.name.lower(): ep.value for ep in entry_points(group="rewardzoo.rewards")}
    return _PLUGINS


def extra_installed(extra: str | None) -> bool:
    """True when every module of ``extra`` can be imported (checked without importing)."""
    return all(importlib.util.find_spec(m) is not None for m in EXTRA_MODULES.get(extra or "", ()))


def list_rewards(modality: str | None = None) -> list[dict]:
    """Registry rows as dicts (name, modality, kind, extra, higher_is_better, score_range, installed, ...)."""
    rows = []
    for name, e in sorted(REGISTRY.items()):
        if modality and e.modality != modality:
            continue
        rows.append(dict(name=name, modality=e.modality, kind=e.kind, extra=e.extra,
                         higher_is_better=e.higher_is_better, score_range=list(e.score_range),
                         download=e.download, installed=extra_installed(e.extra), summary=e.summary))
    return rows


def canonical_target(name: str) -> str:
    """The implementation path a reward name resolves to (registry, user, plugin or Python path)."""
    key = name.lower()
    if key in REGISTRY:
        return REGISTRY[key].target
    if key in _USER:
        cls = _USER[key]
        return f"{cls.__module__}:{cls.__qualname__}"
    if key in _plugins():
        return _plugins()[key]
    if ":" in name or "." in name:
        return name if ":" in name else "{}:{}".format(*name.rsplit(".", 1))
    known = list(REGISTRY) + list(_USER) + list(_plugins())
    raise RegistryError(f"unknown reward '{name}'{did_you_mean(key, known)}; `rewardzoo list` shows all rewards")


def resolve(name: str) -> type:
    """Import and return the reward class for a registry name or a Python path."""
    key = name.lower()
    if key in _USER:
        return _USER[key]
    target = canonical_target(name)
    module_name, _, attr = target.partition(":")
    entry = REGISTRY.get(key)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing and missing != module_name.split(".")[0]:
            raise MissingExtraError(name, missing, entry.extra if entry else _extra_for(missing)) from exc
        raise RegistryError(f"reward '{name}': cannot import module '{module_name}' ({exc})") from exc
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise RegistryError(f"reward '{name}': module '{module_name}' has no attribute '{attr}'")
    return obj


def _extra_for(module: str) -> str | None:
    for extra, mods in EXTRA_MODULES.items():
        if module in mods:
            return extra
    return None
