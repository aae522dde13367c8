"""FedAvg: clients fine-tune LoRA from the global state; the server averages the updates weighted by
the clients' example counts."""
from dataclasses import dataclass

from fedlab.aggregators import fedavg
from fedlab.config import MethodConfig, check
from fedlab.methods.base import FedMethod, apply_delta, stack_deltas


@dataclass(frozen=True)
class FedAvgConfig(MethodConfig):
    name: str = "fedavg"
    weighting: str = "examples"      # examples | uniform

    def validate(self, p):
        check(self.weighting in ("examples", "uniform"), f"{p}.weighting", self.weighting,
              "'examples' or 'uniform'")


class FedAvg(FedMethod):
    def aggregate_fit(self, rnd, results):
        if not results:
            return {}
        cids, tau, counts = stack_deltas(results, self.global_state)
        weights = counts if self.cfg.method.weighting == "examples" else None
        self.global_state = apply_delta(self.global_state, fedavg(tau, weights))
        return {"update_norm": float(tau.norm(dim=1).mean())}
