"""ZeroShot: the base model as is — no training, one evaluation."""
from dataclasses import dataclass

from fedlab.config import MethodConfig
from fedlab.methods.base import FedMethod


@dataclass(frozen=True)
class ZeroShotConfig(MethodConfig):
    name: str = "zeroshot"


class ZeroShot(FedMethod):
    trains = False
