"""Client similarity for ELSA (SPEC §3.1): Gaussian fingerprints and their symmetric KL divergence."""
from fedlab.clustering.fingerprint import gaussian_fingerprint, symmetric_kl

__all__ = ["gaussian_fingerprint", "symmetric_kl"]
