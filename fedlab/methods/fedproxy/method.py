"""FedProxy (paper 000; its equations: fedlab/methods/fedproxy/README.md), read top to bottom:

setup      the server runs the LLM on public samples, measures block influence with hooks, keeps the
           L − floor(κL + 0.5) most influential blocks: the proxy SLM (clients build it from the LLM and
           `kept_layers`, so only the layer list travels after the initial model).
round t    clients receive φ^(t) and the conflict scores C (C^(0) = 0) and train the proxy's LoRA on
           L_task + λ Σ_d C_d (φ − φ^(t))² (PCR); the server forms τ_k = φ_k − φ^(t−1), computes
           S, h, w, C on the raw τ and merges with H-TIES (or FedAvg / TIES for the ablations).
finalize   the merged LoRA is folded into the proxy and its blocks are plugged back into the LLM (or the
           proxy-tuning logit offset is used); the fused LLM is evaluated on every client's tasks.
"""
from __future__ import annotations

import torch

from fedlab.aggregators import conflict_scores, fedavg, h_ties, server_analysis, ties
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.data.collate import PadCollator
from fedlab.device import resolve_device
from fedlab.eval.summary import summarize_eval
from fedlab.eval.tasks import evaluate_on_clients
from fedlab.methods.base import FedMethod, apply_delta, stack_deltas
from fedlab.runtime.resident import get_resident
from fedlab.transforms import chain_to_wire, transform
from fedlab.transforms.compress import make_proxy, measure_block_influence, select_blocks
from fedlab.transforms.fusion import ProxyTuned, merged_proxy, plug_in_fusion
from fedlab.transforms.lora import flatten_state, set_state


