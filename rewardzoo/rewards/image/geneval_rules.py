"""GenEval's decision rules (Ghosh et al., 2023; djghosh13/geneval ``evaluation/evaluate_images.py``).

NumPy only: the rules work on :class:`~rewardzoo.rewards.image.detections.Detections` and on colour names,
so they are tested on hand-built detections without a model. :mod:`.geneval` runs the detector and the
colour classifier and hands their outputs to :func:`select_objects` and :func:`evaluate`.

The rules, as GenEval states them:

- per class, keep detections with confidence ``> threshold`` (0.3; 0.9 for the ``counting`` tag),
  highest first, at most ``max_objects`` (16), then drop any whose box IoU with a kept one is
  ``>= max_overlap`` (1.0 = no removal, GenEval's default; IoU with GenEval's ``+1`` pixel convention);
- an ``include`` clause ``{class, count}`` holds when at least ``count`` objects are kept; its ``color``
  must be the CLIP colour of each of the ``count`` most confident ones; its ``position`` ``[relation, j]``
  must hold between each of them and each object matched by include clause ``j`` (which must itself hold);
- an ``exclude`` clause ``{class, count}`` fails when ``count`` or more objects are kept;
- relative position of A to B: ``offset = centre_A - centre_B``; each axis shrinks towards 0 by
  ``position_threshold * (dim_A + dim_B)`` (0.1); no relation when both shrink below 1e-3; else with
  ``(dx, dy) = shrunk / |offset|``: ``left of`` if dx < -0.5, ``right of`` if dx > 0.5, ``above`` if
  dy < -0.5, ``below`` if dy > 0.5 (image y grows downwards).

flow_grpo's reward server (yifan123/reward-server ``gen_eval.py``, ``evaluate_reward``) adds a partial
score, reproduced by :func:`flow_grpo_partial`, and a stricter verdict with exact counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InputError
from .detections import Detections

#: GenEval's ``object_names.txt``: the 80 COCO thing classes in the detector's label order.
CLASS_NAMES: tuple[str, ...] = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "computer mouse",
    "tv remote",
    "computer keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)
COLORS: tuple[str, ...] = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")
#: GenEval's zero-shot colour prompts; ``{c}`` is the colour, ``{obj}`` the class name.
COLOR_TEMPLATES: tuple[str, ...] = (
    "a photo of a {c} {obj}",
    "a photo of a {c}-colored {obj}",
    "a photo of a {c} object",
)
RELATIONS: tuple[str, ...] = ("left of", "right of", "above", "below")
TAGS: tuple[str, ...] = ("single_object", "two_object", "counting", "colors", "position", "color_attr")


@dataclass(frozen=True)
class Thresholds:
    """GenEval's options (``evaluate_images.py --options``) with its defaults."""

    threshold: float = 0.3
    counting_threshold: float = 0.9
    max_objects: int = 16
    max_overlap: float = 1.0
    position_threshold: float = 0.1

    def confidence(self, tag: str) -> float:
        return self.counting_threshold if tag == "counting" else self.threshold


@dataclass(frozen=True)
class Clause:
    """One ``include`` or ``exclude`` entry of GenEval's metadata."""

    cls: str
    count: int
    color: str | None = None
    position: tuple[str, int] | None = None

    def describe(self) -> str:
        parts = [f"{self.cls} x{self.count}"]
        if self.color:
            parts.insert(0, self.color)
        if self.position:
            parts.append(f"{self.position[0]} #{self.position[1]}")
        return " ".join(parts)


@dataclass(frozen=True)
class Requirements:
    """A prompt's GenEval metadata: ``tag``, ``include`` clauses (AND), ``exclude`` clauses (OR)."""

    tag: str
    include: tuple[Clause, ...]
    exclude: tuple[Clause, ...] = ()
    prompt: str | None = None


@dataclass
class Verdict:
    """The outcome for one image: GenEval's verdict and flow_grpo's, per clause and overall."""

    correct: bool  # GenEval: every include holds and no exclude fires
    include_met: list[bool]  # per include clause (GenEval's rules)
    exclude_met: list[bool]  # per exclude clause: True when it did NOT fire
    reasons: list[str] = field(default_factory=list)
    partial: float = 0.0  # flow_grpo's partial score
    exact: bool = False  # flow_grpo's strict verdict (exact counts, excludes ignored)

    @property
    def fraction_met(self) -> float:
        met = self.include_met + self.exclude_met
        return sum(met) / len(met) if met else 1.0


