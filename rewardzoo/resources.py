"""Package data: example configs and model cards (installed inside the package, top-level in a checkout)."""

from __future__ import annotations

from pathlib import Path

from .errors import RegistryError, did_you_mean

_HERE = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """The folder of ``kind`` ('configs' or 'model_cards'), installed or in a source checkout."""
    for candidate in (_HERE / kind, _HERE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"rewardzoo's {kind} folder is missing from this installation")


def card_path(name: str) -> Path:
    path = data_dir("model_cards") / f"{name.lower()}.md"
    if not path.is_file():
        names = [p.stem for p in data_dir("model_cards").glob("*.md")]
        raise RegistryError(f"no model card for '{name}'{did_you_mean(name.lower(), names)}")
    return path


def read_card(name: str) -> tuple[dict, str]:
    """(front matter, markdown body) of a model card."""
    import yaml

    text = card_path(name).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}, text
    head, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(head) or {}, body


def config_path(name: str) -> Path:
    """An example config shipped with the package, by file stem (e.g. 'jpeg')."""
    path = data_dir("configs") / f"{name}.yaml"
    if not path.is_file():
        names = [p.stem for p in data_dir("configs").glob("*.yaml")]
        raise FileNotFoundError(f"no example config '{name}'{did_you_mean(name, names)}")
    return path
