"""Translation of a teacher's top-K logits into a student's token space (FedMKT paper Appendix B step 3;
fedlab/methods/fedmkt/README.md (FM-6))."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def translate_topk(pairs: list[tuple[int, int]], teacher_ids: Tensor, teacher_logits: Tensor,
                   student_next: Tensor, vmap: np.ndarray | Tensor, temperature: float = 1.0,
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """Sparse soft targets for the student's positions.

    `pairs` are the 1-to-1 matched (teacher_pos, student_pos) tokens of one text; `teacher_ids/logits
    [S_t − 1, K]` the teacher's top-K at each position with a next token; `student_next[S_s]` the student's
    ground-truth next token per position (−100 where there is none); `vmap[teacher id] = student id`.
    A matched student position takes the teacher's top-K with ids translated through `vmap`, duplicates
    merged by max logit, probabilities softmax(logit / T) over the merged set; every other position with a
    next token gets a one-hot on its ground truth. Returns (ids[S_s, K] int64, probs[S_s, K], mask[S_s])."""
    s_len, k = student_next.shape[0], teacher_ids.shape[1]
    ids = torch.zeros(s_len, k, dtype=torch.long)
    probs = torch.zeros(s_len, k)
    mask = student_next != -100
    ids[:, 0] = student_next.clamp(min=0)
    probs[:, 0] = mask.float()
    pairs = [(i, j) for i, j in pairs if i < teacher_ids.shape[0] and j < s_len and bool(mask[j])]
    if pairs:
        ti = torch.tensor([p[0] for p in pairs])
        sj = torch.tensor([p[1] for p in pairs])
        vm = torch.as_tensor(vmap, dtype=torch.long)
        mapped = vm[teacher_ids[ti]]                                   # [M, K]
        lg = teacher_logits[ti].float().clone()
        earlier = torch.ones(k, k, dtype=torch.bool).tril(-1)          # k' < k
        dup = ((mapped[:, :, None] == mapped[:, None, :]) & earlier).any(-1)
        # keep the first occurrence of each id at its maximum logit over its duplicates
        same = mapped[:, :, None] == mapped[:, None, :]
        best = torch.where(same, lg[:, None, :], torch.full_like(lg[:, None, :], -torch.inf)).amax(-1)
        best = best.masked_fill(dup, -torch.inf)
        ids[sj] = mapped
        probs[sj] = torch.softmax(best / temperature, dim=-1)
    return ids, probs, mask
