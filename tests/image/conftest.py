"""Tiny random-init CLIP models saved the way users hold real weights, loaded through model_path.

- ``oc_dir``: an open_clip hub-style directory (open_clip_config.json + open_clip_model.safetensors);
- ``hf_dir``: a transformers CLIPModel directory with tokenizer and image-processor files (its path
  contains "openai" because torchmetrics only accepts such local paths);
- ``hps_ckpt``: an HPS-style checkpoint ({"state_dict": ...}) for the open_clip architecture of
  ``oc_dir`` but with different random weights.
The tokenizers use open_clip's shipped BPE vocabulary, so everything works offline.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
open_clip = pytest.importorskip("open_clip")
transformers = pytest.importorskip("transformers")


IMAGE_SIZE = 64
EMBED_DIM = 768  # the LAION aesthetic head reads 768-d ViT-L/14 embeddings

TINY_OPEN_CLIP = {
    "embed_dim": EMBED_DIM,
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
PREPROCESS = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
              "interpolation": "bicubic", "resize_mode": "shortest"}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one intra-op thread avoids OpenMP spin-waits on the shared 2-core machine (100x here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _save_open_clip_dir(path, seed: int):
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    model = open_clip.CLIP(**TINY_OPEN_CLIP)
    path.mkdir(parents=True, exist_ok=True)
    (path / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_OPEN_CLIP,
                                                            "preprocess_cfg": PREPROCESS}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path / "open_clip_model.safetensors"))
    return model


@pytest.fixture(scope="session")
def oc_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("oc") / "tiny-open-clip"
    _save_open_clip_dir(path, seed=0)
    return path


@pytest.fixture(scope="session")
def oc_reference(oc_dir):
    """open_clip's own loading of the same directory: (model, PIL preprocess, tokenizer)."""
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{oc_dir}")
    return model.eval(), preprocess, open_clip.get_tokenizer(f"local-dir:{oc_dir}")


@pytest.fixture(scope="session")
def hps_ckpt(tmp_path_factory):
    torch.manual_seed(123)
    model = open_clip.CLIP(**TINY_OPEN_CLIP)
    path = tmp_path_factory.mktemp("hps") / "HPS_v2.1_compressed.pt"
    torch.save({"state_dict": model.state_dict()}, path)
    return path, model.eval()


def _clip_tokenizer():
    from open_clip.tokenizer import bytes_to_unicode, default_bpe
    from transformers import CLIPTokenizer

    lines = gzip.open(default_bpe()).read().decode("utf-8").split("\n")
    merges = lines[1:49152 - 256 - 2 + 1]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges])


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    torch.manual_seed(1)
    config = CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77, "bos_token_id": 49406,
                     "eos_token_id": 49407, "pad_token_id": 49407},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": IMAGE_SIZE, "patch_size": 16},
        projection_dim=48, logit_scale_init_value=2.6592)
    model = CLIPModel(config).eval()
    path = tmp_path_factory.mktemp("hf") / "openai-tiny-clip"
    model.save_pretrained(path)
    improc = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE,
                                                                               "width": IMAGE_SIZE})
    CLIPProcessor(image_processor=improc, tokenizer=_clip_tokenizer()).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def hf_reference(hf_dir):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(hf_dir).eval(), CLIPProcessor.from_pretrained(hf_dir)


class ReferenceAestheticMLP(torch.nn.Module):
    """The improved-aesthetic-predictor head as its repository defines it (attribute `layers`)."""

    def __init__(self, input_size: int = EMBED_DIM):
        super().__init__()
        nn = torch.nn
        self.layers = nn.Sequential(nn.Linear(input_size, 1024), nn.Dropout(0.2), nn.Linear(1024, 128),
                                    nn.Dropout(0.2), nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16),
                                    nn.Linear(16, 1))

    def forward(self, x):
        return self.layers(x)


@pytest.fixture(scope="session")
def aesthetic_reference():
    torch.manual_seed(7)
    return ReferenceAestheticMLP().eval()


@pytest.fixture(scope="session")
def aesthetic_head_file(tmp_path_factory, aesthetic_reference):
    path = tmp_path_factory.mktemp("aes") / "sac+logos+ava1-l14-linearMSE.pth"
    torch.save(aesthetic_reference.state_dict(), path)
    return path
