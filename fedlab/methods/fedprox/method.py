"""FedProx: FedAvg on the server; the client adds (μ/2)‖φ − φ^(t)‖² to its loss."""
from fedlab.methods.fedavg.method import FedAvg
from fedlab.objectives.modules import Weighted
from fedlab.objectives.terms import ProximalTerm
from fedlab.runtime.client import LoraClient
from fedlab.transforms.lora import flatten_state


class FedProxClient(LoraClient):
    def terms(self, ins, start):
        keys = self.resident.spec.communicated
        return [Weighted(1.0, ProximalTerm(keys, flatten_state(start, keys), self.cfg.method.mu))]


class FedProx(FedAvg):
    client_cls = FedProxClient
