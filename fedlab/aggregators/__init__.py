"""Aggregation kernels: pure functions of stacked client updates tau[K, P] (SPEC.md §0)."""
from fedlab.aggregators.basic import fedavg, magnitude_trim, pairwise_cosine
from fedlab.aggregators.merging import (
    conflict_scores,
    consensus_weights,
    h_ties,
    heterogeneity,
    server_analysis,
    ties,
)
from fedlab.aggregators.robust import coordinate_median, krum, trimmed_mean

__all__ = ["fedavg", "magnitude_trim", "pairwise_cosine", "conflict_scores", "consensus_weights", "h_ties",
           "heterogeneity", "server_analysis", "ties", "coordinate_median", "trimmed_mean", "krum"]
