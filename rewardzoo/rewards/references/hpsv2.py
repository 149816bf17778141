"""HPSv2 through the ``hpsv2`` package's own scoring (``hpsv2.img_score.score``), for the environment
:data:`~rewardzoo.rewards.references.HPSV2` names (the package pins pytest and protobuf at run time).

The published wheel (1.2.0) lacks the BPE vocabulary its vendored open_clip tokenizer reads at import
(``hpsv2/src/open_clip/bpe_simple_vocab_16e6.txt.gz``), so ``import hpsv2.img_score`` fails as installed;
:func:`supply_vocabulary` copies open_clip's (the same OpenAI CLIP file) into the environment first.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...errors import ConfigError
from ...shared.media import to_pil_rgb
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.weights import resolve_weights_file
from ..options import Autocast, RewardOptions, WeightPath

#: The hpsv2 package's checkpoints (``hpsv2/img_score.py``, ``hps_version``) and their hub repository: the same files
#: rewardzoo's ``hpsv2`` reward loads (a test checks the two tables agree; a family does not import another).
DEFAULT_REPO = "xswu/HPSv2"
FILES = {"v2.0": "HPS_v2_compressed.pt", "v2.1": "HPS_v2.1_compressed.pt"}


class ReferenceHPSv2(PointwiseReward):
    """The package's ``img_score.score(image, prompt, cp=CHECKPOINT, hps_version=VERSION)``, one sample at a time.

    The checkpoint is found as rewardzoo's ``hpsv2`` finds it (``model_path``: a file, a directory or hub
    repository holding the version's file; default ``xswu/HPSv2``). The package builds its own open_clip
    ``ViT-H-14`` (:meth:`install_model` may put another architecture in its place) and, as published, loads the
    checkpoint again on every call; it runs on ``device`` in float32 (``dtype`` is not applied). The package keeps
    its model in module globals, so a process holds one such reward. Options: :class:`Options` (``hpsv2``'s).
    """

    inputs = Inputs(("image", "prompt"))
    modality: ClassVar[str] = "image"
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)

    class Options(RewardOptions):
        version: Literal["v2.0", "v2.1"] = "v2.1"
        """Which checkpoint file: ``v2.1`` (``HPS_v2.1_compressed.pt``) or ``v2.0`` (``HPS_v2_compressed.pt``)."""
        clip_model: WeightPath = "ViT-H-14"
        """The open_clip architecture the checkpoint fits (the package builds ``ViT-H-14``; another one needs a
        subclass, :meth:`install_model`)."""
        autocast: Autocast = "auto"
        """Taken as ``hpsv2``'s option and not used: the package applies its own CUDA autocast."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        version, clip_model = self.options.version, self.options.clip_model
        supply_vocabulary()
        from hpsv2 import img_score

        self.version = version
        self.checkpoint = resolve_weights_file(model_path or DEFAULT_REPO, filename=FILES[version])
        img_score.device = device  # the package's module-level choice (CUDA when present)
        self.install_model(img_score, clip_model)

    def install_model(self, img_score: Any, clip_model: str) -> None:
        """Before the first call. The package builds ``ViT-H-14`` itself (``img_score.initialize_model``, under its
        own CUDA autocast: ``autocast`` is taken for rewardzoo's options and not used); another architecture needs
        a subclass that puts its model in ``img_score.model_dict``."""
        if clip_model != "ViT-H-14":
            raise ConfigError(
                f"the hpsv2 package builds ViT-H-14 only, got clip_model={clip_model!r}", field="kwargs.clip_model"
            )

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **_: Any) -> RewardOutput:
        from hpsv2 import img_score

        check_pairs(image=image, prompt=prompt)
        return RewardOutput(
            [
                float(img_score.score(to_pil_rgb(img), p, cp=self.checkpoint, hps_version=self.version)[0])
                for p, img in zip(prompt, image)
            ]
        )


VOCABULARY = "bpe_simple_vocab_16e6.txt.gz"


def supply_vocabulary() -> None:
    """Put open_clip's BPE vocabulary where hpsv2's tokenizer looks for it, when the package lacks it."""
    found = importlib.util.find_spec("hpsv2")
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            "the hpsv2 package is not installed in this environment (pip install hpsv2)", field="reward_model"
        )
    target = Path(found.submodule_search_locations[0]) / "src" / "open_clip" / VOCABULARY
    if target.is_file():
        return
    source = importlib.util.find_spec("open_clip")
    if source is None or not source.submodule_search_locations:
        raise ConfigError(
            f"hpsv2 lacks {target} and no open_clip package (which ships the same file) is installed to take it from",
            field="reward_model",
        )
    shutil.copyfile(Path(source.submodule_search_locations[0]) / VOCABULARY, target)
