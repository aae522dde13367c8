"""Co-PLMs' structure-agnostic mutual learning kernels: top-K pooling of a distribution and the KL divergence
between pooled distributions (paper Eqs. 6–7; fedlab/methods/coplms/README.md (CP-5), (CP-6); "README" below
is that page)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def topk_pool(probs: Tensor, k: int, index: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Co-PLMs paper Eq. 6 (README (CP-5)): [p[I], 1 − Σ p[I]] over the k chosen indices I (the top-k of
    `probs` itself when `index` is None). Returns (pooled[..., k+1], I[..., k]); the tail mass is clamped at 0
    against rounding."""
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
    """Co-PLMs paper Eq. 7: KL(pooled_t ‖ pooled_s) over the teacher's top-k bins plus the tail, summed over
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


def _log_tail(logits: Tensor, index: Tensor, log_z: Tensor) -> Tensor:
    """log(1 − Σ_{i∈I} softmax(logits)_i) computed as logsumexp(logits outside I) − logsumexp(logits)."""
    outside = logits.scatter(-1, index, float("-inf"))
    return torch.logsumexp(outside, -1) - log_z


def mapped_pooled_kl(teacher_logits: Tensor, student_logits: Tensor, k: int, vmap: Tensor | None = None,
                     pool_index: str = "teacher") -> Tensor:
    """Co-PLMs' L_kt per position across two vocabularies (README (CP-5)): teacher logits [N, V_t], student
    logits [N, V_s] at N paired positions; returns KL(pooled_t ‖ pooled_s) per position, [N].

    pool_index="teacher" (default): I = the teacher's top-k ids, mapped into the student's vocabulary by
    `vmap[V_t]` (None: the identity); teacher bins that map to one student id are merged by summing their
    probabilities, so both sides pool over the same m ≤ k student ids J plus the tail:
    pooled_t = [Σ_{i→j} p_t[i] for j ∈ J, 1 − Σ_I p_t], pooled_s = [p_s[J], 1 − Σ_J p_s]; tails in log space
    (logsumexp outside the set minus logsumexp of all). pool_index="own": the paper's literal reading, each
    side its own top-k, compared bin by bin in descending order, plus the tails. T = 1; the caller detaches
    the teacher."""
    if teacher_logits.shape[0] != student_logits.shape[0]:
        raise ValueError(f"teacher has {teacher_logits.shape[0]} positions, student {student_logits.shape[0]}")
    if pool_index not in ("teacher", "own"):
        raise ValueError(f"pool_index: {pool_index!r} is not allowed; allowed: teacher, own")
    t = teacher_logits.float()
    s = student_logits.float()
    if vmap is not None and t.shape[-1] > len(vmap):
        # logit columns past the tokenizer's vocabulary (a padded embedding: GPT-J 50,400 for 50,257 tokens,
        # Qwen2.5) have no token to map: the teacher's distribution is over its real tokens
        t = t[..., : len(vmap)]
    if not 1 <= k <= min(t.shape[-1], s.shape[-1]):
        raise ValueError(f"k must be in [1, {min(t.shape[-1], s.shape[-1])}], got {k}")
    if t.shape[0] == 0:
        return t.new_zeros(0)
    log_zt, log_zs = torch.logsumexp(t, -1), torch.logsumexp(s, -1)
    t_top = t.topk(k, dim=-1).indices                                     # [N, k]
    log_pt = t.gather(-1, t_top) - log_zt[:, None]
    log_tail_t = _log_tail(t, t_top, log_zt)
    if pool_index == "own":
        s_top = s.topk(k, dim=-1).indices
        log_ps = s.gather(-1, s_top) - log_zs[:, None]
        log_tail_s = _log_tail(s, s_top, log_zs)
        lt = torch.cat([log_pt, log_tail_t[:, None]], -1)
        ls = torch.cat([log_ps, log_tail_s[:, None]], -1)
        return (lt.exp() * (lt - ls)).nan_to_num(0.0, posinf=0.0, neginf=0.0).sum(-1)
    mapped = t_top if vmap is None else torch.as_tensor(vmap, device=t.device, dtype=torch.long)[t_top]
    # merge duplicates by sum: each bin's mass goes to the first bin with the same student id
    same = mapped[:, :, None] == mapped[:, None, :]                       # [N, k, k]
    first = same.float().argmax(-1)                                       # index of the first equal bin
    is_first = first == torch.arange(k, device=t.device)[None, :]
    pt = torch.zeros_like(log_pt).scatter_add(-1, first, log_pt.exp())   # merged teacher mass per bin
    log_ps = s.gather(-1, mapped) - log_zs[:, None]
    log_tail_s = _log_tail(s, mapped, log_zs)
    head = torch.where(is_first, torch.xlogy(pt, pt) - pt * log_ps, torch.zeros_like(pt)).sum(-1)
    tail_t = log_tail_t.exp()
    tail = torch.where(tail_t > 0, tail_t * (log_tail_t - log_tail_s), torch.zeros_like(tail_t))
    return head + tail