# ---------------------------------------------------------------------------------------- metadata
def parse_metadata(value: Any, *, sample: int | None = None, reward: str | None = "geneval") -> Requirements:
    """GenEval metadata (a JSON string or mapping, one line of ``evaluation_metadata.jsonl``) -> Requirements.

    Raises :class:`InputError` naming the field ``metadata``, the sample and the offending key.
    """

    def bad(message: str) -> InputError:
        return InputError(message, reward=reward, field="metadata", sample=sample)

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise bad(f"not valid JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise bad(f"expected GenEval metadata (a JSON object with 'tag' and 'include'), got {type(value).__name__}")
    for key in ("tag", "include"):
        if key not in value:
            raise bad(f"GenEval metadata needs '{key}' (keys given: {sorted(value) or 'none'})")
    tag = value["tag"]
    if not isinstance(tag, str) or not tag:
        raise bad(f"'tag' must be a non-empty string, got {tag!r}")

    def clauses(key: str) -> tuple[Clause, ...]:
        items = value.get(key, [])
        if not isinstance(items, list):
            raise bad(f"'{key}' must be a list of clauses, got {type(items).__name__}")
        out = []
        for i, item in enumerate(items):
            where = f"{key}[{i}]"
            if not isinstance(item, Mapping):
                raise bad(f"'{where}' must be an object with 'class' and 'count', got {item!r}")
            unknown = sorted(set(item) - {"class", "count", "color", "position"})
            if unknown:
                raise bad(f"'{where}' has unknown key(s) {unknown}")
            cls = item.get("class")
            if cls not in CLASS_NAMES:
                raise bad(f"'{where}.class' must be one of GenEval's 80 class names, got {cls!r}")
            count = item.get("count")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise bad(f"'{where}.count' must be a positive integer, got {count!r}")
            color = item.get("color")
            if color is not None and (key == "exclude" or color not in COLORS):
                raise bad(f"'{where}.color' must be one of {list(COLORS)} (include clauses only), got {color!r}")
            position = item.get("position")
            if position is not None:
                ok = (
                    key == "include"
                    and isinstance(position, (list, tuple))
                    and len(position) == 2
                    and position[0] in RELATIONS
                    and isinstance(position[1], int)
                    and not isinstance(position[1], bool)
                    and 0 <= position[1] < i
                )
                if not ok:
                    raise bad(
                        f"'{where}.position' must be [relation, index of an earlier include clause] with a "
                        f"relation in {list(RELATIONS)}, got {position!r}"
                    )
                position = (str(position[0]), int(position[1]))
            out.append(Clause(cls, count, color, position))
        return tuple(out)

    include = clauses("include")
    if not include:
        raise bad("'include' must name at least one clause")
    prompt = value.get("prompt")
    return Requirements(tag, include, clauses("exclude"), prompt if isinstance(prompt, str) else None)


# ------------------------------------------------------------------------------------------ objects
def box_iou(box_a: np.ndarray, box_b: np.ndarray) -> float:
    """GenEval's IoU: areas count pixels inclusively (``x1 - x0 + 1``); 0 when the union is empty."""

    def area(x0: float, y0: float, x1: float, y1: float) -> float:
        return max(x1 - x0 + 1, 0) * max(y1 - y0 + 1, 0)

    inter = area(max(box_a[0], box_b[0]), max(box_a[1], box_b[1]), min(box_a[2], box_b[2]), min(box_a[3], box_b[3]))
    union = area(*box_a[:4]) + area(*box_b[:4]) - inter
    return float(inter / union) if union else 0.0


def select_objects(dets: Detections, tag: str, rules: Thresholds = Thresholds()) -> dict[str, Detections]:
    """GenEval's kept objects per class: above the tag's threshold, most confident first, capped, de-overlapped."""
    confidence = rules.confidence(tag)
    kept: dict[str, Detections] = {}
    for cls in dets.classes:
        of_cls = dets.of_class(cls)
        ranked = np.argsort(-of_cls.scores, kind="stable")
        order = ranked[of_cls.scores[ranked] > confidence][: rules.max_objects].tolist()
        chosen = []
        while order:
            best = order.pop(0)
            chosen.append(best)
            if rules.max_overlap != 1:
                order = [j for j in order if box_iou(of_cls.boxes[best], of_cls.boxes[j]) < rules.max_overlap]
        if chosen:
            kept[cls] = of_cls.select(np.asarray(chosen, dtype=np.int64))
    return kept


def relative_position(box_a: np.ndarray, box_b: np.ndarray, position_threshold: float = 0.1) -> set[str]:
    """The relations of box A to box B (``x0, y0, x1, y1``) under GenEval's rule (module docstring)."""
    a = np.asarray(box_a[:4], dtype=np.float64).reshape(2, 2)
    b = np.asarray(box_b[:4], dtype=np.float64).reshape(2, 2)
    offset = a.mean(axis=0) - b.mean(axis=0)
    dims = np.abs(a[1] - a[0]) + np.abs(b[1] - b[0])
    shrunk = np.maximum(np.abs(offset) - position_threshold * dims, 0) * np.sign(offset)
    if np.all(np.abs(shrunk) < 1e-3):
        return set()
    dx, dy = shrunk / np.linalg.norm(offset)
    found = set()
    if dx < -0.5:
        found.add("left of")
    if dx > 0.5:
        found.add("right of")
    if dy < -0.5:
        found.add("above")
    if dy > 0.5:
        found.add("below")
    return found


def color_requests(objects: Mapping[str, Detections], req: Requirements) -> list[tuple[int, str, int]]:
    """The colour classifications :func:`evaluate` will need: ``(include index, class, k)`` for the
    ``k = count`` most confident objects of each coloured include clause that has enough objects."""
    return [
        (i, c.cls, c.count)
        for i, c in enumerate(req.include)
        if c.color is not None and c.cls in objects and len(objects[c.cls]) >= c.count
    ]


# ------------------------------------------------------------------------------------------ verdicts
def evaluate(
    objects: Mapping[str, Detections],
    req: Requirements,
    colors: Mapping[int, Sequence[str]],
    rules: Thresholds = Thresholds(),
) -> Verdict:
    """GenEval's verdict plus flow_grpo's partial score and exact verdict.

    ``objects``: :func:`select_objects` output. ``colors[i]``: the colour names of the ``count`` most
    confident objects of include clause ``i`` (needed for each entry of :func:`color_requests`).
    """
    include_met: list[bool] = []
    reasons: list[str] = []
    groups: list[Detections | None] = []
    for i, clause in enumerate(req.include):
        found = objects.get(clause.cls)
        n = 0 if found is None else len(found)
        met = True
        if found is None or n < clause.count:  # (counts are >= 1: None is too few)
            met = False
            reasons.append(f"expected {clause.cls}>={clause.count}, found {n}")
        else:
            top = found.select(np.arange(clause.count))
            if clause.color is not None:
                names = list(colors[i])
                if names.count(clause.color) < clause.count:
                    met = False
                    seen = ", ".join(f"{names.count(c)} {c}" for c in COLORS if c in names)
                    reasons.append(
                        f"expected {clause.color} {clause.cls}>={clause.count}, found "
                        f"{names.count(clause.color)} {clause.color}; and {seen}"
                    )
            if clause.position is not None and met:
                relation, target = clause.position
                anchor = groups[target]
                if anchor is None:
                    met = False
                    reasons.append(f"no target for {clause.cls} to be {relation}")
                else:
                    met, why = _positions_hold(top, anchor, relation, rules.position_threshold)
                    if not met:
                        reasons.append(f"expected {clause.cls} {relation} target, found {why} target")
        include_met.append(met)
        groups.append(found.select(np.arange(clause.count)) if met and found is not None else None)
    exclude_met = []
    for clause in req.exclude:
        n = len(objects[clause.cls]) if clause.cls in objects else 0
        exclude_met.append(n < clause.count)
        if n >= clause.count:
            reasons.append(f"expected {clause.cls}<{clause.count}, found {n}")
    partial, exact = flow_grpo_partial(objects, req, colors, rules)
    return Verdict(all(include_met) and all(exclude_met), include_met, exclude_met, reasons, partial, exact)


def _positions_hold(objs: Detections, targets: Detections, relation: str, threshold: float) -> tuple[bool, str]:
    """Whether every object is ``relation`` every target; else the relations found for the first failure."""
    for box in objs.boxes:
        for target in targets.boxes:
            found = relative_position(box, target, threshold)
            if relation not in found:
                return False, " and ".join(sorted(found))
    return True, ""


def flow_grpo_partial(
    objects: Mapping[str, Detections],
    req: Requirements,
    colors: Mapping[int, Sequence[str]],
    rules: Thresholds = Thresholds(),
) -> tuple[float, bool]:
    """flow_grpo's ``evaluate_reward``: (partial score, exact verdict), reproduced term by term.

    Per include clause with ``n`` kept objects: a count term ``1 - |count - n| / count`` (negative when
    ``n > 2 * count``); when ``n != count`` the clause fails and a 0 term is added if it has a colour or a
    position; otherwise a colour term ``1 - |count - k| / count`` (``k`` objects of the asked colour;
    the clause fails unless ``k == count``) and, if the clause still holds and has a position, a 0 term
    when the target clause failed, else a 1 term, preceded by a 0 term when some object/target pair is
    in the wrong relation (flow_grpo appends the 1 after its loop either way). The score is the mean of
    the terms; ``exclude`` clauses are ignored; exact = every include clause held.
    """
    terms: list[float] = []
    groups: list[Detections | None] = []
    exact = True
    for i, clause in enumerate(req.include):
        found = objects.get(clause.cls)
        n = 0 if found is None else len(found)
        terms.append(1 - abs(clause.count - n) / clause.count)
        met = n == clause.count
        if not met or found is None:  # (counts are >= 1: None is not met)
            if clause.color is not None or clause.position is not None:
                terms.append(0.0)
        else:
            if clause.color is not None:
                k = list(colors[i]).count(clause.color)
                terms.append(1 - abs(clause.count - k) / clause.count)
                met = k == clause.count
            if clause.position is not None and met:
                relation, target = clause.position
                anchor = groups[target]
                if anchor is None:
                    met = False
                    terms.append(0.0)
                else:
                    met, _ = _positions_hold(found, anchor, relation, rules.position_threshold)
                    if not met:
                        terms.append(0.0)
                    terms.append(1.0)
        exact = exact and met
        groups.append(found if met else None)
    return (sum(terms) / len(terms) if terms else 0.0), exact
