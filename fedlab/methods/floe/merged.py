"""The routed mixture folded into the SLM's weights, one prompt at a time (`method.router_merge`: null merges
when the mixture is fused with the LLM (`combine: fusion`) and the deltas fit `router_merge_max_mb`, true
always, false never).

For every LoRA layer ℓ and expert j, ΔW_ℓj = s · B_ℓj A_ℓj is computed once (when the expert pool is
fixed). A prompt with gate ω then costs one matrix–vector product per layer,

    W_ℓ ← W_ℓ,0 + Σ_j ω_j ΔW_ℓj        (`MergedMixture.merge`; undone by copying W_ℓ,0 back)

and every generated token a plain forward of the base architecture with the LoRA layers switched off. This
replaces PEFT's merge_adapter on the rank-M·r mixture, whose merge and unmerge each cost a product with
inner dimension M·r ≥ the hidden size at Floe's ranks (benchmarks/floe_inference.py measures both).

Memory: M dense deltas per adapted weight (M × the adapted weights' size), held on the model's device."""
from __future__ import annotations

from contextlib import contextmanager

import torch


def lora_layers(model) -> list:
    """The model's PEFT LoRA layers (found once, kept on the model)."""
    layers = getattr(model, "fedlab_lora_layers", None)
    if layers is None:
        from peft.tuners.lora import LoraLayer

        layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
        model.fedlab_lora_layers = layers
    return layers


def set_lora_enabled(model, enabled: bool) -> None:
    """Switch every LoRA layer's contribution on or off for inference. This sets the layers' own
    `_disable_adapters` flag (what PEFT's `enable_adapters` sets, without re-setting requires_grad on every
    adapter weight, which costs 10× more per call); tests/methods/test_floe_merged.py checks the off switch gives the
    base model's logits, so a PEFT change that moves the flag fails there."""
    for m in lora_layers(model):
        m._disable_adapters = not enabled


@contextmanager
def lora_off(model):
    """Within: the base model's forward (LoRA layers skipped); after: each layer's flag as it was."""
    layers = lora_layers(model)
    before = [m._disable_adapters for m in layers]
    set_lora_enabled(model, False)
    try:
        yield model
    finally:
        for m, b in zip(layers, before):
            m._disable_adapters = b


class MergedMixture:
    """The experts' dense weight deltas of one PEFT LoRA model, and the base weights they are added to."""

    @staticmethod
    def nbytes(model, experts: int) -> int:
        """Bytes the deltas of `experts` experts take on `model` (plus one copy of the base weights)."""
        from peft.tuners.lora import LoraLayer

        total = 0
        for module in model.modules():
            if isinstance(module, LoraLayer):
                w = module.get_base_layer().weight
                total += w.numel() * w.element_size() * (experts + 1) * len(module.lora_A)
        return total

    def __init__(self, model, centres: list[dict]):
        from peft.tuners.lora import LoraLayer

        if not centres:
            raise ValueError("MergedMixture: the expert pool is empty")
        self.model, self.layers, self.merged = model, [], False
        for name, module in model.named_modules():
            if not isinstance(module, LoraLayer):
                continue
            weight = module.get_base_layer().weight
            for adapter in module.lora_A:
                a_key, b_key = f"{name}.lora_A.{adapter}.weight", f"{name}.lora_B.{adapter}.weight"
                missing = [k for k in (a_key, b_key) if k not in centres[0]]
                if missing:
                    raise KeyError(f"MergedMixture: the experts' states lack {missing}")
                s = module.scaling[adapter]
                deltas = [s * (c[b_key].float() @ c[a_key].float()) for c in centres]      # [out, in] each
                if getattr(module, "fan_in_fan_out", False):                             # GPT-2's Conv1D: [in, out]
                    deltas = [d.T for d in deltas]
                d = torch.stack([x.reshape(-1) for x in deltas]).to(weight.device, weight.dtype)
                self.layers.append((weight, weight.detach().clone(), d))

    @torch.no_grad()
    def merge(self, weights) -> None:
        """W ← W_0 + Σ_j ω_j ΔW_j in every adapted layer, LoRA layers off (their output is in W now)."""
        for weight, base, d in self.layers:
            w = torch.as_tensor(weights, dtype=d.dtype, device=d.device)
            if w.numel() != d.shape[0]:
                raise ValueError(f"MergedMixture.merge: {d.shape[0]} experts, {w.numel()} weights")
            torch.addmv(base.reshape(-1), d.T, w, out=weight.view(-1))
        set_lora_enabled(self.model, False)
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """The base weights back, LoRA layers on (no-op when nothing is merged)."""
        if not self.merged:
            return
        for weight, base, _ in self.layers:
            weight.copy_(base)
        set_lora_enabled(self.model, True)
        self.merged = False
