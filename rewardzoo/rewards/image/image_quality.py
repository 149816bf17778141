"""No-reference image quality through pyiqa's own networks, one wrapper with the metrics as rows (pyiqa's pattern).

``score = net(x)``: pyiqa's network of the chosen variant (its own normalisation, crops and head) on the
image as a float (N, 3, H, W) tensor in [0, 1], exactly as ``pyiqa.create_metric(name)(x)`` runs it. The
score is on the metric's own scale (:data:`VARIANTS`: pyiqa's ``score_range``; every listed metric is
higher-is-better, ``lower_better`` False in pyiqa's ``DEFAULT_CONFIGS``). The network is built with
``pretrained=False`` (the row's ``off``) and no backbone download (``timm`` / ``torchvision`` / TOPIQ's Swin
backbones random-init, pyiqa's own loader disabled), then the full state dict of ``model_path`` is loaded
strictly (safetensors or ``torch.load(weights_only=True)``), so no pickled file is ever executed. The CLIP-based
metrics (CLIP-IQA(+), LIQE, LAION-Aes) get pyiqa's CLIP class sized and loaded from the checkpoint's ``clip_model.*`` entries in place of pyiqa's
``clip.load`` (:mod:`.iqa_clip`). ARNIQA's encoder loads the same way; its regressor, published only as TorchScript,
is read without running it and computed here (:mod:`.iqa_arniqa`).
Q-Align (quality, aesthetics) and DeQA-Score are rows too, scored by pyiqa's mPLUG-Owl2 as the expected rating
level (:mod:`.iqa_qalign`; transformers < 5.17, so with a newer one in their own ``environment:``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch

from ...errors import ConfigError, InputError, MissingExtraError, did_you_mean
from ...shared.image_ops import float_batches
from ...shared.media import to_image_tensor
from ...shared.weights import load_state_dict, strip_prefix
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.weights import resolve_weights_file
from ..options import RewardOptions, WeightPath, model_validator
from . import iqa_arniqa, iqa_clip, iqa_qalign


@dataclass(frozen=True)
class Variant:
    """One pyiqa no-reference metric: its ``DEFAULT_CONFIGS`` name, pyiqa's arch class, the key of its published
    checkpoint in that arch module's ``default_model_urls``, pyiqa's direction and range, and, when it cannot be
    built here, why."""

    arch: str
    checkpoint: str | None
    lower_better: bool
    score_range: str
    unsupported: str | None = None
    clip: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    min_side: int = 0
    regressor: bool = False  # ARNIQA: a separate TorchScript regressor file (kwargs.regressor_path), :mod:`.iqa_arniqa`
    task: str | None = None  # Q-Align's rating question: the variant is scored by :mod:`.iqa_qalign`
    video: bool = False  # video_quality asks the video question of all frames at once (Q-Align's video scorer)
    pyiqa: str | None = None  # pyiqa's DEFAULT_CONFIGS name, where the row's name is not one
    off: tuple[tuple[str, Any], ...] = (("pretrained", False),)  # constructor arguments keeping pyiqa's loader off


_MUSIQ = "pyiqa.archs.musiq_arch:MUSIQ"
_MANIQA = "pyiqa.archs.maniqa_arch:MANIQA"
_NIMA = "pyiqa.archs.nima_arch:NIMA"
_TOPIQ = "pyiqa.archs.topiq_arch:CFANet"
_CLIPIQA = "pyiqa.archs.clipiqa_arch:CLIPIQA"
_LIQE = "pyiqa.archs.liqe_arch:LIQE"
_TRES = "pyiqa.archs.tres_arch:TReS"
_ARNIQA = "pyiqa.archs.arniqa_arch:ARNIQA"
_QALIGN = "pyiqa.archs.qalign_arch:QAlign"
_QALIGN_QUANTISED = (
    "bitsandbytes 8-/4-bit quantisation of the language model is not built: use 'qalign' with dtype float16 or bfloat16"
)

#: pyiqa metric name -> variant. ``lower_better`` and ``score_range`` are pyiqa 0.1.16's ``DEFAULT_CONFIGS``
#: (``~`` = approximate bound), checked against the installed pyiqa by the tests.
VARIANTS: dict[str, Variant] = {
    "topiq_nr": Variant(_TOPIQ, "cfanet_nr_koniq_res50", False, "~0, ~1"),
    "topiq_nr-flive": Variant(_TOPIQ, "cfanet_nr_flive_res50", False, "~0, ~1"),
    "topiq_nr-spaq": Variant(_TOPIQ, "cfanet_nr_spaq_res50", False, "~0, ~1"),
    "maniqa": Variant(_MANIQA, "koniq", False, "~0, ~1"),
    "maniqa-kadid": Variant(_MANIQA, "kadid", False, "~0, ~1"),
    "maniqa-pipal": Variant(_MANIQA, "pipal", False, "~0, ~1"),
    "hyperiqa": Variant("pyiqa.archs.hypernet_arch:HyperNet", "resnet50-koniq", False, "~0, ~1"),
    "dbcnn": Variant("pyiqa.archs.dbcnn_arch:DBCNN", "koniq", False, "~0, ~1"),
    "nima": Variant(_NIMA, "inception_resnet_v2-ava", False, "0, 10"),
    "nima-koniq": Variant(_NIMA, "inception_resnet_v2-koniq", False, "~0, ~1"),
    "nima-spaq": Variant(_NIMA, "inception_resnet_v2-spaq", False, "~0, ~1"),
    "nima-vgg16-ava": Variant(_NIMA, "vgg16-ava", False, "0, 10"),
    "musiq": Variant(_MUSIQ, "koniq10k", False, "~0, ~100"),
    "musiq-spaq": Variant(_MUSIQ, "spaq", False, "~0, ~100"),
    "musiq-paq2piq": Variant(_MUSIQ, "paq2piq", False, "~0, ~100"),
    "musiq-ava": Variant(_MUSIQ, "ava", False, "1, 10", options=(("num_class", 10),)),  # pyiqa sets it for 'ava'
    "topiq_iaa": Variant(_TOPIQ, "cfanet_iaa_ava_swin", False, "1, 10"),
    "topiq_iaa_res50": Variant(_TOPIQ, "cfanet_iaa_ava_res50", False, "1, 10"),
    "tres": Variant(_TRES, "koniq", False, "~0, ~100"),
    "tres-flive": Variant(_TRES, "flive", False, "~0, ~100"),
    "cnniqa": Variant("pyiqa.archs.cnniqa_arch:CNNIQA", "koniq10k", False, "~0, ~1", off=(("pretrained", None),)),
    "paq2piq": Variant("pyiqa.archs.paq2piq_arch:PAQ2PIQ", "url", False, "~0, ~100"),
    "wadiqam_nr": Variant("pyiqa.archs.wadiqam_arch:WaDIQaM", "wadiqam_nr_koniq", False, "~-1, ~0.1"),
    "uranker": Variant("pyiqa.archs.uranker_arch:URanker", "uranker", False, "~-1, ~2"),
    "unique": Variant("pyiqa.archs.unique_arch:UNIQUE", "mix", False, "~-3, ~3", off=()),  # no loader switch
    "clipiqa": Variant(_CLIPIQA, None, False, "0, 1", clip=True),
    "clipiqa+": Variant(_CLIPIQA, None, False, "0, 1", clip=True),
    "clipiqa+_rn50_512": Variant(_CLIPIQA, None, False, "0, 1", clip=True),
    "clipiqa+_vitL14_512": Variant(_CLIPIQA, None, False, "0, 1", clip=True),
    "laion_aes": Variant("pyiqa.archs.laion_aes_arch:LAIONAes", None, False, "~1, ~10", clip=True),
    "liqe": Variant(_LIQE, "koniq", False, "1, 5", clip=True, min_side=224),
    "liqe_mix": Variant(_LIQE, "mix", False, "1, 5", clip=True, options=(("mtl", True),), min_side=224),
    "arniqa": Variant(_ARNIQA, "ARNIQA", False, "0, 1", regressor=True),
    **{
        f"arniqa-{dataset}": Variant(_ARNIQA, "ARNIQA", False, "0, 1", regressor=True)
        for dataset in ("live", "csiq", "tid", "kadid", "clive", "flive", "spaq")
    },
    "qalign": Variant(_QALIGN, "q-future/one-align", False, "1, 5", task="quality", video=True),
    "qalign_aesthetic": Variant(
        _QALIGN, "q-future/one-align", False, "1, 5", task="aesthetic", pyiqa="qalign", video=True
    ),
    "deqa": Variant(_QALIGN, "zhiyuanyou/DeQA-Score-Mix3", False, "1, 5", task="quality", pyiqa="qalign"),
    "qalign_8bit": Variant(_QALIGN, None, False, "1, 5", _QALIGN_QUANTISED),
    "qalign_4bit": Variant(_QALIGN, None, False, "1, 5", _QALIGN_QUANTISED),
}
#: pyiqa options that would load weights on their own: the weights come from ``model_path`` only.
_WEIGHT_OPTIONS = frozenset({"pretrained", "pretrained_model_path", "pretrained_scnn_path", "backbone_pretrain"})


#: pyiqa arch types of its hand-crafted metrics and of its image-set (distribution) metrics.
_CLASSICAL = frozenset({"BRISQUE", "NIQE", "ILNIQE", "NRQM", "PI", "PIQE", "Entropy"})
_SET_METRICS = frozenset({"FID", "InceptionScore"})
#: pyiqa no-reference networks that are not rows, by arch type: why (the card lists them too).
_NOT_BUILT = {
    "QualiCLIP": "its constructor always downloads QualiCLIP.pth (CLIP weights and prompt features)",
    "MACLIP": "its constructor runs clip.load on 'cuda'",
    "FGResQ": "its constructor downloads its checkpoints and a transformers CLIP from the hub",
    "MetaIQA": "not yet added: its published checkpoint is read with torch.load(weights_only=False)",
    "Compare2Score": "it needs trust_remote_code",
    "QReAlign": "its model comes from the hub through AutoModelForImageTextToText",
    "CLIPScore": "a text-image metric: see rewardzoo's clip_score",
    "AFINE": "lower-is-better, and its constructor runs clip.load and unpickles its checkpoint",
}


def pyiqa_reason(name: str) -> str:
    """Why pyiqa's metric ``name`` is not a row, from pyiqa's own table; '' when pyiqa is absent or lacks it."""
    try:
        from pyiqa.default_model_configs import DEFAULT_CONFIGS
    except ImportError:
        return ""
    cfg = DEFAULT_CONFIGS.get(name)
    if cfg is None:
        return ""
    kind = cfg["metric_opts"]["type"]
    if cfg.get("metric_mode") == "FR":
        return (
            f"pyiqa's {name!r} is a full-reference metric (it compares with a reference image); "
            "image_quality scores without one"
        )
    if kind in _SET_METRICS:
        return f"pyiqa's {name!r} is a distribution metric over a set of images, not a per-image score"
    if kind in _CLASSICAL:
        return f"pyiqa's {name!r} is not built by rewardzoo (a classical, hand-crafted metric: {kind})"
    if name.startswith("topiq_nr") and "face" in name:
        return f"pyiqa's {name!r} is not built by rewardzoo (its face alignment downloads facexlib's detector)"
    why = _NOT_BUILT.get(kind, "see the image_quality card")
    return f"pyiqa's {name!r} is not built by rewardzoo ({why})"


def variant(name: str, reward: str = "image_quality") -> Variant:
    """The row of ``name``; an unknown or unbuildable one is a ConfigError (with pyiqa names close to it, and,
    for a pyiqa metric that is not a row, why)."""
    row = VARIANTS.get(name)
    if row is None:
        why = pyiqa_reason(name)
        what = why or f"unknown pyiqa no-reference metric {name!r}"
        raise ConfigError(
            f"{reward}: {what}{did_you_mean(name, VARIANTS)}; known: {', '.join(sorted(VARIANTS))}",
            field="kwargs.metric",
        )
    if row.unsupported:
        raise ConfigError(
            f"{reward}: pyiqa's {name!r} is not built by rewardzoo: {row.unsupported}", field="kwargs.metric"
        )
    return row


def arch_class(row: Variant, reward: str) -> type[torch.nn.Module]:
    module, _, cls = row.arch.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as exc:  # pyiqa, cv2 (imported by pyiqa) or an arch's own dependency (facexlib)
        missing = getattr(exc, "name", None) or "pyiqa"
        names = {"cv2": "opencv-python-headless", "clip": "openai-clip"}  # the tokenizer CLIP-IQA / LIQE import
        package = names.get(missing, "pyiqa" if missing.startswith("pyiqa") else missing)
        raise MissingExtraError(reward, package, None) from exc


def metric_options(name: str, arch: Mapping[str, Any] | None) -> dict[str, Any]:
    """pyiqa's ``metric_opts`` of ``name`` (less ``type`` and weight options), updated with ``arch``."""
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    if VARIANTS[name].task:  # Q-Align: no arch options (its dtype is the entry's)
        if arch:
            raise ConfigError(f"kwargs.arch is not used by {name!r}", field="kwargs.arch")
        return {}
    options = {k: v for k, v in DEFAULT_CONFIGS[name]["metric_opts"].items() if k != "type"}
    options = {k: v for k, v in options.items() if k not in _WEIGHT_OPTIONS} | dict(VARIANTS[name].options)
    extra = dict(arch or {})
    bad = sorted(set(extra) & _WEIGHT_OPTIONS)
    if bad:
        raise ConfigError(f"kwargs.arch must not set {bad}: the weights come from model_path", field="kwargs.arch")
    return {**options, **extra}


