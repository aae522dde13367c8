"""FedProxy compression (paper Eqs. 1 and 4; fedlab/methods/fedproxy/README.md (FP-1), (FP-2)): block
influence from decoder-block inputs/outputs captured with forward hooks, block selection, and the proxy SLM
that keeps the selected blocks."""
from __future__ import annotations

import copy as _copy
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlab.transforms.registry import register_transform


def block_influence(hiddens: Sequence[Tensor], mask: Tensor | None = None) -> Tensor:
    """FedProxy Eq. 4: BI_i = 1 − mean over unmasked tokens of cos(X_i, X_{i+1}), for L+1 hidden states
    (input of block 0 … output of block L−1), each [B, S, D]."""
    if len(hiddens) < 2:
        raise ValueError(f"block_influence needs L+1 >= 2 hidden states, got {len(hiddens)}")
    shape = hiddens[0].shape
    if any(h.shape != shape for h in hiddens):
        raise ValueError("all hidden states must share one [B, S, D] shape")
    w = (torch.ones(shape[:2], device=hiddens[0].device) if mask is None else mask.to(hiddens[0].device)).float()
    total = w.sum()
    if total <= 0:
        raise ValueError("mask selects no token")
    stacked = torch.stack([h.float() for h in hiddens])          # [L+1, B, S, D]
    cos = F.cosine_similarity(stacked[:-1], stacked[1:], dim=-1, eps=1e-8)  # [L, B, S]
    return 1.0 - (cos * w).sum(dim=(1, 2)) / total


def n_dropped(num_blocks: int, kappa: float) -> int:
    """n = floor(κ·L + 0.5) blocks removed."""
    return int(math.floor(kappa * num_blocks + 0.5))


def select_blocks(bi: Tensor, kappa: float) -> list[int]:
    """Drop the n = floor(κL + 0.5) blocks with the lowest BI (ties: the lower index is kept, so the higher
    index is dropped first); return the kept indices ascending."""
    num = int(bi.numel())
    if not 0.0 <= kappa < 1.0:
        raise ValueError(f"kappa: {kappa!r} is not allowed; expected a fraction of blocks in [0, 1)")
    n = n_dropped(num, kappa)
    if n >= num:
        raise ValueError(f"kappa: {kappa!r} would remove all {num} blocks; expected kappa < "
                         f"{(num - 0.5) / num:.3f} for {num} blocks")
    values = bi.detach().float().cpu().tolist()
    order = sorted(range(num), key=lambda i: (values[i], -i))   # lowest BI first; on ties the higher index
    dropped = set(order[:n])
    return [i for i in range(num) if i not in dropped]


def decoder_blocks(model) -> torch.nn.ModuleList:
    """The decoder-block list of a causal LM (LLaMA/Qwen2/Mistral `model.layers`, GPT-2 `h`, OPT
    `decoder.layers`, Bloom `h`)."""
    base = getattr(model, "base_model", model)
    base = getattr(base, "model", base) if not hasattr(base, "layers") else base
    for path in ("layers", "h", "decoder.layers", "model.layers", "transformer.h"):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.ModuleList):
            return obj
    raise ValueError(f"no decoder-block list found in {type(model).__name__}")


@torch.no_grad()
def measure_block_influence(model, batches) -> Tensor:
    """Run `model` over batches (dicts with input_ids, attention_mask) and return BI per block, with the
    blocks' inputs and outputs captured by forward hooks (not output_hidden_states, whose last entry
    comes after the final norm). Accumulates the token-weighted mean over all batches."""
    blocks = decoder_blocks(model)
    sums = torch.zeros(len(blocks))
    count = 0.0
    for batch in batches:
        captured: list[Tensor | None] = [None] * (len(blocks) + 1)
        handles = []

        def hook(i, captured=captured):
            def fn(module, args, kwargs, output):
                x = args[0] if args else kwargs.get("hidden_states")
                if i == 0:
                    captured[0] = x.detach()
                out = output[0] if isinstance(output, (tuple, list)) else output
                captured[i + 1] = out.detach()
            return fn

        for i, blk in enumerate(blocks):
            handles.append(blk.register_forward_hook(hook(i), with_kwargs=True))
        try:
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        finally:
            for h in handles:
                h.remove()
        mask = batch["attention_mask"].float()
        n = float(mask.sum())
        sums += block_influence(captured, mask).cpu() * n
        count += n
    return sums / max(count, 1.0)


def make_proxy(model, kept_layers: list[int], copy: bool = True):
    """`model` (a copy unless copy=False) keeping the embeddings, final norm, LM head and the blocks in
    `kept_layers` (indices into the original), with `kept_layers` recorded on its config."""
    proxy = _copy.deepcopy(model) if copy else model
    blocks = decoder_blocks(proxy)
    kept = torch.nn.ModuleList([blocks[i] for i in kept_layers])
    for new_idx, blk in enumerate(kept):  # attention modules index their KV cache by layer
        for mod in blk.modules():
            if hasattr(mod, "layer_idx"):
                mod.layer_idx = new_idx
    blocks_parent, attr = _parent_of(proxy, blocks)
    setattr(blocks_parent, attr, kept)
    cfg = proxy.config = _copy.deepcopy(proxy.config)
    for key in ("num_hidden_layers", "n_layer"):
        if hasattr(cfg, key):
            setattr(cfg, key, len(kept_layers))
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in kept_layers]
    cfg.kept_layers = list(kept_layers)
    return proxy


@register_transform("proxy", params=("kept_layers", "lora_layers"))
def proxy_transform(model, build, kept_layers, lora_layers=None):
    """The model keeping only the blocks `kept_layers` (FedProxy's proxy, fedlab/methods/fedproxy/README.md
    (FP-2); Offsite-Tuning's adapters + emulator, (FP-18)), built in place; LoRA goes on the proxy positions
    `lora_layers` (None: all). Declares one parameter group per kept block, `block/<position>`."""
    proxy = make_proxy(model, list(kept_layers), copy=False)
    for pos, blk in enumerate(decoder_blocks(proxy)):
        build.groups[f"block/{pos}"] = list(blk.parameters())
    if lora_layers is not None:
        build.lora_layers = tuple(lora_layers)
    return proxy


def _parent_of(model, target):
    for module in model.modules():
        for name, child in module.named_children():
            if child is target:
                return module, name
    raise ValueError("block list not found in model")
