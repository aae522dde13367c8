"""Client similarity and grouping: ELSA's Gaussian fingerprints and symmetric KL, Floe's
silhouette-chosen k-means."""
from fedlab.clustering.fingerprint import gaussian_fingerprint, symmetric_kl
from fedlab.clustering.select import Clustering, choose_clusters, fixed_clusters

__all__ = ["Clustering", "choose_clusters", "fixed_clusters", "gaussian_fingerprint", "symmetric_kl"]
