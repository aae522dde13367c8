"""Config of `fedprox` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import METHOD_NAME_HELP, check, doc


@dataclass(frozen=True)
class FedProxConfig(FedAvgConfig):
    name: str = doc("fedprox", METHOD_NAME_HELP)
    mu: float = doc(0.01, "μ of FedProx's proximal term (μ/2)·‖φ − φ^(t)‖² on the client's LoRA, φ^(t) the round's "
                          "global state (0: FedAvg)")

    def validate(self, p):
        super().validate(p)
        check(self.mu >= 0, f"{p}.mu", self.mu, "a number >= 0")
