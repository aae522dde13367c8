"""Client similarity and grouping: ELSA's Gaussian fingerprints and symmetric KL (SPEC §3.1), Floe's
silhouette-chosen k-means (SPEC §4.3)."""
from fedlab.clustering.fingerprint import gaussian_fingerprint, symmetric_kl
from fedlab.clustering.select import Clustering, choose_clusters, fixed_clusters

__all__ = ["Clustering", "choose_clusters", "fixed_clusters", "gaussian_fingerprint", "symmetric_kl"]
