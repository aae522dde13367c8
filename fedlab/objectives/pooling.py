"""Co-PLMs' structure-agnostic mutual learning kernels (SPEC.md §5.3): top-K pooling of a distribution and
the KL divergence between pooled distributions."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def topk_pool(probs: Tensor, k: int, index: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Co-PLMs §5.3: [p[I], 1 − Σ p[I]] over the k chosen indices I (the top-k of `probs` itself when
    `index` is None). Returns (pooled[..., k+1], I[..., k]); the tail mass is clamped at 0 against rounding."""
    if index is None:
        if not 1 <= k <= probs.shape[-1]:
            raise ValueError(f"k must be in [1, {probs.shape[-1]}], got {k}")
        index = probs.topk(k, dim=-1).indices
    elif index.shape[-1] != k:
        raise ValueError(f"index has {index.shape[-1]} entries in its last dimension, expected k={k}")
    picked = probs.gather(-1, index)
    tail = (1.0 - picked.sum(-1, keepdim=True)).clamp(min=0.0)
    return torch.cat([picked, tail], dim=-1), index


def pooled_kl(teacher_logits: Tensor, student_logits: Tensor, k: int) -> Tensor:
    """Co-PLMs §5.3: KL(pooled_t ‖ pooled_s) over the teacher's top-k bins plus the tail, summed over
    positions and averaged over the batch (the first dimension; a [V] input is one position)."""
    if teacher_logits.shape != student_logits.shape:
        raise ValueError(f"teacher {tuple(teacher_logits.shape)} and student {tuple(student_logits.shape)} differ")
    pt, index = topk_pool(F.softmax(teacher_logits.float(), dim=-1), k)
    ps, _ = topk_pool(F.softmax(student_logits.float(), dim=-1), k, index)
    tiny = torch.finfo(ps.dtype).tiny
    kl = (torch.xlogy(pt, pt) - pt * torch.log(ps.clamp(min=tiny))).sum(-1)
    if kl.dim() == 0:
        return kl
    return kl.reshape(kl.shape[0], -1).sum(1).mean()
