"""Synchformer (Iashin et al., ICASSP 2024): audio-visual offset classification over 21 classes, -2.0..+2.0 s.

Our implementation of the network as MMAudio's evaluation (``hkchengrex/av-benchmark``, ``av_bench/synchformer``)
runs it, with the parameter names of its checkpoint ``synchformer_state_dict.pth`` so that the released weights
load as they are (strictly). Three parts:

- **video** (``vfeat_extractor``): a MotionFormer ViT (``divided`` space-time attention: each block attends over
  time per patch, then over space per frame, then an MLP; the CLS token attends to every token) on segments of 16
  frames at 224x224, tubelets 2x16x16 (8 x 14 x 14 tokens), separate spatial and temporal position embeddings;
  then a ``TransformerEncoderLayer`` with its own CLS token pools each frame's 196 patches: (B, S, 8, D);
- **audio** (``afeat_extractor``): an AST encoder (16x16 patches, strides 10, CLS and distillation tokens, position
  embeddings cut to a 66-frame spectrogram: 12 x 6 patches) on (66, 128) log-mel segments; then an encoder layer
  with a CLS token pools the 12 frequency patches of each time step: (B, S, 6, D);
- **head** (``vproj``/``aproj`` + ``transformer``): a 3-layer GPT-style encoder over ``[OFF] v... [MOD] a...`` with
  a learned position embedding of ``2 + S*(8 + 6)`` tokens (198 for the 14 segments it is trained on); the OFF
  token's output gives the 21 logits (``off_head``).

The dimensions are a :class:`SynchformerConfig` (the released model's by default) so a tiny model of the same
shape can be built for tests. No code of the reference is copied here; the tests and ``benchmarks/bench_av_sync.py``
compare this module with it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError
from ...shared.weights import load_state_dict, loading

#: The checkpoint's file name (MMAudio's ``ext_weights/`` and av-benchmark's ``weights/``).
WEIGHTS_FILE = "synchformer_state_dict.pth"
WEIGHTS_URL = "https://github.com/hkchengrex/MMAudio/releases/download/v0.1/synchformer_state_dict.pth"
WEIGHTS_MD5 = "5b2f5594b0730f70e41e549b7c94390c"


@dataclass(frozen=True)
class SynchformerConfig:
    """Dimensions of a Synchformer; the defaults are the released model's (``config.json`` beside tiny weights)."""

    video_dim: int = 768
    video_depth: int = 12
    video_heads: int = 12
    image_size: int = 224
    patch_size: int = 16
    tubelet: int = 2
    segment_frames: int = 16
    audio_dim: int = 768
    audio_depth: int = 12
    audio_heads: int = 12
    audio_intermediate: int = 3072
    mel_bins: int = 128
    spec_frames: int = 66
    audio_stride: int = 10
    head_layers: int = 3
    head_heads: int = 8
    segments: int = 14
    classes: int = 21

    @classmethod
    def from_file(cls, path: Path) -> SynchformerConfig:
        """A config from a ``config.json`` (unknown keys are a ConfigError)."""
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"'{path}': unknown Synchformer config keys {unknown}", field="model_path")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def video_tokens(self) -> int:
        """Tokens per video segment after pooling space: the segment's frames over the tubelet depth (8)."""
        return self.segment_frames // self.tubelet

    @property
    def audio_grid(self) -> tuple[int, int]:
        """AST's (frequency, time) patch grid of one segment (12, 6)."""
        f = (self.mel_bins - self.patch_size) // self.audio_stride + 1
        t = (self.spec_frames - self.patch_size) // self.audio_stride + 1
        return f, t


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Softmax attention of (N, L, d) queries over (N, M, d) keys/values, scaled by ``d ** -0.5``."""
    return F.scaled_dot_product_attention(q, k, v)


class DividedAttention(nn.Module):
    """One of MotionFormer's factorised attentions: the CLS query over all tokens, every other query over its
    group (the same patch across frames for time, the same frame's patches for space) with the CLS key/value
    prepended."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, frames: int, over_time: bool) -> torch.Tensor:
        b, n, d = x.shape
        h, hd = self.heads, d // self.heads
        q, k, v = (t.reshape(b, n, h, hd).transpose(1, 2).reshape(b * h, n, hd) for t in self.qkv(x).chunk(3, -1))
        cls_out = attend(q[:, :1], k, v)  # (bh, 1, hd)
        patches = (n - 1) // frames

        def group(t: torch.Tensor) -> torch.Tensor:  # (bh, f*p, hd) -> (bh*groups, len, hd)
            t = t[:, 1:].reshape(b * h, frames, patches, hd)
            if over_time:
                t = t.transpose(1, 2)  # (bh, p, f, hd): one sequence over frames per patch
            return t.reshape(-1, t.shape[2], hd)

        r = patches if over_time else frames
        qg, kg, vg = group(q), group(k), group(v)
        kg = torch.cat((k[:, :1].repeat_interleave(r, 0), kg), 1)
        vg = torch.cat((v[:, :1].repeat_interleave(r, 0), vg), 1)
        out = attend(qg, kg, vg)  # (bh*r, len, hd)
        out = out.reshape(b * h, r, -1, hd)
        if over_time:
            out = out.transpose(1, 2)  # back to (bh, f, p, hd)
        out = torch.cat((cls_out, out.reshape(b * h, -1, hd)), 1)
        out = out.reshape(b, h, n, hd).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


class Mlp(nn.Module):
    """Linear, GELU, linear."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class DividedBlock(nn.Module):
    """MotionFormer's block: ``x + time(norm3 x)``, then ``+ space(norm1 .)``, then ``+ mlp(norm2 .)``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(dim, eps=1e-6) for _ in range(3))
        self.attn = DividedAttention(dim, heads)
        self.timeattn = DividedAttention(dim, heads)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        x = x + self.timeattn(self.norm3(x), frames, over_time=True)
        x = x + self.attn(self.norm1(x), frames, over_time=False)
        return x + self.mlp(self.norm2(x))


class ClsPool(nn.TransformerEncoderLayer):
    """A pre-norm ``TransformerEncoderLayer`` (GELU, eps 1e-6) over ``[CLS] + x``, returning the CLS output."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__(
            dim,
            heads,
            hidden,
            dropout=0.0,
            activation=nn.GELU(),
            layer_norm_eps=1e-6,
            batch_first=True,
            norm_first=True,
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), 1)
        return super().forward(x)[:, 0]


class PatchEmbed(nn.Module):
    """A patch convolution (``proj``)."""

    def __init__(self, conv: nn.Module) -> None:
        super().__init__()
        self.proj = conv


class VideoEncoder(nn.Module):
    """MotionFormer features of segments: (N, 3, frames, H, W) -> (N, frames / tubelet, D)."""

    def __init__(self, c: SynchformerConfig) -> None:
        super().__init__()
        d, p = c.video_dim, c.patch_size
        self.grid = c.image_size // p
        self.frames = c.video_tokens
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid**2 + 1, d))
        self.temp_embed = nn.Parameter(torch.zeros(1, self.frames, d))
        # the 2-D patch embedding is unused (the checkpoint holds it: MotionFormer counts patches with it)
        self.patch_embed = PatchEmbed(nn.Conv2d(3, d, p, p))
        self.patch_embed_3d = PatchEmbed(nn.Conv3d(3, d, (c.tubelet, p, p), (c.tubelet, p, p)))
        self.blocks = nn.ModuleList(DividedBlock(d, c.video_heads) for _ in range(c.video_depth))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.spatial_attn_agg = ClsPool(d, c.video_heads, 4 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.patch_embed_3d.proj(x).flatten(2).transpose(1, 2)  # (N, f*h*w, D), frame-major
        patches = self.grid**2
        pos = self.pos_embed[:, 1:].repeat(1, self.frames, 1) + self.temp_embed.repeat_interleave(patches, 1)
        x = torch.cat((self.cls_token.expand(n, -1, -1), x), 1)
        x = x + torch.cat((self.pos_embed[:, :1], pos), 1)
        for block in self.blocks:
            x = block(x, self.frames)
        x = self.norm(x[:, 1:])  # (N, f*p, D)
        x = x.reshape(n * self.frames, patches, -1)
        return self.spatial_attn_agg.pool(x).reshape(n, self.frames, -1)


class AstAttention(nn.Module):
    """AST's self-attention (``attention.query/key/value``) and its output projection (``output.dense``)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention = nn.ModuleDict({k: nn.Linear(dim, dim) for k in ("query", "key", "value")})
        self.output = nn.ModuleDict({"dense": nn.Linear(dim, dim)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (
            self.attention[k](x).reshape(b, n, self.heads, -1).transpose(1, 2) for k in ("query", "key", "value")
        )
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        return self.output["dense"](out)


class AstLayer(nn.Module):
    """AST's pre-norm layer (``layernorm_before``, attention, ``layernorm_after``, intermediate GELU, output)."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attention = AstAttention(dim, heads)
        self.intermediate = nn.ModuleDict({"dense": nn.Linear(dim, hidden)})
        self.output = nn.ModuleDict({"dense": nn.Linear(hidden, dim)})
        self.layernorm_before = nn.LayerNorm(dim, eps=1e-12)
        self.layernorm_after = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output["dense"](F.gelu(self.intermediate["dense"](self.layernorm_after(x))))


class AstEmbeddings(nn.Module):
    """CLS and distillation tokens, patch projection (one channel), position embeddings."""

    def __init__(self, c: SynchformerConfig) -> None:
        super().__init__()
        f, t = c.audio_grid
        d = c.audio_dim
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.distillation_token = nn.Parameter(torch.zeros(1, 1, d))
        self.position_embeddings = nn.Parameter(torch.zeros(1, f * t + 2, d))
        conv = nn.Conv2d(1, d, c.patch_size, c.audio_stride)
        self.patch_embeddings = nn.ModuleDict({"projection": conv})

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        x = self.patch_embeddings["projection"](spec.unsqueeze(1).transpose(2, 3))  # (N, D, f, t)
        x = x.flatten(2).transpose(1, 2)
        n = x.shape[0]
        tokens = (self.cls_token.expand(n, -1, -1), self.distillation_token.expand(n, -1, -1), x)
        return torch.cat(tokens, 1) + self.position_embeddings


class AstModel(nn.Module):
    """AST's encoder: embeddings, layers, final layer norm."""

    def __init__(self, c: SynchformerConfig) -> None:
        super().__init__()
        self.embeddings = AstEmbeddings(c)
        layers = nn.ModuleList(AstLayer(c.audio_dim, c.audio_heads, c.audio_intermediate) for _ in range(c.audio_depth))
        self.encoder = nn.ModuleDict({"layer": layers})
        self.layernorm = nn.LayerNorm(c.audio_dim, eps=1e-12)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(spec)
        for layer in self.encoder["layer"]:
            x = layer(x)
        return self.layernorm(x)


class AudioEncoder(nn.Module):
    """AST features of segments: (N, spec_frames, mel_bins) -> (N, t, D), frequency pooled by a CLS layer."""

    def __init__(self, c: SynchformerConfig) -> None:
        super().__init__()
        self.grid = c.audio_grid
        self.ast = AstModel(c)
        self.freq_attn_agg = ClsPool(c.audio_dim, c.audio_heads, c.audio_intermediate)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        n = spec.shape[0]
        f, t = self.grid
        x = self.ast(spec)[:, 2:]  # (N, f*t, D), frequency-major
        x = x.reshape(n, f, t, -1).transpose(1, 2).reshape(n * t, f, -1)
        return self.freq_attn_agg.pool(x).reshape(n, t, -1)


class GptAttention(nn.Module):
    """minGPT's unmasked self-attention (``key``, ``query``, ``value``, ``proj``)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.key, self.query, self.value, self.proj = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (m(x).reshape(b, n, self.heads, -1).transpose(1, 2) for m in (self.query, self.key, self.value))
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d))


class GptBlock(nn.Module):
    """``x + attn(ln1 x)``, ``x + mlp(ln2 x)`` with ``mlp = Linear, GELU, Linear, Dropout`` (indices 0 and 2)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = GptAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(0.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class PosEmb(nn.Module):
    """A learned position embedding (``pos_emb``) added to the sequence."""

    def __init__(self, length: int, dim: int) -> None:
        super().__init__()
        self.pos_emb = nn.Parameter(torch.zeros(1, length, dim))


class OffsetHead(nn.Module):
    """The synchronisation transformer: ``[OFF] v [MOD] a`` -> 21 offset logits from the OFF token."""

    def __init__(self, c: SynchformerConfig) -> None:
        super().__init__()
        d = c.video_dim
        self.OFF_tok = nn.Parameter(torch.zeros(1, 1, d))
        self.MOD_tok = nn.Parameter(torch.zeros(1, 1, d))
        self.vis_in_lnorm, self.aud_in_lnorm = nn.LayerNorm(d), nn.LayerNorm(d)
        length = 2 + c.segments * (c.video_tokens + c.audio_grid[1])
        self.pos_emb_cfg = PosEmb(length, d)
        self.blocks = nn.Sequential(*(GptBlock(d, c.head_heads) for _ in range(c.head_layers)))
        self.ln_f = nn.LayerNorm(d)
        self.off_head = nn.Linear(d, c.classes)

    def forward(self, v: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        b = v.shape[0]
        x = torch.cat(
            (
                self.OFF_tok.expand(b, -1, -1),
                self.vis_in_lnorm(v),
                self.MOD_tok.expand(b, -1, -1),
                self.aud_in_lnorm(a),
            ),
            1,
        )
        x = self.ln_f(self.blocks(x + self.pos_emb_cfg.pos_emb))
        return self.off_head(x[:, 0])


class Synchformer(nn.Module):
    """The offset classifier: :meth:`video_features`, :meth:`audio_features`, :meth:`offset_logits`."""

    def __init__(self, config: SynchformerConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or SynchformerConfig()
        if c.audio_dim != c.video_dim:
            raise ConfigError("Synchformer needs audio_dim == video_dim", field="model_path")
        self.vfeat_extractor = VideoEncoder(c)
        self.afeat_extractor = AudioEncoder(c)
        self.vproj = nn.Linear(c.video_dim, c.video_dim)
        self.aproj = nn.Linear(c.audio_dim, c.audio_dim)
        self.transformer = OffsetHead(c)

    def video_features(self, segments: torch.Tensor) -> torch.Tensor:
        """(N, frames, 3, H, W) normalised segments -> (N, 8, D)."""
        return self.vfeat_extractor(segments.transpose(1, 2))

    def audio_features(self, spec: torch.Tensor) -> torch.Tensor:
        """(N, mel_bins, spec_frames) normalised log-mel segments -> (N, 6, D)."""
        return self.afeat_extractor(spec.transpose(1, 2))

    def offset_logits(self, video: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        """(B, S, 8, D) video and (B, S, 6, D) audio features of ``segments`` segments -> (B, classes) logits."""
        v = self.vproj(video).flatten(1, 2)
        a = self.aproj(audio).flatten(1, 2)
        return self.transformer(v, a)


def build_synchformer(path: str | None) -> Synchformer:
    """A :class:`Synchformer` (eval mode, CPU) from ``path``: a directory holding ``synchformer_state_dict.pth``
    (or ``model.safetensors``) and, for other dimensions than the released model's, ``config.json``; or the
    weights file itself; None: MMAudio's release, downloaded once to the torch hub cache (md5 checked)."""
    if path is None:
        target = Path(torch.hub.get_dir()) / "checkpoints" / WEIGHTS_FILE
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with loading(f"Synchformer's weights from {WEIGHTS_URL}", verb="download"):
                torch.hub.download_url_to_file(WEIGHTS_URL, str(target), progress=False)
        path = str(target)
    where, config = Path(path), SynchformerConfig()
    if where.is_dir():
        if (where / "config.json").is_file():
            config = SynchformerConfig.from_file(where / "config.json")
        found = [where / name for name in (WEIGHTS_FILE, "model.safetensors") if (where / name).is_file()]
        if not found:
            raise ConfigError(f"'{where}' holds neither {WEIGHTS_FILE} nor model.safetensors", field="model_path")
        where = found[0]
    elif not where.is_file():
        raise ConfigError(f"Synchformer weights not found: '{where}'", field="model_path")
    with loading(f"the Synchformer '{path}'"):
        model = Synchformer(config)
        model.load_state_dict(load_state_dict(where), strict=True)
    return model.eval()