@contextmanager
def no_backbone_download(module: Any) -> Iterator[None]:
    """Build a pyiqa arch without fetching anything: timm and torchvision backbones random-init, and the arch
    module's ``load_pretrained_network`` (pyiqa's unpickling loader) a no-op; the caller loads the full state."""
    import timm
    import torchvision

    create = timm.create_model

    def timm_random(*args: Any, **kwargs: Any) -> Any:
        return create(*args, **{**kwargs, "pretrained": False})

    def tv_random(builder: Any) -> Any:
        return lambda *args, **kwargs: builder(*args, **{**kwargs, "weights": None})

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(timm, "create_model", timm_random))
        for name in ("vgg16", "resnet18", "resnet34", "resnet50"):
            stack.enter_context(
                mock.patch.object(torchvision.models, name, tv_random(getattr(torchvision.models, name)))
            )
        if hasattr(module, "create_swin"):  # TOPIQ's Swin backbone (pyiqa's copy of timm's builder)
            swin = module.create_swin
            stack.enter_context(
                mock.patch.object(module, "create_swin", lambda *a, **k: swin(*a, **{**k, "pretrained": False}))
            )
        if hasattr(module, "load_pretrained_network"):
            stack.enter_context(mock.patch.object(module, "load_pretrained_network", lambda *a, **k: None))
        yield


