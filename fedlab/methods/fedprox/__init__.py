"""FedProx: FedAvg on the server; the client adds (μ/2)‖φ − φ^(t)‖² to its loss."""
from dataclasses import dataclass

from fedlab.config import check
from fedlab.methods.fedavg import FedAvg, FedAvgConfig
from fedlab.objectives.modules import Weighted
from fedlab.objectives.terms import ProximalTerm
from fedlab.runtime.client import LoraClient
from fedlab.transforms.lora import flatten_state


@dataclass(frozen=True)
class FedProxConfig(FedAvgConfig):
    name: str = "fedprox"
    mu: float = 0.01

    def validate(self, p):
        super().validate(p)
        check(self.mu >= 0, f"{p}.mu", self.mu, "a number >= 0")


class FedProxClient(LoraClient):
    def terms(self, ins, start):
        keys = self.resident.spec.communicated
        return [Weighted(1.0, ProximalTerm(keys, flatten_state(start, keys), self.cfg.method.mu))]


class FedProx(FedAvg):
    client_cls = FedProxClient
