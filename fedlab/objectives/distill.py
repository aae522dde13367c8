"""FedMKT's selective distillation kernels: DualMinCE (Algorithm 2) and cross-entropy against sparse
(top-K) soft targets."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def dual_min_ce(teacher_losses: Tensor, local_losses: Tensor) -> tuple[Tensor, Tensor]:
    """FedMKT Algorithm 2 (DualMinCE): for each public sample i, k* = argmin_k l_k^i over the M teachers
    (rows of `teacher_losses[M, N]`; ties → the lowest index), kept iff l_{k*}^i < l_local^i.
    Returns (keep: bool[N], k*: int64[N])."""
    if teacher_losses.dim() == 1:
        teacher_losses = teacher_losses[None]
    best, which = teacher_losses.min(dim=0)
    return best < local_losses, which


def sparse_soft_cross_entropy(logits: Tensor, ids: Tensor, probs: Tensor, mask: Tensor) -> Tensor:
    """CE(student, p) = −Σ_k p_k · log softmax(student)[ids_k], averaged over the positions where
    mask = 1. `logits[B, S, V]` is the student's output; the target is sparse (`ids`, `probs`: [B, S, K],
    p summing to 1 per position) — the dense [B, S, V] target is never built."""
    logp = F.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, ids.clamp(min=0))
    per_pos = -(picked * probs).sum(-1)
    m = mask.to(per_pos.dtype)
    return (per_pos * m).sum() / m.sum().clamp(min=1.0)