def checkpoint_file(name: str, row: Variant, model_path: str | None) -> str:
    """``model_path`` (a local file, URL or hub file), else the variant's published pyiqa checkpoint."""
    if model_path is None and row.checkpoint is None:
        raise ConfigError(
            f"pyiqa's {name!r} has no published checkpoint rewardzoo can load safely (OpenAI's CLIP is a TorchScript "
            f"archive): set model_path to a .safetensors file with its '{iqa_clip.PREFIX}*' and own entries "
            "(see the card)",
            field="model_path",
        )
    if model_path is None:
        module = importlib.import_module(row.arch.partition(":")[0])
        model_path = module.default_model_urls[row.checkpoint]
    return resolve_weights_file(model_path)


def load_network(name: str, path: str, arch: Mapping[str, Any] | None, reward: str) -> torch.nn.Module:
    """pyiqa's arch of ``name`` with its default options (``pretrained=False``) and the state of ``path``, strict."""
    row = variant(name, reward)
    cls = arch_class(row, reward)
    options = metric_options(name, arch)
    try:
        state = load_state_dict(path)
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    if set(state) == {"params"}:  # pyiqa's own checkpoints
        state = state["params"]
    state = strip_prefix(state, ("module.",))
    try:
        if row.clip:
            state = iqa_clip.prefixed(state)
            clip_state, rest = iqa_clip.split(state, path, name)
            openai = not hasattr(importlib.import_module(cls.__module__), "load")  # LAION-Aes: clip.load
            clip = iqa_clip.build_clip(clip_state, path, name, openai)
            with iqa_clip.given_clip(cls.__module__, clip):
                net = cls(**dict(row.off), **options)
            if not any(k.startswith(iqa_clip.PREFIX) for k in net.state_dict()):
                state = rest  # CLIP-IQA keeps its CLIP out of its state dict: loaded strictly above
        else:
            with no_backbone_download(importlib.import_module(cls.__module__)):
                net = cls(**dict(row.off), **options)
    except TypeError as exc:
        raise ConfigError(f"kwargs.arch: {exc}", field="kwargs.arch") from None
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"'{path}' does not fit pyiqa's {name!r}: {str(exc)[:400]}", field="model_path") from None
    return net.eval().requires_grad_(False)


