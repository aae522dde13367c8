"""The client of FedProxy and its variants: LoRA on the proxy (or the Offsite-Tuning model) with PCR and
an optional proximal term; pooled training for the single-owner variants (OT, centralized proxy)."""
from __future__ import annotations

from fedlab.methods.client import PooledClient
from fedlab.objectives.modules import Weighted
from fedlab.objectives.terms import PCRTerm, ProximalTerm
from fedlab.transforms.lora import flatten_state, set_state


def block_keys(resident) -> set[str]:
    """The base-weight names of the model's blocks, as its `proxy` transform declared them."""
    return {k for group, keys in resident.keys.items() if group.startswith("block/") for k in keys}


class FedProxyClient(PooledClient):
    """LoRA on the proxy with PCR (λ > 0, conflict scores received beside φ^(t)) and optional FedProx.
    Block weights sent beside the state (FedBiOT's re-aligned emulator) replace the model's own first."""

    def fit(self, ins):
        blocks = {}
        if ins.aux:
            self.use_model(ins)
            declared = block_keys(self.resident)
            blocks = {k: v for k, v in ins.aux.items() if k in declared}
        if blocks:
            set_state(self.resident.model, blocks)
        return super().fit(ins)

    def terms(self, ins, start):
        m = self.cfg.method
        keys = self.resident.spec.communicated
        anchor = flatten_state(start, keys)
        out = []
        if m.pcr_lambda > 0 and ins.aux is not None and "conflict" in ins.aux:
            out.append(Weighted(m.pcr_lambda, PCRTerm(keys, anchor, ins.aux["conflict"], m.pcr_weighting)))
        if m.mu > 0:
            out.append(Weighted(1.0, ProximalTerm(keys, anchor, m.mu)))
        return out
