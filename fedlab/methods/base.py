"""The server side of a method: what each client receives (`configure_fit`), how uploads combine
(`aggregate_fit`), what is evaluated (`configure_evaluate`), and its checkpointable state."""
from __future__ import annotations

import torch

from fedlab.comm.messages import EvalIns, FitIns, FitRes
from fedlab.runtime.client import LoraClient
from fedlab.runtime.resident import get_resident
from fedlab.transforms.lora import flatten_state, unflatten_like


class FedMethod:
    client_cls = LoraClient
    trains = True              # False: only the zero-shot evaluation runs

    def __init__(self, cfg, data):
        self.cfg, self.data = cfg, data
        self.global_state: dict | None = None
        self.tracker = None      # set by run_federation: methods may log their own artifacts
        self.out_dir = None

    @property
    def resident(self):
        return get_resident(self.cfg)

    def setup(self) -> None:
        self.global_state = {k: v.clone() for k, v in self.resident.init_state.items()}

    def fit_config(self, rnd: int, cid: int) -> dict:
        return {}

    def configure_fit(self, rnd: int, cids: list[int]) -> dict[int, FitIns]:
        return {cid: FitIns(rnd, self.global_state, self.fit_config(rnd, cid)) for cid in cids}

    def aggregate_fit(self, rnd: int, results: dict[int, FitRes]) -> dict:
        return {}

    def configure_evaluate(self, rnd: int, cids: list[int]) -> dict[int, EvalIns]:
        return {cid: EvalIns(rnd, self.global_state, {"tag": f"global/{rnd}"}) for cid in cids}

    def check_upload(self, res: FitRes) -> str | None:
        """Why an upload cannot be aggregated (None: it can). The default compares an uploaded state with
        the global state's keys and shapes."""
        ref = self.global_state
        if res.state is None or ref is None:
            return None
        if any(self.cfg.model.client_model(c) != self.cfg.model.name for c in range(self.data.num_clients)):
            return None   # clients run other models than the global state's: no shared reference
        missing, extra = sorted(set(ref) - set(res.state)), sorted(set(res.state) - set(ref))
        if missing or extra:
            return f"wrong keys (missing {missing[:2]}{'…' if len(missing) > 2 else ''}, unexpected {extra[:2]})"
        for k, v in res.state.items():
            if tuple(v.shape) != tuple(ref[k].shape):
                return f"wrong shape for {k}: {tuple(v.shape)}, expected {tuple(ref[k].shape)}"
        return None

    def next_phase(self, rnd: int, phase: int, results: dict[int, FitRes]) -> dict[int, FitIns] | None:
        """Instructions for a further exchange within round `rnd` after phase `phase` was aggregated
        (e.g. FedMKT's server→client distillation); None ends the round."""
        return None

    def aggregate_phase(self, rnd: int, phase: int, results: dict[int, FitRes]) -> dict:
        """Aggregates the answers of phase `phase` ≥ 1 of a round."""
        return {}

    def evaluate_server(self, rnd: int) -> dict:
        """Metrics of a server-side model (e.g. FedMKT's LLM) at an evaluation round, logged beside the
        clients' metrics; {} for methods without one."""
        return {}

    def finalize(self, backend) -> dict:
        return {}

    def state_dict(self) -> dict:
        return {"global_state": self.global_state}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = state["global_state"]

    def final_adapters(self) -> dict | None:
        return self.global_state


def stack_deltas(results: dict[int, FitRes], base: dict) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """(client ids, τ[K, P] = φ_k − φ in the base's key order, example counts[K])."""
    cids = sorted(results)
    keys = list(base)
    ref = flatten_state(base, keys)
    tau = torch.stack([flatten_state(results[c].state, keys) - ref for c in cids]) if cids else ref[None, :0]
    counts = torch.tensor([float(results[c].num_examples) for c in cids])
    return cids, tau, counts


def apply_delta(base: dict, delta: torch.Tensor) -> dict:
    return unflatten_like(flatten_state(base) + delta, base)
