"""ZeroShot: the base model as is — no training, one evaluation."""
from fedlab.methods.base import FedMethod


class ZeroShot(FedMethod):
    trains = False
