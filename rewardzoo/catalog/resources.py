"""Package data: model cards (each reward's record) and use-case configs.

Both folders live inside the package (``rewardzoo/model_cards``, ``rewardzoo/configs``), in a checkout and
installed alike. A card is Markdown
with YAML front matter (``---`` lines); its ``## How to configure`` section holds the reward's
example config in a ```yaml block, which ``rewardzoo score NAME`` uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import RegistryError, did_you_mean

_HERE = Path(__file__).resolve().parents[1]  # the package folder
EXAMPLE_SECTION = "## How to configure"


def data_dir(kind: str) -> Path:
    """The package's folder of ``kind`` ('configs' or 'model_cards')."""
    folder = _HERE / kind
    if not folder.is_dir():
        raise FileNotFoundError(f"rewardzoo's {kind} folder is missing from this installation ({folder})")
    return folder


def card_files() -> list[Path]:
    """The model cards shipped with rewardzoo."""
    return sorted(data_dir("model_cards").glob("*.md"))


def load_yaml_text(text: str) -> Any:
    """YAML text through a safe loader (libyaml's when installed)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~15x faster
    return yaml.load(text, Loader=loader)


def read_card_file(path: Path) -> tuple[dict, str]:
    """(front matter, markdown body) of a card file; RegistryError when the front matter is unreadable."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text:
        raise RegistryError(f"model card '{path}' has no front matter (a block between '---' lines)")
    head, _, body = text[4:].partition("\n---\n")
    try:
        meta = load_yaml_text(head)
    except Exception as exc:  # yaml.YAMLError, without importing yaml here
        raise RegistryError(f"model card '{path}': front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise RegistryError(f"model card '{path}': front matter must be a mapping")
    return meta, body


def find_plugin_card(ep: Any) -> Path | None:
    """The card ``<name>.md`` a plugin's distribution ships, found among its files without importing it.

    Prefers a file in a folder named ``model_cards``; falls back to the folder of the entry point's
    top-level package (located with ``find_spec``, which does not import a top-level package).
    """
    wanted = f"{ep.name.lower()}.md"
    dist = getattr(ep, "dist", None)
    candidates: list[Path] = []
    if dist is not None:
        for file in dist.files or []:
            if file.name.lower() == wanted:
                candidates.append(Path(dist.locate_file(file)))
    if not candidates:
        import importlib.util

        top = ep.value.split(":")[0].split(".")[0]
        spec = importlib.util.find_spec(top)
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        for root in roots:
            candidates.extend(p for p in Path(root).rglob("*.md") if p.name.lower() == wanted)
    candidates = [p for p in candidates if p.is_file()]
    candidates.sort(key=lambda p: (p.parent.name != "model_cards", len(p.parts)))
    return candidates[0] if candidates else None


def example_yaml(body: str, where: str) -> str:
    """The first ```yaml block of a card body's How-to-configure section (``where`` names the card)."""
    section = body.split(EXAMPLE_SECTION, 1)
    if len(section) < 2 or "```yaml" not in section[1]:
        raise RegistryError(f"the model card of '{where}' has no ```yaml example under '{EXAMPLE_SECTION}'")
    return section[1].split("```yaml", 1)[1].split("```", 1)[0]


def config_path(name: str) -> Path:
    """A use-case config shipped with the package, by file stem (e.g. 'demo')."""
    path = data_dir("configs") / f"{name}.yaml"
    if not path.is_file():
        names = [p.stem for p in data_dir("configs").glob("*.yaml")]
        raise FileNotFoundError(f"no shipped config '{name}'{did_you_mean(name, names)}")
    return path
