"""Loss terms as modules with one signature: term(module, batch, outputs) -> scalar tensor.
A client objective is the task loss plus a weighted list of these terms."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlab.objectives.penalties import pcr_penalty, proximal_penalty


def target_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean token cross-entropy over target positions only (labels == -100 elsewhere), next-token shifted."""
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, 1:]
    mask = shift_labels != -100
    if not mask.any():
        return shift_logits.sum() * 0.0
    return F.cross_entropy(shift_logits[mask], shift_labels[mask])


def per_sample_target_nll(logits: Tensor, labels: Tensor) -> Tensor:
    """[B] Σ over each sample's target tokens of −log p(token | prefix) (FedMKT's l_k^i,
    fedlab/methods/fedmkt/README.md (FM-2))."""
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, 1:]
    ce = F.cross_entropy(shift_logits.transpose(1, 2), shift_labels.clamp(min=0), reduction="none")
    return (ce * (shift_labels != -100)).sum(1)


def per_sample_target_ce(logits: Tensor, labels: Tensor) -> Tensor:
    """[B] mean target-token cross-entropy per sample: the summed NLL over the number of target tokens."""
    return per_sample_target_nll(logits, labels) / (labels[:, 1:] != -100).sum(1).clamp(min=1)


class TaskLoss(nn.Module):
    name = "task"

    def forward(self, module, batch, outputs) -> Tensor:
        return target_cross_entropy(outputs.logits, batch["labels"])


class ParamsTerm(nn.Module):
    """Base for penalties on the flat vector of the communicated parameters (in the declared key order)."""

    def __init__(self, keys: tuple[str, ...], anchor: Tensor):
        super().__init__()
        self.keys = tuple(keys)
        self.register_buffer("anchor", anchor.detach().clone().float(), persistent=False)

    def flat_params(self, module) -> Tensor:
        params = module.param_index
        return torch.cat([params[k].reshape(-1) for k in self.keys])


class ProximalTerm(ParamsTerm):
    """FedProx's (μ/2)·‖φ − φ^(t)‖² with the received global state as anchor."""
    name = "proximal"

    def __init__(self, keys, anchor, mu: float):
        super().__init__(keys, anchor)
        self.mu = float(mu)

    def forward(self, module, batch, outputs) -> Tensor:
        return proximal_penalty(self.flat_params(module), self.anchor, self.mu)


class PCRTerm(ParamsTerm):
    """FedProxy's conflict-aware regulariser Σ_d C_d (φ[d] − φ^(t)[d])² (Eq. 9); with
    weighting='consensus' the weights are 1 − C (an ablation; fedlab/methods/fedproxy/README.md (FP-7))."""
    name = "pcr"

    def __init__(self, keys, anchor, conflict: Tensor, weighting: str = "conflict"):
        super().__init__(keys, anchor)
        if weighting not in ("conflict", "consensus"):
            raise ValueError(f"method.pcr_weighting: {weighting!r} is not allowed; allowed: conflict, consensus")
        weights = conflict.detach().float() if weighting == "conflict" else 1.0 - conflict.detach().float()
        self.register_buffer("weights", weights.clone(), persistent=False)

    def forward(self, module, batch, outputs) -> Tensor:
        return pcr_penalty(self.flat_params(module), self.anchor, self.weights)


class SparseDistillTerm(nn.Module):
    """FedMKT's distillation part of L2 / L3: CE(student, softmax(aligned top-K / T)) against the sparse
    targets the batch carries (`kd_ids`, `kd_probs`, `kd_mask`: [B, S, K], [B, S, K], [B, S]); the
    temperature is already applied to the targets. With weight 1 − λ beside the task CE at weight λ this is
    L = λ·CE(labels) + (1 − λ)·CE(student, teacher)."""
    name = "kd"

    def forward(self, module, batch, outputs) -> Tensor:
        from fedlab.objectives.distill import sparse_soft_cross_entropy

        return sparse_soft_cross_entropy(outputs.logits, batch["kd_ids"], batch["kd_probs"], batch["kd_mask"])
