"""FedAvg: clients fine-tune LoRA from the global state; the server averages the updates weighted by
the clients' example counts."""
from fedlab.aggregators import fedavg
from fedlab.methods.base import FedMethod, apply_delta, stack_deltas


class FedAvg(FedMethod):
    def aggregate_fit(self, rnd, results):
        if not results:
            return {}
        cids, tau, counts = stack_deltas(results, self.global_state)
        weights = counts if self.cfg.method.weighting == "examples" else None
        self.global_state = apply_delta(self.global_state, fedavg(tau, weights))
        return {"update_norm": float(tau.norm(dim=1).mean())}
