"""FedMKT's knowledge message: per public sample its loss l^i over the target
positions and, at every position, the top-K (token id, logit) pairs — ragged, never a dense
[N, S, V] tensor. Packed as a flat dict of tensors so that it travels, and is counted in bytes, like any
other state:

    loss     float32[N]       l^i
    offsets  int64[N+1]       sample i owns rows offsets[i]:offsets[i+1]
    ids      int32[T, K]      top-K token ids, T = Σ_i (S_i − 1) positions (those with a next token)
    logits   float32[T, K]    their logits, descending
"""
from __future__ import annotations

import torch
from torch import Tensor


def pack_knowledge(losses: Tensor, ids: list[Tensor], logits: list[Tensor],
                   logit_dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    if len(ids) != len(logits) or len(ids) != losses.numel():
        raise ValueError(f"pack_knowledge: {losses.numel()} losses, {len(ids)} id blocks, {len(logits)} logit blocks")
    lengths = torch.tensor([0] + [x.shape[0] for x in ids], dtype=torch.int64)
    k = ids[0].shape[1] if ids else 0
    return {
        "loss": losses.detach().float().cpu(),
        "offsets": lengths.cumsum(0),
        "ids": torch.cat(ids).to(torch.int32).cpu() if ids else torch.zeros(0, k, dtype=torch.int32),
        "logits": torch.cat(logits).to(logit_dtype).cpu() if logits else torch.zeros(0, k),
    }


def sample_topk(knowledge: dict[str, Tensor], i: int) -> tuple[Tensor, Tensor]:
    """(ids[S_i − 1, K] int64, logits[S_i − 1, K] float32) of public sample i."""
    a, b = int(knowledge["offsets"][i]), int(knowledge["offsets"][i + 1])
    return knowledge["ids"][a:b].long(), knowledge["logits"][a:b].float()


def num_positions(knowledge: dict[str, Tensor]) -> int:
    return int(knowledge["offsets"][-1])


def paper_estimate(num_samples: int, seq_len: int, k: int) -> int:
    """FedMKT Appendix C: Cost_com = N·S·K floating-point numbers per message."""
    return num_samples * seq_len * k
