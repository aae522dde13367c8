"""FedAP: every client trains bottleneck adapters (h ← h + W2·GeLU(W1·h), W2 = 0 at the start) after the
attention and feed-forward sublayers of each block, the base frozen and no LoRA; the server averages the
adapters weighted by example counts (FedAvg)."""
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.methods.fedavg.method import FedAvg
from fedlab.runtime.resident import get_resident
from fedlab.transforms import chain_to_wire, transform


class FedAP(FedAvg):
    def setup(self) -> None:
        self.chain = (transform("adapters", width=self.cfg.method.width, where="attn_ffn"),
                      transform("train_groups", groups=("adapters",)))
        self.global_state = {k: v.clone() for k, v in self.resident.init_state.items()}

    @property
    def resident(self):
        return get_resident(self.cfg, chain=self.chain)

    def _config(self) -> dict:
        return {"transform": chain_to_wire(self.chain)}

    def configure_fit(self, rnd, cids):
        return {cid: FitIns(rnd, self.global_state, self._config()) for cid in cids}

    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, self.global_state, {"tag": f"global/{rnd}", **self._config()}) for cid in cids}
