"""Reference pairings: which model, template, decoding, image bounds and frame sampling a judge's reference runs
together, and what rewardzoo's default and presets run. Each judge's rows are the ``pairing:`` list of its
card's front matter (reference rows first); nothing else states them.

``scripts/build_docs.py`` renders them into the card's ``## Reference pairing`` table;
``tests/vlm/test_vlm_pairings.py`` checks that every ``default`` / ``preset:`` row reproduces a ``reference`` row
(the same model and template) and that the reward class really runs what its rows say. Pure data: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import RegistryError

#: What a model or template cell says when the user must give it (rubric judges).
USER_GIVEN = "user-given (required)"


@dataclass(frozen=True)
class Pairing:
    """One way of running a judge: as a reference runs it (``setting="reference"``), as rewardzoo runs it by
    default (``"default"``), or under a preset (``"preset: NAME"``).

    ``template`` is the template key the reward's options name (or, on a reference row, the key of the
    rewardzoo template that holds the reference's text); ``reference``: on default / preset rows, the
    ``source`` of the reference row they reproduce (None on reference rows; ``"-"`` where no reference
    pairing exists, as for rubric judges with user-given models and templates)."""

    setting: str
    source: str
    model: str
    template: str
    decoding: str
    image_bounds: str
    frames: str = "-"
    reference: str | None = None

    @property
    def preset(self) -> str | None:
        """The preset's name on a ``preset: NAME`` row, else None."""
        return self.setting.partition("preset: ")[2] or None


_REQUIRED = tuple(f.name for f in fields(Pairing) if f.name not in ("frames", "reference"))
_KEYS = {f.name for f in fields(Pairing)}


def card_pairings(meta: Mapping[str, Any], where: str) -> tuple[Pairing, ...]:
    """The rows of a card's ``pairing:`` list (empty when it has none); RegistryError names the card and row."""
    rows = meta.get("pairing")
    if rows is None:
        return ()
    if not isinstance(rows, list) or not rows:
        raise RegistryError(f"model card '{where}': 'pairing' must be a non-empty list of rows")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise RegistryError(f"model card '{where}': pairing[{i}] must be a mapping")
        missing = [k for k in _REQUIRED if k not in row]
        unknown = sorted(set(row) - _KEYS)
        if missing or unknown:
            raise RegistryError(f"model card '{where}': pairing[{i}] lacks {missing} / has unknown keys {unknown}")
        bad = [k for k, v in row.items() if not (isinstance(v, str) or (k == "reference" and v is None))]
        if bad:
            raise RegistryError(f"model card '{where}': pairing[{i}] values must be text: {bad}")
        out.append(Pairing(**row))
    return tuple(out)


def pairings() -> dict[str, tuple[Pairing, ...]]:
    """Every reward with a card that states pairing rows (shipped or a plugin's): name -> rows."""
    from ..registry import entries, read_card

    out = {}
    for name, info in entries().items():
        if info.card is not None:
            rows = card_pairings(read_card(name)[0], str(info.card))
            if rows:
                out[name] = rows
    return out


def model_id(cell: str) -> str:
    """The model id of a model cell (what precedes a parenthesised note)."""
    return cell.split(" (", 1)[0]


__all__ = ["USER_GIVEN", "Pairing", "card_pairings", "model_id", "pairings"]
