"""pyiqa's own Q-Align metric as a reward, for the worker environment of the Q-Align tests: ``pyiqa.archs.qalign_arch.
QAlign`` (its preprocessing and ``MPLUGOwl2LlamaForCausalLM.score``) built as pyiqa builds it, with the hub id
``q-future/one-align`` redirected to ``model_path`` and pyiqa's process-wide Llama replacement applied, scoring one
image at a time as pyiqa does; :class:`PyiqaQAlignVideo` is its network's video path (``model.score(videos,
task_, input_="video")``), one video at a time, on the frames Q-Align's ``load_video`` keeps (``fps``) or the
engine's uniformly sampled ones (``num_frames``)."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import torch

from rewardzoo.rewards.base import Inputs, PointwiseReward, RewardOutput


class PyiqaQAlign(PointwiseReward):
    """``pyiqa``'s ``QAlign(dtype='fp16')(x, task_=task)`` per image, weights from ``model_path``."""

    inputs = Inputs(("image",), images="float")
    score_range = (1.0, 5.0)

    def __init__(self, model_path=None, device="cpu", dtype="float16", *, task="quality"):
        super().__init__(model_path, device, dtype)
        from pyiqa.archs import qalign_arch
        from pyiqa.archs.q_align import modeling_llama2, modeling_mplug_owl2
        from transformers import CLIPImageProcessor, LlamaTokenizer

        modeling_llama2.replace_llama_modality_adaptive()  # what importing pyiqa's module does on its first import
        owl2 = modeling_mplug_owl2.MPLUGOwl2LlamaForCausalLM
        load = owl2.from_pretrained.__func__
        local = {
            "tokenizer": LlamaTokenizer.from_pretrained(model_path),
            "processor": CLIPImageProcessor.from_pretrained(model_path),
        }

        class Hub:
            def __init__(self, what):
                self.what = what

            def from_pretrained(self, name, **_):
                assert name == "q-future/one-align", name
                return local[self.what]

        with (
            mock.patch.object(
                owl2, "from_pretrained", classmethod(lambda cls, name, **kw: load(cls, model_path, **kw))
            ),
            mock.patch.object(qalign_arch, "CLIPImageProcessor", Hub("processor")),
            mock.patch.object(modeling_mplug_owl2, "CLIPImageProcessor", Hub("processor")),
            mock.patch.object(modeling_mplug_owl2, "LlamaTokenizer", Hub("tokenizer")),
        ):
            self.net = qalign_arch.QAlign(dtype="fp16").to(device)
        self.task = task

    def __call__(self, image, **_):
        with torch.inference_mode():
            return RewardOutput([float(self.net(img[None].to(self.device), task_=self.task)) for img in image])


class PyiqaQAlignVideo(PyiqaQAlign):
    """pyiqa's mPLUG-Owl2 ``score([frames], task_=task, input_="video")`` per video (frames as torchvision's
    ``to_pil_image``); ``mode: frames`` = the mean over frames of :class:`PyiqaQAlign`'s image score instead."""

    inputs = Inputs(("video",), frames="float")

    def __init__(
        self, model_path=None, device="cpu", dtype="float16", *, task="quality", num_frames=8, fps=None, mode="video"
    ):
        super().__init__(model_path, device, dtype, task=task)
        self.inputs = replace(self.inputs, num_frames=None if fps else num_frames)
        self.fps, self.mode = fps, mode

    def __call__(self, video, **_):
        from torchvision.transforms.functional import to_pil_image

        scores = []
        for frames in video:
            if self.fps:  # Q-Align's load_video: one frame a second
                frames = frames[[int(self.fps * i) for i in range(int(len(frames) / self.fps))]]
            with torch.inference_mode():
                if self.mode == "frames":
                    scores.append(
                        float(torch.cat([self.net(f[None], task_=self.task) for f in frames]).double().mean())
                    )
                    continue
                pils = [to_pil_image(f) for f in frames]
                scores.append(float(self.net.model.score([pils], task_=self.task, input_="video")[0]))
        return RewardOutput(scores)
