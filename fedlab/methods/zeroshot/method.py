"""ZeroShot: the base model as is — no training, one evaluation."""
from fedlab.comm.messages import EvalIns
from fedlab.methods.base import FedMethod


class ZeroShot(FedMethod):
    trains = False

    def configure_evaluate(self, rnd, cids):
        # no state: every client scores its own base model (LoRA B = 0), also when clients run other
        # models than model.name (model.clients)
        return {cid: EvalIns(rnd, None, {"tag": f"zeroshot/{rnd}"}) for cid in cids}

    def final_adapters(self):
        return None
