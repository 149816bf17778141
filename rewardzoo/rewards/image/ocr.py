"""OCR reward (flow_grpo's ``ocr.py``): how well an image or video renders the prompt's quoted text.

Per image: ``target`` = the text between the first pair of double quotes of the prompt (the whole
prompt without quotes); the recognised text is the concatenation, in reading order, of the engine's
text lines with a confidence above 0 (after the engine's own ``text_score`` filter); both are lower-cased
with spaces removed; ``d = 0`` when the target occurs in the recognised text, else
``min(levenshtein(recognised, target), len(target))``; ``score = 1 - d / len(target)``.

Per video (flow_grpo's video variant): every ``frame_interval``-th frame is scored so, without the
containment shortcut by default; the score is the mean over the frames that score above 0, and 0 when
none does.

Engines: ``rapidocr`` runs PP-OCRv4 detection and recognition (the ONNX files in the
``rapidocr-onnxruntime`` wheel) with that package's own pre- and post-processing, over the whole
call: detection on stacks of images of equal network input size, recognition on the crops of every
image, grouped by padded width. ``paddleocr`` (flow_grpo's engine) is called once per image.

``vlm`` (verl-omni's ``genrm_ocr.py``) has a vision-language model transcribe each image, a local Qwen-VL
(``model_path``) or an OpenAI-compatible endpoint (``backend: openai``), with verl-omni's question and sampling
(:mod:`rewardzoo.rewards.models.vlm.transcription`); the same score follows, with every whitespace character removed
before matching (verl-omni's normalisation: a transcription spans lines).

Detector settings (:class:`DetectorSettings`): PaddleOCR 2.x's defaults by default (the engine
flow_grpo runs), rapidocr's ``config.yaml`` under ``preset: rapidocr``; each can be set on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.checkpoints import Checkpoint, local_file, package_file
from ...shared.media import images_to_uint8
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.onnx import onnx_session
from ..models.vlm.judging import Failure
from ..models.vlm.options import TranscriberOptions
from ..options import Field, Number, PositiveInt, PositiveNumber, model_validator
from .text_match import capped_distance, normalize, quoted_target

ENGINES = ("rapidocr", "paddleocr", "vlm")
#: The options that apply to the OCR engines (rapidocr, paddleocr) and not to ``engine: vlm``.
ENGINE_ONLY = ("threads", "text_score", "det_batch_size", "rec_batch_size", "preset")

Line = tuple[str, float]  # one recognised text line and its confidence

#: the detector's input normalisation (mean, std per channel after /255): PaddleOCR's DB preprocessing
#: (tools/infer/predict_det.py, ImageNet statistics) and rapidocr's config.yaml (0.5, 0.5)
NORMALIZATIONS = {
    "paddleocr": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "rapidocr": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
}


@dataclass(frozen=True)
class DetectorSettings:
    """The DB text detector's settings, under PaddleOCR 2.x's option names; the defaults are PaddleOCR
    2.9.1's (``tools/infer/utility.py`` ``init_args``, the version flow_grpo installs).

    ``det_limit_type`` "max": the longer side is scaled down to ``det_limit_side_len`` when above it;
    "min": the shorter side is scaled up to it when below it (then both sides rounded to multiples of
    32). ``det_db_thresh``: the probability-map binarisation threshold; ``det_db_box_thresh``: the
    least mean probability of a kept box; ``det_db_unclip_ratio``: the box expansion; ``use_dilation``:
    a 2x2 dilation of the binary map; ``det_db_score_mode``: the box score over its bounding rectangle
    ("fast") or its polygon ("slow"); ``det_normalize``: the input normalisation (:data:`NORMALIZATIONS`).
    """

    det_limit_side_len: int = 960
    det_limit_type: str = "max"
    det_db_thresh: float = 0.3
    det_db_box_thresh: float = 0.6
    det_db_unclip_ratio: float = 1.5
    use_dilation: bool = False
    det_db_score_mode: str = "fast"
    det_normalize: str = "paddleocr"

    def rapidocr_kwargs(self) -> dict[str, Any]:
        """The same settings as ``RapidOCR(**kwargs)`` takes them (its ``Det`` section of config.yaml)."""
        mean, std = NORMALIZATIONS[self.det_normalize]
        return {
            "det_limit_side_len": self.det_limit_side_len,
            "det_limit_type": self.det_limit_type,
            "det_thresh": self.det_db_thresh,
            "det_box_thresh": self.det_db_box_thresh,
            "det_unclip_ratio": self.det_db_unclip_ratio,
            "det_use_dilation": self.use_dilation,
            "det_score_mode": self.det_db_score_mode,
            "det_mean": list(mean),
            "det_std": list(std),
        }

    def paddleocr_kwargs(self) -> dict[str, Any]:
        """The same settings as ``paddleocr.PaddleOCR(**kwargs)`` (2.x) takes them; PaddleOCR's own input
        normalisation is fixed, so ``det_normalize`` must be "paddleocr"."""
        if self.det_normalize != "paddleocr":
            raise ConfigError(
                "the paddleocr engine normalises the detector input itself; det_normalize must be 'paddleocr'",
                field="kwargs.det_normalize",
            )
        settings = asdict(self)
        del settings["det_normalize"]
        return settings


#: ``preset``: the detector settings of rapidocr-onnxruntime 1.4's config.yaml (rewardzoo's default before)
DETECTOR_PRESETS = {
    "rapidocr": DetectorSettings(
        det_limit_side_len=736,
        det_limit_type="min",
        det_db_box_thresh=0.5,
        det_db_unclip_ratio=1.6,
        use_dilation=True,
        det_normalize="rapidocr",
    )
}


class RapidOCREngine:
    """PP-OCRv4 det + rec with ``rapidocr_onnxruntime``'s pre- and post-processing, over a whole call.

    ``read(images)`` follows ``RapidOCR(**detector.rapidocr_kwargs())(image, use_cls=False)`` per image
    step by step (resize limits, letterbox, detector normalisation, DB post-processing, reading order,
    crops, recogniser resize and padding, CTC decoding, ``text_score`` filter), so each image's lines
    are those of the engine's own call, with one exception: ``det_limit_side_len`` applies as
    PaddleOCR applies it also under ``det_limit_type: max``, where rapidocr's own call replaces it by
    960, 1500 or 2000 by the image's longer side (the same input size for images up to 960 pixels).
    What differs is how network calls are grouped: the detector gets stacks of up to ``det_batch_size``
    images of one input size, the recogniser stacks of up to ``rec_batch_size`` crops of one padded width
    from any image. The ONNX sessions are this instance's (``threads``, ``device``).
    """

    def __init__(
        self,
        model_path: str | None,
        device: str,
        *,
        threads: int | None,
        text_score: float,
        det_batch_size: int | None,
        rec_batch_size: int | None,
        detector: DetectorSettings,
    ) -> None:
        try:
            from rapidocr_onnxruntime import RapidOCR
            from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess
            from rapidocr_onnxruntime.main import DEFAULT_CFG_PATH
            from rapidocr_onnxruntime.utils import read_yaml, update_model_path
        except ImportError as exc:
            error = MissingExtraError("ocr", "rapidocr_onnxruntime", "verifiers")
            error.args = (
                f"{error}, then pip install --no-deps 'rapidocr-onnxruntime>=1.4,<1.5' (without --no-deps "
                "it installs opencv-python over the extra's opencv-python-headless: two cv2 packages)",
            )
            raise error from exc
        gpu = str(device).startswith("cuda")
        # one image per detector call on the CPU, where stacking 736x736 inputs is no faster per image
        self.det_batch_size = det_batch_size or (8 if gpu else 1)
        files = update_model_path(read_yaml(DEFAULT_CFG_PATH))
        paths = {"det_model_path": files["Det"]["model_path"], "rec_model_path": files["Rec"]["model_path"]}
        if model_path is not None:
            paths = self._model_files(Path(model_path))
        self.rec_batch_size = rec_batch_size or 32
        self.engine = RapidOCR(text_score=text_score, **paths, **detector.rapidocr_kwargs())
        self.engine.text_cls = None  # the angle classifier's session: never run here (use_cls=False), so freed
        # RapidOCR's own sessions turn ONNX Runtime's memory arena off (~25% slower detection here);
        # ours: the spec's device and thread count, the arena on
        self.engine.text_det.infer.session = onnx_session(paths["det_model_path"], threads=threads, device=device)
        self.engine.text_rec.session.session = onnx_session(paths["rec_model_path"], threads=threads, device=device)
        self.text_score = text_score
        det = self.engine.text_det
        self._det_pre = DetPreProcess(detector.det_limit_side_len, detector.det_limit_type, det.mean, det.std)
        pre = self._det_pre
        # DetPreProcess.normalize (float32 times the scale, then float64 mean/std, stored as float32),
        # tabulated per uint8 value and channel: the same numbers without the per-pixel float64 pass
        levels = np.arange(256, dtype=np.float32)[:, None]
        self._det_lut = np.ascontiguousarray(((levels * pre.scale - pre.mean) / pre.std).astype(np.float32).T)

    @staticmethod
    def weight_files(model_path: str | None) -> list[Checkpoint]:
        """The two ONNX files the engine's sessions load: ``det.onnx`` and ``rec.onnx`` of ``model_path``, else the
        PP-OCRv4 files that the wheel's ``config.yaml`` names (read as a file: the package is not imported)."""
        if model_path is not None:
            root = Path(model_path)
            return [local_file(root / name) for name in ("det.onnx", "rec.onnx")]
        found = package_file("rapidocr_onnxruntime", "config.yaml")
        if found.missing:
            return [found]
        import yaml

        config = yaml.safe_load(found.files[0].read_text(encoding="utf-8"))
        return [
            package_file("rapidocr_onnxruntime", *Path(config[part]["model_path"]).parts) for part in ("Det", "Rec")
        ]

    @staticmethod
    def _model_files(root: Path) -> dict[str, str]:
        det, rec, keys = root / "det.onnx", root / "rec.onnx", root / "rec_keys.txt"
        for path in (det, rec):
            if not path.is_file():
                raise ConfigError(
                    f"OCR model file not found: '{path}' (model_path is a directory with det.onnx "
                    "and rec.onnx, plus rec_keys.txt unless rec.onnx carries its character list; "
                    "or null for the weights in the rapidocr-onnxruntime wheel)",
                    field="model_path",
                )
        found = {"det_model_path": str(det), "rec_model_path": str(rec)}
        if keys.is_file():
            found["rec_keys_path"] = str(keys)
        return found

    def _det_input(self, img: np.ndarray) -> np.ndarray | None:
        """The detector's input (1, 3, H, W) for a prepared image: DetPreProcess's resize and normalisation."""
        resized = self._det_pre.resize(img)
        if resized is None:
            return None
        out = np.empty((1, 3, *resized.shape[:2]), dtype=np.float32)
        for c in range(3):
            np.take(self._det_lut[c], resized[:, :, c], out=out[0, c])
        return out

    def read(self, images: Sequence[np.ndarray]) -> list[list[Line]]:
        """Text lines (reading order, confidence >= ``text_score``) of each (H, W, 3) uint8 image."""
        ocr, det = self.engine, self.engine.text_det
        prepared, net_inputs = [], []
        for img in images:
            img, _, _ = ocr.preprocess(img)
            img, _ = ocr.maybe_add_letterbox(img, {})
            prepared.append(img)
            net_inputs.append(self._det_input(img))
        maps: list[np.ndarray | None] = [None] * len(images)
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for i, x in enumerate(net_inputs):
            if x is not None:
                by_shape.setdefault(x.shape, []).append(i)
        for members in by_shape.values():
            for start in range(0, len(members), self.det_batch_size):
                part = members[start : start + self.det_batch_size]
                preds = det.infer(np.concatenate([net_inputs[i] for i in part]))[0]
                for row, i in enumerate(part):
                    maps[i] = preds[row : row + 1]
        crops: list[np.ndarray] = []
        owners: list[int] = []
        for i, (img, pred) in enumerate(zip(prepared, maps)):
            if pred is None:
                continue
            boxes, _ = det.postprocess_op(pred, img.shape[:2])
            boxes = det.filter_tag_det_res(boxes, img.shape[:2])
            if len(boxes) < 1:
                continue
            found = ocr.get_crop_img_list(img, ocr.sorted_boxes(boxes))
            crops += found
            owners += [i] * len(found)
        lines: list[list[Line]] = [[] for _ in images]
        for i, (text, score) in zip(owners, self._recognise(crops, owners)):
            if score >= self.text_score:
                lines[i].append((text, score))
        return lines

    def _recognise(self, crops: Sequence[np.ndarray], owners: Sequence[int]) -> list[Line]:
        """(text, confidence) per crop. Each crop is resized and padded exactly as ``TextRecognizer`` pads
        it among its own image's crops (sorted by aspect ratio, groups of ``rec_batch_num``, padded to the
        group's widest), so its result does not depend on the other images of the call; crops of equal
        padded width, from any image, then share recogniser calls of up to ``rec_batch_size``."""
        rec = self.engine.text_rec
        _, height, width = rec.rec_image_shape[:3]
        inputs: dict[int, np.ndarray] = {}  # crop index -> its padded input
        starts = [k for k in range(len(crops)) if k == 0 or owners[k] != owners[k - 1]] + [len(crops)]
        for a, b in zip(starts[:-1], starts[1:]):  # one image's crops
            ratios = np.array([c.shape[1] / float(c.shape[0]) for c in crops[a:b]])
            order = np.argsort(ratios)
            for first in range(0, b - a, rec.rec_batch_num):
                group = order[first : first + rec.rec_batch_num]
                widest = max(width / height, *(ratios[g] for g in group))
                for g in group:
                    inputs[a + g] = rec.resize_norm_img(crops[a + g], widest)
        by_width: dict[int, list[int]] = {}
        for k in range(len(crops)):
            by_width.setdefault(inputs[k].shape[2], []).append(k)
        out: list[Line] = [("", 0.0)] * len(crops)
        for members in by_width.values():
            for first in range(0, len(members), self.rec_batch_size):
                part = members[first : first + self.rec_batch_size]
                preds = rec.session(np.stack([inputs[k] for k in part]).astype(np.float32))[0]
                for k, (text, score) in zip(part, rec.postprocess_op(preds)):
                    out[k] = (text, float(score))
        return out


