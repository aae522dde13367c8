"""Standalone: each client fine-tunes its own LoRA on its own data; nothing is aggregated."""
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.methods.base import FedMethod


class Standalone(FedMethod):
    def configure_fit(self, rnd, cids):
        # state None: every client continues from its own adapter (the shared seeded init on round 1)
        return {cid: FitIns(rnd, None, {}) for cid in cids}

    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, None, {}) for cid in cids}

    def final_adapters(self):
        return None

    def export_parties(self) -> list:
        """Each client's own model: nothing is shared, so there is no global one."""
        return self.client_parties("client_")