class FedProxy(FedMethod):
    table_columns = (("final", "llm_zeroshot/", "LLM zero-shot"), ("final", "llm/", "LLM after fusion"))
    headline = "llm/acc/mean"

    # ------------------------------------------------------------------ compression (README (FP-1), (FP-2))
    def setup(self) -> None:
        from fedlab.models.zoo import load_model

        self.llm, self.tokenizer = load_model(self.cfg.model.name, resolve_device(self.cfg.backend.device))
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.kept_layers, self.lora_positions = self.choose_layers()
        # the clients' model: the LLM keeping `kept_layers`, LoRA on `lora_positions` (None: every block)
        self.chain = (transform("proxy", kept_layers=self.kept_layers, lora_layers=self.lora_positions),)
        proxy = get_resident(self.cfg, chain=self.chain)
        self.global_state = {k: v.clone() for k, v in proxy.init_state.items()}
        self.conflict = torch.zeros(flatten_state(self.global_state).numel())
        self.round_stats: list[dict] = []

    def choose_layers(self) -> tuple[list[int], list[int] | None]:
        """(LLM blocks the proxy keeps, proxy positions that get LoRA — None: all)."""
        self.block_influence = measure_block_influence(self.llm, self._public_batches(self.cfg.method.bi_samples))
        return select_blocks(self.block_influence, self.cfg.method.kappa), None

    def plugin_positions(self) -> list[int] | None:
        """Proxy blocks plugged back into the LLM (None: all of them)."""
        return None

    def _public_batches(self, n: int, batch_size: int = 32):
        texts = [f"{e.prompt} {e.target}" for e in self.data.public[:n]]
        if not texts:  # no public set configured: the first training prompts stand in
            texts = [f"{e.prompt} {e.target}" for part in self.data.train for e in part][:n]
        device = next(self.llm.parameters()).device
        collate = PadCollator(self.tokenizer.pad_token_id)
        for i in range(0, len(texts), batch_size):
            ids = self.tokenizer(texts[i:i + batch_size], add_special_tokens=False)["input_ids"]
            ids = [x[: self.cfg.model.max_length] for x in ids]
            batch = collate([{"input_ids": x, "labels": x} for x in ids])
            yield {k: v.to(device) for k, v in batch.items()}

    @property
    def resident(self):
        return get_resident(self.cfg, chain=self.chain)

    # ------------------------------------------------------------------ rounds
    def _config(self) -> dict:
        return {"transform": chain_to_wire(self.chain)}

    def run_round(self, rnd, ctx):
        results = ctx.fit(self.configure_fit(rnd, ctx.sample()))
        ctx.log(self.aggregate_fit(rnd, results), prefix="server/")
        if results:
            self._log_round_plots(rnd, ctx)

    def configure_fit(self, rnd, cids):
        cfg = {**self._config(), **({"pooled": True} if self.cfg.method.pooled else {})}
        aux = {"conflict": self.conflict} if self.cfg.method.pcr_lambda > 0 else None
        targets = [0] if self.cfg.method.pooled else cids
        return {cid: FitIns(rnd, self.global_state, dict(cfg), aux) for cid in targets}

    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, self.global_state, {"tag": f"global/{rnd}", **self._config()}) for cid in cids}

    def aggregate_fit(self, rnd, results):
        if not results:
            return {}
        m = self.cfg.method
        cids, tau, counts = stack_deltas(results, self.global_state)
        if m.aggregator == "h_ties":
            delta, info = h_ties(tau, r0=m.r0, delta=m.delta, rho=m.rho, eps=m.eps, diagnostics=True,
                                 denominator=m.denominator)
        else:
            info = server_analysis(tau, r0=m.r0, delta=m.delta)   # logged for every aggregator
            delta = ties(tau, density=m.density, weights=counts) if m.aggregator == "ties" else fedavg(tau, counts)
        if m.eta_g != 1.0:             # η_g = 1 (the paper) applies Δ as it is, bit for bit
            delta = delta * m.eta_g
        self.global_state = apply_delta(self.global_state, delta)
        self.conflict = conflict_scores(tau)  # on the raw τ; broadcast with φ^(t) next round
        self.similarity = info["sim"]
        stats: dict = {"conflict_mean": float(self.conflict.mean()), "delta_norm": float(delta.norm()),
                       "delta_nonzero": float((delta != 0).float().mean())}
        for i, cid in enumerate(cids):
            stats[f"h_client_{cid}"] = float(info["h"][i])
            stats[f"w_client_{cid}"] = float(info["w"][i])
            stats[f"r_client_{cid}"] = float(info["retention"][i])
        return stats

    def _log_round_plots(self, rnd: int, ctx) -> None:
        from fedlab.plots import conflict_histogram, similarity_heatmap

        folder = ctx.out_dir / "plots"
        folder.mkdir(parents=True, exist_ok=True)
        heat = similarity_heatmap(self.similarity.numpy(), folder / f"similarity_round{rnd:03d}.png",
                                  f"round {rnd}: cosine of client updates")
        hist = conflict_histogram(self.conflict.numpy(), folder / f"conflict_round{rnd:03d}.png",
                                  f"round {rnd}: conflict scores")
        ctx.log_artifact(heat, "plots/similarity")
        ctx.log_artifact(hist, "plots/conflict")

    # ------------------------------------------------------------------ fusion (README (FP-14), (FP-15))
    def fused_llm(self):
        res = self.resident
        set_state(res.model, self.global_state)
        tuned = merged_proxy(res.model)
        if self.cfg.method.fusion == "proxy_tuning":
            untuned = make_proxy(self.llm, self.kept_layers)
            return ProxyTuned(self.llm, tuned, untuned)
        return plug_in_fusion(self.llm, tuned, self.kept_layers, self.plugin_positions())

    def finalize(self, ctx) -> dict:
        llm0 = summarize_eval(evaluate_on_clients(self.llm, self.tokenizer, self.data, self.cfg))
        fused = self.fused_llm()
        llm = summarize_eval(evaluate_on_clients(fused, self.tokenizer, self.data, self.cfg))
        out = {f"llm_zeroshot/{k}": v for k, v in llm0.items()}
        out.update({f"llm/{k}": v for k, v in llm.items()})
        out["proxy/kept_layers"] = len(self.kept_layers)
        ctx.tracker.set_tags({"fedproxy.kept_layers": ",".join(map(str, self.kept_layers)),
                              "fedproxy.block_influence": ",".join(f"{x:.4f}" for x in self.block_influence.tolist())})
        return out

    def export_parties(self) -> list:
        """The tuned proxy (its adapter over the proxy's blocks, written beside it) and the LLM after plug-in fusion
        (whole weights: the proxy's merged blocks in the LLM's kept layers). With proxy tuning the LLM's weights
        do not change — it combines logits with the tuned and untuned proxy — so only the proxy is written."""
        from types import SimpleNamespace

        from fedlab.export import Party

        parties = [Party("proxy", self.resident, self.global_state)]
        if self.cfg.method.fusion != "proxy_tuning":
            llm = SimpleNamespace(name=self.cfg.model.name, tokenizer=self.tokenizer)
            parties.append(Party("llm", llm, {}, model=self.fused_llm()))
        return parties

    def state_dict(self) -> dict:
        return {"global_state": self.global_state, "conflict": self.conflict}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = state["global_state"]
        self.conflict = state["conflict"]