class PaddleOCREngine:
    """PaddleOCR, as flow_grpo (2.x: ``PaddleOCR(use_angle_cls=False, lang="en")``, ``ocr(img, cls=False)``)
    and Flow-Factory (3.x: ``predict``) call it, one image at a time. ``model_path``: a directory with
    ``det/`` and ``rec/`` inference models (2.x), or None for PaddleOCR's own model cache."""

    def __init__(
        self,
        model_path: str | None,
        device: str,
        *,
        threads: int | None,
        text_score: float,
        detector: DetectorSettings,
        **_: Any,
    ) -> None:
        try:
            import paddleocr
        except ImportError as exc:
            raise MissingExtraError("ocr", "paddleocr", None) from exc
        cuda = str(device).startswith("cuda")
        self.text_score = text_score
        self.legacy = int(str(getattr(paddleocr, "__version__", "2")).split(".")[0]) < 3
        dirs = (
            {}
            if model_path is None
            else {"det_model_dir": str(Path(model_path) / "det"), "rec_model_dir": str(Path(model_path) / "rec")}
        )
        if self.legacy:  # drop_score: PaddleOCR 2.x's line-confidence filter (0.5 by default, as text_score)
            self.engine = paddleocr.PaddleOCR(
                use_angle_cls=False,
                lang="en",
                use_gpu=cuda,
                show_log=False,
                drop_score=text_score,
                **dirs,
                **detector.paddleocr_kwargs(),
            )
        else:
            if detector != DetectorSettings():
                raise ConfigError(
                    "the detector options apply to PaddleOCR 2.x (flow_grpo's); 3.x runs with its own defaults",
                    field="kwargs",
                )
            index = str(device).partition(":")[2] or "0"
            self.engine = paddleocr.PaddleOCR(
                use_doc_orientation_classify=False,
                use_doc_unwarping=False,
                use_textline_orientation=False,
                device=f"gpu:{index}" if cuda else "cpu",
            )

    def read(self, images: Sequence[np.ndarray]) -> list[list[Line]]:
        out = []
        for img in images:
            if self.legacy:
                result = self.engine.ocr(img, cls=False)
                page = result[0] if result else None
                lines = [(str(r[1][0]), float(r[1][1])) for r in page] if page else []
            else:
                lines = []
                for res in self.engine.predict(img):
                    lines += [(str(t), float(s)) for t, s in zip(res["rec_texts"], res["rec_scores"])]
            out.append([(t, s) for t, s in lines if s >= self.text_score])
        return out


