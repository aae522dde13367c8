"""FedProx's client: LoRA with the proximal term (μ/2)‖φ − φ^(t)‖² around the received state."""
from fedlab.methods.client import LoraClient
from fedlab.objectives.modules import Weighted
from fedlab.objectives.terms import ProximalTerm
from fedlab.transforms.lora import flatten_state


class FedProxClient(LoraClient):
    def terms(self, ins, start):
        keys = self.resident.spec.communicated
        return [Weighted(1.0, ProximalTerm(keys, flatten_state(start, keys), self.cfg.method.mu))]
