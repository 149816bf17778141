"""DiNa-LRM's reward head (HKUST-C4G/diffusion-rm, ``diffusion_rm/models/reward_head.py``), written here from its
description; parameter names follow the published ``rm_head.pt`` so it loads as saved.

For each tapped backbone layer, a FiLM adapter modulates the tokens by the timestep embedding ``t``
(``x' = proj(proj_in(x) * (1 + gamma(t)) + beta(t) + layer_embed)``, ``gamma, beta`` from a two-layer SiLU MLP),
the adapters' outputs are concatenated per token and mixed back to the head's width (``agg_visual``,
``agg_text``). Learned query tokens then read the image tokens and the text tokens in two cross-attentions
(RMS-normed inputs, separate key / value projections for image and text, the values gated token by token by
``sigmoid(MLP(token))``, the two attention outputs summed), read the image tokens again in a second, ungated
cross-attention, pass a residual feed-forward (RMSNorm, GELU, 4x width), and a linear head scores each query; the
score is the mean over the queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def _mlp(width: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, hidden), nn.SiLU(), nn.Linear(hidden, out))


class FiLMAdapter(nn.Module):
    """One tapped layer's tokens, modulated by the timestep embedding and projected to ``out_dim``."""

    def __init__(self, in_dim: int, t_dim: int, width: int, out_dim: int, project_in: bool) -> None:
        super().__init__()
        self.proj_in: nn.Module = nn.Linear(in_dim, width) if (project_in or in_dim != width) else nn.Identity()
        self.layer_embed = nn.Parameter(torch.zeros(1, 1, width))
        self.cond_mlp = _mlp(t_dim, 2 * width, 2 * width)
        self.proj = nn.Linear(width, out_dim)

    def forward(self, tokens: torch.Tensor, t_emb: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.cond_mlp(t_emb)[:, None, :].chunk(2, dim=-1)
        return self.proj(self.proj_in(tokens) * (1 + gamma) + beta + self.layer_embed)


class GatedCrossAttention(nn.Module):
    """Queries attend to image tokens and, with ``text``, separately to text tokens (outputs summed); with
    ``gated`` each context token's value is scaled by ``sigmoid(MLP(token))``. Residual on the queries."""

    def __init__(self, width: int, heads: int, *, text: bool, gated: bool) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"the head's width {width} is not divisible by its {heads} attention heads")
        self.heads = heads
        self.norm_q = nn.RMSNorm(width)
        self.norm_v = nn.RMSNorm(width)
        self.norm_t = nn.RMSNorm(width) if text else None
        self.to_q = nn.Linear(width, width)
        self.to_k_vis = nn.Linear(width, width)
        self.to_v_vis = nn.Linear(width, width)
        self.to_k_text = nn.Linear(width, width) if text else None
        self.to_v_text = nn.Linear(width, width) if text else None
        self.to_out = nn.Sequential(nn.Linear(width, width), nn.Dropout(0.0))
        self.gate_vis = _mlp(width, width, 1) if gated else None
        self.gate_text = _mlp(width, width, 1) if (gated and text) else None

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, n, d = q.shape
        split = [x.reshape(b, x.shape[1], self.heads, d // self.heads).transpose(1, 2) for x in (q, k, v)]
        return F.scaled_dot_product_attention(*split).transpose(1, 2).reshape(b, n, d)

    def _branch(self, q: torch.Tensor, ctx: torch.Tensor, k: nn.Module, v: nn.Module, gate: nn.Module | None) -> Any:
        values = v(ctx)
        if gate is not None:
            values = values * torch.sigmoid(gate(ctx))
        return self._attend(q, k(ctx), values)

    def forward(self, queries: torch.Tensor, image: torch.Tensor, text: torch.Tensor | None) -> torch.Tensor:
        q = self.to_q(self.norm_q(queries))
        out = self._branch(q, self.norm_v(image), self.to_k_vis, self.to_v_vis, self.gate_vis)
        if text is not None and self.norm_t is not None and self.to_k_text is not None and self.to_v_text is not None:
            out = out + self._branch(q, self.norm_t(text), self.to_k_text, self.to_v_text, self.gate_text)
        return queries + self.to_out(out)


class DiNaRewardHead(nn.Module):
    """The reward head over ``n_visual`` image-token taps and ``n_text`` text-token taps of width ``token_dim``;
    :meth:`forward` returns (B, out_dim). Options as the published config's ``reward_head`` block (``width`` -1 =
    ``token_dim``; the timestep embedding has the backbone's width)."""

    def __init__(
        self,
        token_dim: int,
        n_visual: int,
        n_text: int,
        *,
        width: int = -1,
        out_dim: int = 1,
        num_queries: int = 4,
        num_attn_heads: int = 8,
        use_proj_in: bool = False,
    ) -> None:
        super().__init__()
        width = token_dim if width == -1 else width
        part = width // 4

        def adapters(n: int) -> nn.ModuleList:
            return nn.ModuleList(FiLMAdapter(token_dim, token_dim, width, part, use_proj_in) for _ in range(n))

        self.layer_adapters_visual = adapters(n_visual)
        self.layer_adapters_text = adapters(n_text)
        self.agg_visual = nn.Linear(n_visual * part, width)
        self.agg_text = nn.Linear(n_text * part, width) if n_text else None
        self.query_tokens = nn.Parameter(torch.zeros(1, num_queries, width))
        self.attn1 = GatedCrossAttention(width, num_attn_heads, text=n_text > 0, gated=True)
        self.attn2 = GatedCrossAttention(width, num_attn_heads, text=False, gated=False)
        self.norm_ff = nn.RMSNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(0.0))
        self.head = nn.Linear(width, out_dim)

    def tokens(
        self, image_states: Sequence[torch.Tensor], text_states: Sequence[torch.Tensor], t_emb: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The image and text tokens the queries read, from one noise level's taps."""
        if len(image_states) != len(self.layer_adapters_visual) or len(text_states) != len(self.layer_adapters_text):
            raise ValueError(
                f"the head reads {len(self.layer_adapters_visual)} image and {len(self.layer_adapters_text)} text "
                f"taps, got {len(image_states)} and {len(text_states)}"
            )
        image = self.agg_visual(torch.cat([a(x, t_emb) for a, x in zip(self.layer_adapters_visual, image_states)], -1))
        text = None
        if self.agg_text is not None:
            text = self.agg_text(torch.cat([a(x, t_emb) for a, x in zip(self.layer_adapters_text, text_states)], -1))
        return image, text

    def forward(
        self, image_states: Sequence[torch.Tensor], text_states: Sequence[torch.Tensor], t_emb: torch.Tensor
    ) -> torch.Tensor:
        return self.read(*self.tokens(image_states, text_states, t_emb))

    def ensemble(self, views: Sequence[tuple[Sequence[torch.Tensor], Sequence[torch.Tensor], torch.Tensor]]) -> Any:
        """The score of several noise levels at once: each level's tokens (:meth:`tokens`) side by side, read by
        the queries together (the reference's ``forward_ensemble``)."""
        parts = [self.tokens(*view) for view in views]
        texts = [t for _, t in parts if t is not None]
        return self.read(torch.cat([i for i, _ in parts], dim=1), torch.cat(texts, dim=1) if texts else None)

    def read(self, image: torch.Tensor, text: torch.Tensor | None) -> torch.Tensor:
        """(B, out_dim): the queries' cross-attentions, feed-forward and score, averaged over the queries."""
        queries = self.query_tokens.expand(image.shape[0], -1, -1)
        queries = self.attn1(queries, image, text)
        queries = self.attn2(queries, image, None)
        queries = queries + self.ff(self.norm_ff(queries))
        return self.head(queries).mean(dim=1)
