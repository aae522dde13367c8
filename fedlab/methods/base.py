"""The server side of a method. A method owns its round: `run_round(rnd, ctx)` reads top to bottom — what
each client receives, `ctx.fit(...)` (the only door to clients), kernels over the uploads, any server-side
training. The default round is the synchronous FedAvg-shaped one, written with three hooks
(`configure_fit` → `ctx.fit` → `aggregate_fit`) that most methods fill in instead of writing a round.

Lifecycle, driven by `fedlab.runtime.federation.run_federation`:
    setup()                      build server-side state (every start, resume included)
    evaluate(0, ctx)             zero-shot
    begin(ctx)                   once before round 1 (not on resume: what it learns belongs in state_dict)
    run_round(t, ctx)            t = 1..rounds, then evaluate(t, ctx) on evaluation rounds; checkpoint;
                                 should_stop(t) ends the run early
    finalize(ctx)                metrics of the end (e.g. a fused model)
"""
from __future__ import annotations

import torch

from fedlab.comm.messages import EvalIns, FitIns, FitRes
from fedlab.eval.summary import summarize_eval
from fedlab.runtime.resident import get_resident
from fedlab.transforms.lora import flatten_state, unflatten_like


class FedMethod:
    trains = True              # False: only the zero-shot evaluation runs
    # client metrics also logged per client (`<metric>_client_<id>`) beside their mean over clients
    per_client_metrics: tuple[str, ...] = ("loss/task", "time/fit")
    # what the progress line of each round shows: label -> metric
    progress_metrics: dict[str, str] = {"acc": "acc/mean", "task-loss": "loss/task"}
    # extra columns of the end-of-run table for server-side models: (round "first" | "final", prefix, header)
    table_columns: tuple[tuple[str, str, str], ...] = ()
    headline = "acc/mean"      # the metric a sweep ranks runs by
    # True: the method's evaluation is `FedMethod.evaluate` of the states its instructions carry and nothing a fit
    # does changes what a score reads, so `eval.overlap` may score it in a second process (fedlab/runtime/overlap.py)
    evaluation_beside = False

    def __init__(self, cfg, data):
        self.cfg, self.data = cfg, data
        self.global_state: dict | None = None

    @property
    def resident(self):
        return get_resident(self.cfg)

    # ------------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        self.global_state = {k: v.clone() for k, v in self.resident.init_state.items()}

    def begin(self, ctx) -> None:
        """Work with the clients before round 1 (warm-up, grouping, …); nothing by default."""

    def run_round(self, rnd: int, ctx) -> None:
        """The synchronous round: instructions to this round's sample, aggregation of the usable answers."""
        results = ctx.fit(self.configure_fit(rnd, ctx.sample()))
        ctx.log(self.aggregate_fit(rnd, results), prefix="server/")

    def evaluate(self, rnd: int, ctx) -> dict:
        """Metrics of an evaluation round: every client scores the model `configure_evaluate` names."""
        return summarize_eval(ctx.evaluate(self.configure_evaluate(rnd, ctx.clients)))

    def should_stop(self, rnd: int) -> bool:
        """True ends the run after round `rnd` (e.g. a convergence rule); checked after every round."""
        return False

    def finalize(self, ctx) -> dict:
        return {}

    # ------------------------------------------------------------------ hooks of the default round
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

    # ------------------------------------------------------------------ checkpoints and outputs
    def state_dict(self) -> dict:
        return {"global_state": self.global_state}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = state["global_state"]

    def final_adapters(self) -> dict | None:
        return self.global_state

    def export_parties(self) -> list:
        """The trained models `fedlab export` writes (`fedlab.export.Party`): by default the global model, its
        final adapters on `model.name`; a method with other parties (a server LLM beside its clients' SLMs, a
        proxy and a fused LLM) names each."""
        from fedlab.export import Party
        from fedlab.models.zoo import is_encoder

        state = self.final_adapters()
        if not state or is_encoder(self.cfg.model.name):     # an encoder's own parts: the method names them
            return []
        from peft import PeftModelForCausalLM

        from fedlab.transforms.lora import has_fedlab_adapters

        res = self.resident
        names = {n for n, _ in res.model.named_parameters()}
        # a causal LM with LoRA whose parameters the final adapters are; a method whose adapters live on another
        # model, or an encoder with a head of fedlab's, names its own parties
        fits = (isinstance(res.model, PeftModelForCausalLM) or has_fedlab_adapters(res.model)) and set(state) <= names
        return [Party("model", res, state)] if fits else []

    def client_parties(self, prefix: str = "client_") -> list:
        """Each client's own trained model (its latest state, as the run's last checkpoint holds it: the
        `client_states` fedlab.export sets) on its own base model, as a party named `<prefix><id>`."""
        from fedlab.export import Party
        from fedlab.runtime.resident import get_resident

        states = getattr(self, "client_states", None) or {}
        return [Party(f"{prefix}{c}", get_resident(self.cfg, self.cfg.model.client_model(c)), states[c])
                for c in sorted(states) if states[c]]


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
