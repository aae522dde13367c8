"""Aggregation kernels: pure functions of stacked client updates tau[K, P] — vectorised over P, on CPU and
GPU, inputs never modified."""
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
