"""Aggregation kernels: pure functions of stacked client updates tau[K, P] (SPEC.md §0)."""
from fedlab.aggregators.basic import fedavg, magnitude_trim, pairwise_cosine

__all__ = ["fedavg", "magnitude_trim", "pairwise_cosine"]
