"""The routed mixture folded into the weights (`fedlab.methods.floe.merged`): the same logits as the unmerged
rank-M·r LoRA mixture, the base weights restored exactly, the LoRA switch giving the base model's logits — on
a Llama (Linear) and a GPT-2 (Conv1D, fan_in_fan_out) pico model."""
from __future__ import annotations

import pytest
import torch

from fedlab.config import ConfigError, load_config


def _mixture_model(name: str, m: int = 3, r: int = 2):
    from fedlab.methods.floe.router import mixture_state
    from fedlab.models.zoo import load_model
    from fedlab.transforms.lora import apply_lora, get_state, lora_rank_axes

    single, _ = apply_lora(load_model(name)[0], r=r, alpha=2.0 * r, dropout=0.0)
    keys = list(lora_rank_axes(single))
    g = torch.Generator().manual_seed(0)
    centres = [{k: 0.3 * torch.randn(v.shape, generator=g) for k, v in get_state(single, keys).items()} for _ in range(m)]
    mixed, _ = apply_lora(load_model(name)[0], r=m * r, alpha=2.0 * m * r, dropout=0.0)
    return mixed.eval(), centres, lora_rank_axes(single), mixture_state


@pytest.mark.parametrize("name", ["pico-llama", "pico-gpt2"])
def test_merged_mixture_matches_the_unmerged_lora_and_restores_the_base(pico_zoo, name):
    from fedlab.methods.floe.merged import MergedMixture, lora_off
    from fedlab.transforms import set_state

    model, centres, axes, mixture_state = _mixture_model(name)
    x = torch.tensor([[1, 5, 9, 2, 7, 3]])
    w = torch.tensor([0.2, 0.5, 0.3])
    base_weights = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    with torch.no_grad():
        with model.disable_adapter():
            base = model(input_ids=x).logits
        with lora_off(model):                                 # the cheap switch gives the base model
            assert torch.equal(model(input_ids=x).logits, base)
        set_state(model, mixture_state(centres, w, axes))
        unmerged = model(input_ids=x).logits
        assert not torch.allclose(unmerged, base, atol=1e-3)  # the mixture does change the logits
        merger = MergedMixture(model, centres)
        merger.merge(w)
        merged = model(input_ids=x).logits
        assert torch.allclose(merged, unmerged, atol=1e-5, rtol=1e-5)
        merger.merge(torch.tensor([1.0, 0.0, 0.0]))         # a second prompt's gate replaces the first's
        set_state(model, mixture_state(centres, [1.0, 0.0, 0.0], axes))
        merger.unmerge()
        only_first = model(input_ids=x).logits
        merger.merge(torch.tensor([1.0, 0.0, 0.0]))
        assert torch.allclose(model(input_ids=x).logits, only_first, atol=1e-5, rtol=1e-5)
        merger.unmerge()
        merger.unmerge()                                      # twice is a no-op
    for n, p in model.named_parameters():
        if n in base_weights:
            assert torch.equal(p, base_weights[n]), n
    assert all(not layer.disable_adapters for layer in model.fedlab_lora_layers)


def test_merged_mixture_rejects_a_gate_of_the_wrong_length(pico_zoo):
    from fedlab.methods.floe.merged import MergedMixture

    model, centres, _, _ = _mixture_model("pico-llama")
    with pytest.raises(ValueError, match="3 experts, 2 weights"):
        MergedMixture(model, centres).merge([0.5, 0.5])
    with pytest.raises(ValueError, match="expert pool is empty"):
        MergedMixture(model, [])


def test_router_merge_with_proxy_tuning_is_one_clear_error():
    with pytest.raises(ConfigError, match="method.router_merge"):
        load_config(None, ["method.name=floe", "method.router_merge=true", "method.combine=proxy",
                           "method.llm=pico-llama"])
    load_config(None, ["method.name=floe", "method.combine=proxy", "method.llm=pico-llama"])   # null: unmerged


def test_router_merge_null_merges_only_with_fusion_and_within_the_memory_budget(pico_zoo):
    from fedlab.methods.floe.inference import merge_routed
    from fedlab.methods.floe.merged import MergedMixture

    model, centres, _, _ = _mixture_model("pico-llama")
    need = MergedMixture.nbytes(model, len(centres))
    held = MergedMixture(model, centres).layers          # what the merger really keeps: a base copy and M deltas
    assert need == sum(base.numel() * base.element_size() + d.numel() * d.element_size() for _, base, d in held)
    assert merge_routed(None, "fusion", model, len(centres), need / 2 ** 20)
    assert not merge_routed(None, "fusion", model, len(centres), need / 2 ** 20 * 0.99)
    assert not merge_routed(None, "proxy", model, len(centres), 1e9)
    assert merge_routed(True, "fusion", model, len(centres), 0) and not merge_routed(False, "fusion", model, 3, 1e9)
