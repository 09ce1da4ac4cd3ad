"""One BERT-base encoder layer (Devlin et al. 2019) at sequence length 128, plain PyTorch, random weights.

Hidden 768, 12 heads, feed-forward 3072, GELU, post-layer-norm; attention
written out (no fused kernels), so export sees matmuls, softmax and layer norms.

    ansor-opt examples/models/bert.py:bert_layer --ansor-extract-tasks
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        batch, _, seq, _ = context.shape
        return self.output(context.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim))


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(hidden, intermediate), nn.GELU(), nn.Linear(intermediate, hidden))
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ffn(x))


def bert_layer(batch: int = 1, seq: int = 128) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return EncoderLayer().eval(), (torch.randn(batch, seq, 768),)
