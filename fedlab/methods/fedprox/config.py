"""Config of `fedprox` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import check


@dataclass(frozen=True)
class FedProxConfig(FedAvgConfig):
    name: str = "fedprox"
    mu: float = 0.01

    def validate(self, p):
        super().validate(p)
        check(self.mu >= 0, f"{p}.mu", self.mu, "a number >= 0")
