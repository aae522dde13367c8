"""Centralized (CentSFT): LoRA on the pooled data of all clients, evaluated on every client's tasks."""
from fedlab.comm.messages import FitIns
from fedlab.methods.base import FedMethod


class Centralized(FedMethod):
    def configure_fit(self, rnd, cids):
        # one trainer, hosted by client 0's worker, sees the union of all partitions
        config = {"pooled": True, **({"include_public": True} if self.cfg.method.include_public else {})}
        return {0: FitIns(rnd, self.global_state, config)}

    def aggregate_fit(self, rnd, results):
        if 0 in results:
            self.global_state = results[0].state
        return {}