def arniqa_network(
    name: str,
    cls: type[torch.nn.Module],
    options: Mapping[str, Any],
    model_path: str | None,
    regressor_path: str | None,
    reward: str,
) -> torch.nn.Module:
    """ARNIQA (:mod:`.iqa_arniqa`): the encoder from ``model_path``, the regressor from ``regressor_path``; each
    defaults to pyiqa's published file (the regressor of the row's dataset)."""
    module = importlib.import_module(cls.__module__)
    dataset = iqa_arniqa.regressor_dataset(options, module.default_model_urls, name, reward)
    if set(options) - {"regressor_dataset"}:
        raise ConfigError(f"pyiqa's ARNIQA takes only regressor_dataset, got {sorted(options)}", field="kwargs.arch")
    encoder = checkpoint_file(name, VARIANTS[name], model_path)
    try:
        regressor = resolve_weights_file(regressor_path or module.default_model_urls[dataset])
    except ConfigError as exc:
        raise ConfigError(exc.message, field="kwargs.regressor_path") from None
    return iqa_arniqa.build_arniqa(name, module, dataset, encoder, regressor, reward)


class ImageQuality(PointwiseReward):
    """A pyiqa no-reference quality metric on the metric's own scale: ``score = pyiqa_net(x)``, x in [0, 1].

    Inputs: ``image``. ``metric``: a pyiqa metric name (rows of :data:`VARIANTS`: ``topiq_nr``, ``maniqa``,
    ``hyperiqa``, ``dbcnn``, ``nima``, ``musiq``, ``clipiqa(+)``, ``liqe(_mix)``, ``arniqa``, ``topiq_iaa``,
    ``tres``, ``cnniqa``, ``paq2piq``, ``wadiqam_nr``, ``unique``, ``uranker``, ``laion_aes``, ``qalign``,
    ``deqa`` and their dataset variants; default ``topiq_nr``). ``regressor_path``: ARNIQA's regressor (its
    TorchScript file, read without running it; default pyiqa's published one of the row's dataset).
    ``model_path``: a ``.safetensors`` / ``.pth`` file, URL or hub file with pyiqa's key names (default the
    metric's published checkpoint; CLIP-IQA has none loadable safely, so it needs one); options: :class:`Options`.
    Every listed metric is higher-is-better; ranges are pyiqa's (see the card).
    """

    inputs = Inputs(("image",), images="native")

    class Options(RewardOptions):
        metric: str = "topiq_nr"
        """A pyiqa metric name: a row of ``VARIANTS`` (``topiq_nr``, ``maniqa``, ``hyperiqa``, ``dbcnn``, ``nima``,
        ``musiq``, ``clipiqa(+)``, ``liqe(_mix)``, ``arniqa``, ``topiq_iaa``, ``tres``, ``cnniqa``, ``paq2piq``,
        ``wadiqam_nr``, ``unique``, ``uranker``, ``laion_aes``, ``qalign``, ``deqa`` and their dataset variants)."""
        arch: dict[str, Any] | None = None
        """Extra keyword arguments of pyiqa's arch class (crops, sizes); never its weight options."""
        regressor_path: WeightPath | None = None
        """ARNIQA's regressor, its TorchScript file (read without running it; default pyiqa's published one of the
        row's dataset)."""

        @model_validator(mode="after")
        def _regressor_for_arniqa(self) -> ImageQuality.Options:
            row = variant(self.metric)
            if self.regressor_path is not None and not row.regressor:
                raise ConfigError(
                    f"kwargs.regressor_path is ARNIQA's option; pyiqa's {self.metric!r} takes its weights from "
                    "model_path",
                    field="kwargs.regressor_path",
                )
            return self

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        metric, arch, regressor_path = self.options.metric, self.options.arch, self.options.regressor_path
        self.metric = metric
        row = variant(metric, self.name)
        self.variant = row
        self.net: torch.nn.Module | iqa_qalign.QAlignScorer
        if row.task:
            metric_options(metric, arch)
            self.net = iqa_qalign.QAlignScorer(
                model_path or str(row.checkpoint), row.task, device, self.dtype, self.name
            )
            return
        cls = arch_class(row, self.name)
        options = metric_options(metric, arch)  # option errors before any weights are fetched
        if row.regressor:
            net = arniqa_network(metric, cls, options, model_path, regressor_path, self.name)
        else:
            net = load_network(metric, checkpoint_file(metric, row, model_path), arch, self.name)
        self.net = net.to(device=device, dtype=self.dtype)

    def __call__(self, image: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        return RewardOutput(self.scores(image))

    def scores(self, images: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """The metric of each image (3, H, W), uint8 or float in [0, 1]; images of one size run as batches of
        :data:`~rewardzoo.shared.image_ops.CHUNK_BYTES` as float32 (a batch of 4K images one by one)."""
        if isinstance(self.net, iqa_qalign.QAlignScorer):  # one batch: every image becomes 448 x 448
            return self.net([to_image_tensor(img) for img in images])
        out = torch.empty(len(images), dtype=torch.float64)
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, img in enumerate(images):
            if min(img.shape[-2:]) < self.variant.min_side:
                raise InputError(
                    f"pyiqa's {self.metric!r} needs both sides >= {self.variant.min_side} pixels, got "
                    f"{tuple(img.shape[-2:])}",
                    reward=self.name,
                    field="image",
                    sample=i,
                )
            by_size.setdefault(tuple(img.shape), []).append(i)
        with torch.inference_mode():
            for idx in by_size.values():
                for chunk, x in float_batches(images, idx, device=self.device):
                    out[chunk] = self.net(x.to(self.dtype)).reshape(len(chunk)).double().cpu()
        return out
