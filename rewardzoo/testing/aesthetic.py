"""Tiny LAION aesthetic heads on disk: the v2 MLP (``sac+logos+ava1-l14-linearMSE.pth`` names) and the v1
``Linear`` head (``sa_0_4_vit_l_14_linear.pth``), plus the reference MLP a test scores with.

The files are what :func:`rewardzoo.rewards.image.aesthetic.load_aesthetic_head` and
:func:`~rewardzoo.rewards.video.frame_scores.load_linear_aesthetic_head` read (``laion_aesthetic``,
``video_aesthetic``). Imports: the standard library, :mod:`.clip` (``EMBED_DIM``) and :mod:`.common` at module
level; torch and safetensors inside the builders (``ReferenceAestheticMLP``, a torch class, is defined on
first access).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .clip import EMBED_DIM
from .common import save_safetensors

_REFERENCE_AESTHETIC_MLP = None


def _reference_aesthetic_mlp_class():
    """Define (once) and return the reference LAION aesthetic head class; torch is imported here."""
    global _REFERENCE_AESTHETIC_MLP
    if _REFERENCE_AESTHETIC_MLP is None:
        import torch

        class ReferenceAestheticMLP(torch.nn.Module):
            """The improved-aesthetic-predictor head as its repository defines it (attribute ``layers``).

            ``Linear(input_size, 1024), Dropout(0.2), Linear(1024, 128), Dropout(0.2), Linear(128, 64),
            Dropout(0.1), Linear(64, 16), Linear(16, 1)`` in a ``Sequential`` named ``layers``, so the
            parameter names are those of ``sac+logos+ava1-l14-linearMSE.pth`` (``layers.0`` ... ``layers.7``)
            and ``forward`` returns ``(B, 1)`` scores like the original.
            """

            def __init__(self, input_size: int = EMBED_DIM):
                super().__init__()
                nn = torch.nn
                self.layers = nn.Sequential(
                    nn.Linear(input_size, 1024),
                    nn.Dropout(0.2),
                    nn.Linear(1024, 128),
                    nn.Dropout(0.2),
                    nn.Linear(128, 64),
                    nn.Dropout(0.1),
                    nn.Linear(64, 16),
                    nn.Linear(16, 1),
                )

            def forward(self, x):
                return self.layers(x)

        ReferenceAestheticMLP.__module__ = __name__
        ReferenceAestheticMLP.__qualname__ = "ReferenceAestheticMLP"
        _REFERENCE_AESTHETIC_MLP = ReferenceAestheticMLP
    return _REFERENCE_AESTHETIC_MLP


def __getattr__(name: str) -> Any:
    """Module attribute hook: ``ReferenceAestheticMLP`` is a torch class, so it is defined on first use."""
    if name == "ReferenceAestheticMLP":
        return _reference_aesthetic_mlp_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """Module listing hook: the module's names plus the lazily defined ``ReferenceAestheticMLP``."""
    return sorted(set(globals()) | {"ReferenceAestheticMLP"})


def reference_aesthetic_head(*, seed: int = 7, input_size: int = EMBED_DIM):
    """A random-init reference LAION aesthetic head (``ReferenceAestheticMLP``) in eval mode.

    ``torch.manual_seed(seed)`` is called right before construction, so this is exactly the head that
    ``aesthetic_head_file(path, seed=seed, input_size=input_size)`` writes; a test scores with it as the
    reference. It has the same layer order (and so the same weights for a seed) as rewardzoo's own
    ``rewardzoo.rewards.image.aesthetic.AestheticHead``, but ``forward`` keeps the trailing ``1`` dim.
    """
    import torch

    torch.manual_seed(seed)
    return _reference_aesthetic_mlp_class()(input_size).eval()


def aesthetic_head_file(path, *, seed: int = 7, input_size: int = EMBED_DIM) -> Path:
    """Write a random-init LAION aesthetic v2 head with the reference parameter names and return the path.

    The format follows the suffix of ``path``: ``.pth``/``.pt`` is a plain ``torch.save`` of the state
    dict (like the published ``sac+logos+ava1-l14-linearMSE.pth``, loadable with
    ``weights_only=True``), ``.safetensors`` a safetensors file; anything else is a ``ValueError``.
    The keys are ``layers.{0,2,4,6,7}.{weight,bias}`` and the weights those of
    ``reference_aesthetic_head(seed=seed, input_size=input_size)``. Parent directories are created.
    """
    import torch

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".pth", ".pt", ".safetensors"):
        raise ValueError(f"aesthetic_head_file: unknown format '{path.name}' (use a .pth, .pt or .safetensors name)")
    state = reference_aesthetic_head(seed=seed, input_size=input_size).state_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".safetensors":
        save_safetensors(state, path)
    else:
        torch.save(state, path)
    return path


def linear_aesthetic_head_file(path, *, seed: int = 11, input_size: int = EMBED_DIM) -> Path:
    """Write a random-init LAION aesthetic **v1** head (``Linear(input_size, 1)``) as a ``torch.save`` state dict
    with the published key names ``weight`` / ``bias`` (as ``sa_0_4_vit_l_14_linear.pth``); return the path.

    ``torch.manual_seed(seed)`` precedes the ``nn.Linear`` construction. Parent directories are created.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    layer = torch.nn.Linear(input_size, 1)
    torch.save({k: v.detach().clone() for k, v in layer.state_dict().items()}, path)
    return path
