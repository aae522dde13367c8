"""fedlab: federated co-tuning of large and small language models."""
import os

# MKL's GEMM may return bitwise-different sums depending on buffer alignment, i.e. on what a process ran
# before; strict conditional numerical reproducibility makes a run's numbers independent of its history
# (set before torch loads MKL; a user's own setting wins).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

__version__ = "0.1.0"
