"""What crosses a boundary: message types and their byte counts, FedMKT's knowledge message, and ELSA's
activation codecs (count sketch, SS-OP)."""
from fedlab.comm.sketch import CountSketch, sketch_for_ratio
from fedlab.comm.ssop import client_seed, ssop_matrix

__all__ = ["CountSketch", "client_seed", "sketch_for_ratio", "ssop_matrix"]