def recognised_text(lines: Sequence[Line]) -> str:
    """flow_grpo's text of one image: the lines with a confidence above 0, joined without a separator."""
    return "".join(text for text, score in lines if score > 0)


class _OCRReward(PointwiseReward):
    """What :class:`OCR` and :class:`VideoOCR` share: the engine, the targets and the score of a text."""

    thread_safe = False  # PaddleOCR is not thread-safe; ONNX Runtime already spreads one call over the cores
    default_containment: ClassVar[bool] = True

    class Options(TranscriberOptions):
        engine: Literal["rapidocr", "paddleocr", "vlm"] = "rapidocr"
        """``rapidocr`` (PP-OCRv4 through ONNX Runtime), ``paddleocr``, or ``vlm`` (a vision-language model reads
        the text: :class:`~rewardzoo.rewards.models.vlm.transcription.TranscriberOptions`; ``model_path`` the Qwen-VL
        checkpoint, any dtype)."""
        threads: PositiveInt | None = None
        """OCR engines: ONNX intra-op threads."""
        text_score: Number = Field(0.5, ge=0, le=1)
        """OCR engines: the line-confidence filter (0.5 as in RapidOCR and PaddleOCR)."""
        det_batch_size: PositiveInt | None = None
        """rapidocr: images per detector call (default 1 on the CPU, 8 on CUDA)."""
        rec_batch_size: PositiveInt | None = None
        """rapidocr: text lines per recogniser call (default 32)."""
        containment: bool | None = None
        """The substring shortcut: the distance is 0 when the target occurs in the text (default on for images,
        off for video, as flow_grpo)."""
        preset: Literal["rapidocr"] | None = None
        """OCR engines: ``rapidocr``, the detector settings of rapidocr's config.yaml instead of PaddleOCR 2.x's (a
        setting given explicitly overrides the preset)."""
        det_limit_side_len: PositiveInt = 960
        """Detector: the side the image is scaled to (:class:`DetectorSettings`)."""
        det_limit_type: Literal["max", "min"] = "max"
        """Detector: ``max`` scales the longer side down to ``det_limit_side_len``, ``min`` the shorter side up."""
        det_db_thresh: Number = Field(0.3, ge=0, le=1)
        """Detector: the probability-map binarisation threshold."""
        det_db_box_thresh: Number = Field(0.6, ge=0, le=1)
        """Detector: the least mean probability of a kept box."""
        det_db_unclip_ratio: PositiveNumber = 1.5
        """Detector: the box expansion."""
        use_dilation: bool = False
        """Detector: a 2x2 dilation of the binary map."""
        det_db_score_mode: Literal["fast", "slow"] = "fast"
        """Detector: a box's score over its bounding rectangle (``fast``) or its polygon (``slow``)."""
        det_normalize: Literal["paddleocr", "rapidocr"] = "paddleocr"
        """Detector: the input normalisation (:data:`NORMALIZATIONS`)."""

        @model_validator(mode="after")
        def _engine_options(self) -> _OCRReward.Options:
            vlm_only = set(TranscriberOptions.model_fields) - {"on_failure"}
            engine_only = set(ENGINE_ONLY) | set(DetectorSettings.__dataclass_fields__)
            wrong = sorted(self.model_fields_set & (engine_only if self.engine == "vlm" else vlm_only))
            if wrong and self.engine == "vlm":
                raise ConfigError(
                    f"{wrong} apply to the OCR engines (rapidocr, paddleocr), not to engine: vlm",
                    field=f"kwargs.{wrong[0]}",
                )
            if wrong:
                raise ConfigError(f"{wrong} apply to engine: vlm only", field=f"kwargs.{wrong[0]}")
            return self

        def detector(self) -> DetectorSettings:
            """The preset's detector settings (PaddleOCR 2.x's without one) with those given explicitly."""
            base = DETECTOR_PRESETS[self.preset] if self.preset is not None else DetectorSettings()
            given = {k: getattr(self, k) for k in self.model_fields_set if k in DetectorSettings.__dataclass_fields__}
            return replace(base, **given)

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        self.engine_name = o.engine
        self.containment = self.default_containment if o.containment is None else o.containment
        self.reader: Any = None
        if o.engine == "vlm":
            from ..models.vlm.transcription import VLMTranscriber

            self.reader = VLMTranscriber(self.name, model_path, device, dtype, o)
            self.io_bound = self.reader.io_bound
            return
        if self.dtype_name != "float32":
            raise ConfigError(
                f"the OCR engines run in float32; dtype '{self.dtype_name}' is not supported", field="dtype"
            )
        self.detector = o.detector()
        self.engine = (RapidOCREngine if o.engine == "rapidocr" else PaddleOCREngine)(
            model_path,
            device,
            threads=o.threads,
            text_score=o.text_score,
            det_batch_size=o.det_batch_size,
            rec_batch_size=o.rec_batch_size,
            detector=self.detector,
        )

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """rapidocr: its engine's two ONNX files (:meth:`RapidOCREngine.weight_files`); vlm: ``model_path``'s
        checkpoint (an endpoint: none); paddleocr: unknown (PaddlePaddle's own formats)."""
        engine = kwargs.get("engine", "rapidocr")
        if engine == "vlm":
            return [] if kwargs.get("backend") == "openai" else super().weight_files(model_path, kwargs)
        if engine == "paddleocr":
            return [Checkpoint(model_path or "paddleocr", missing="paddleocr's model files are not read by the plan")]
        return RapidOCREngine.weight_files(model_path)

    @property
    def substitutions(self) -> int:
        """Transcriptions substituted since this reward was built (``engine: vlm`` with ``on_failure``)."""
        return self.reader.substitutions if self.reader is not None else 0

    def targets(self, prompt: Sequence[str]) -> list[str]:
        """Normalised targets of the prompts; InputError (field ``prompt``) for an empty one."""
        out = []
        for i, p in enumerate(prompt):
            if not isinstance(p, str):
                raise InputError(f"expected a string, got {type(p).__name__}", field="prompt", sample=i)
            target = normalize(quoted_target(p), whitespace=self.reader is not None)
            if not target:
                raise InputError(
                    f"the OCR target is empty (the text between the first pair of double quotes, or "
                    f"the whole prompt without quotes, has no characters besides spaces): {p!r}",
                    field="prompt",
                    sample=i,
                )
            out.append(target)
        return out

    def score_text(self, text: str, target: str) -> float:
        """The score of recognised ``text`` against a normalised ``target``."""
        recognised = normalize(text, whitespace=self.reader is not None)
        return 1.0 - capped_distance(recognised, target, containment=self.containment) / len(target)

    def read_texts(self, images: Sequence[Any], field: str = "image") -> list[str]:
        """The recognised text of each image, passed to the engine as an RGB uint8 array (flow_grpo's
        ``np.array(img)``)."""
        return [recognised_text(lines) for lines in self.engine.read(images_to_uint8(images, field))]


