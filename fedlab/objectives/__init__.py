"""Objectives: pure penalty and distillation kernels, loss terms as modules, and the Client/Server
LightningModules."""
from fedlab.objectives.distill import dual_min_ce, sparse_soft_cross_entropy
from fedlab.objectives.penalties import pcr_penalty, proximal_penalty
from fedlab.objectives.pooling import pooled_kl, topk_pool

__all__ = ["dual_min_ce", "pcr_penalty", "proximal_penalty", "sparse_soft_cross_entropy", "pooled_kl", "topk_pool"]
