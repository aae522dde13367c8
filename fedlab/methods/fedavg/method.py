"""FedAvg: clients fine-tune LoRA from the global state; the server averages the updates weighted by
the clients' example counts — or, for untrusted clients, combines them with a robust aggregator
(coordinate-wise median, trimmed mean, Krum)."""
from fedlab.aggregators import coordinate_median, fedavg, krum, trimmed_mean
from fedlab.methods.base import FedMethod, apply_delta, stack_deltas


class FedAvg(FedMethod):
    evaluation_beside = True       # the global state, scored by every client as sent (eval.overlap)

    def aggregate_fit(self, rnd, results):
        if not results:
            return {}
        cids, tau, counts = stack_deltas(results, self.global_state)
        m = self.cfg.method
        agg = getattr(m, "aggregator", "mean")
        if agg == "median":
            delta = coordinate_median(tau)
        elif agg == "trimmed_mean":
            delta = trimmed_mean(tau, m.trim)
        elif agg == "krum":
            delta = krum(tau, f=m.krum_f, m=min(m.krum_m, len(cids)))
        else:
            delta = fedavg(tau, counts if m.weighting == "examples" else None)
        self.global_state = apply_delta(self.global_state, delta)
        return {"update_norm": float(tau.norm(dim=1).mean()), "delta_norm": float(delta.norm())}