class OCR(_OCRReward):
    """flow_grpo's OCR reward: ``1 - min(d, len(target)) / len(target)`` with ``d`` = 0 when the target
    occurs in the recognised text, else their Levenshtein distance (both lower-cased, spaces removed).

    Inputs: ``image`` and ``prompt`` (target = the text between its first pair of double quotes, the
    whole prompt without quotes; an empty target is an error). Range [0, 1]. Extra ``ocr_text``: the
    recognised text (with ``engine: vlm`` also ``substituted`` / ``failure``). Options: :class:`Options`.
    """

    inputs = Inputs(("image", "prompt"))

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **_: Any) -> RewardOutput:
        targets = self.targets(prompt)
        if self.reader is not None:
            read = self.reader.transcribe(image)
            scores, extras = self.reader.resolve(
                [t if isinstance(t, Failure) else self.score_text(t, g) for t, g in zip(read, targets)]
            )
            extras["ocr_text"] = [t.answer or "" if isinstance(t, Failure) else t for t in read]
            return RewardOutput(scores, extras=extras)
        texts = self.read_texts(image)
        return RewardOutput([self.score_text(t, g) for t, g in zip(texts, targets)], extras={"ocr_text": texts})


class VideoOCR(_OCRReward):
    """flow_grpo's video OCR: frames ``0, k, 2k, ...`` (``frame_interval`` k, default 4) scored like
    images, without the containment shortcut by default (flow_grpo's video variant); the score is the
    mean over frames scoring above 0, and 0 when none does.

    Inputs: ``video`` (every frame decoded, then subsampled) and ``prompt``. Range [0, 1]. Extra
    ``text_frames``: the number of sampled frames scoring above 0. Other options as ``ocr``.
    """

    inputs = Inputs(("video", "prompt"), num_frames=None)
    default_containment: ClassVar[bool] = False

    class Options(_OCRReward.Options):
        frame_interval: PositiveInt = 4
        """Every k-th frame is read: ``0, k, 2k, ...`` (flow_grpo's 4)."""

        @model_validator(mode="after")
        def _no_vlm(self) -> VideoOCR.Options:
            if self.engine == "vlm":
                raise ConfigError("engine: vlm reads images; use it on ocr", field="kwargs.engine")
            return self

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        self.frame_interval = self.options.frame_interval

    def __call__(self, video: Sequence[Sequence[Any]], prompt: Sequence[str], **_: Any) -> RewardOutput:
        targets = self.targets(prompt)
        sampled = [list(v)[:: self.frame_interval] for v in video]
        for i, frames in enumerate(sampled):
            if not frames:
                raise InputError("the video has no frames", field="video", sample=i)
        try:
            texts = self.read_texts([f for frames in sampled for f in frames], field="video")
        except InputError as exc:  # a frame's position -> its video
            owner = [i for i, frames in enumerate(sampled) for _ in frames]
            raise exc.located(indices=owner) from None
        scores, counts, at = [], [], 0
        for frames, target in zip(sampled, targets):
            per_frame = [self.score_text(t, target) for t in texts[at : at + len(frames)]]
            at += len(frames)
            positive = [s for s in per_frame if s > 0]
            scores.append(sum(positive) / len(positive) if positive else 0.0)
            counts.append(len(positive))
        return RewardOutput(scores, extras={"text_frames": counts})
