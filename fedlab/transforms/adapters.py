"""Bottleneck adapters on a model's blocks (fedlab/methods/coplms/README.md (CP-3),
fedlab/methods/fedap/README.md (AP-1)): h ← h + W2·GeLU(W1·h + b1) + b2, W1: d → ⌈width·d⌉, W2 and b2
zero-initialised so the adapted model starts as the base model. Co-PLMs' domain adapters sit on each block's
output; FedAP's bottleneck adapters after each block's attention and feed-forward sublayers. Added by forward
hooks, so no parameter of the model is renamed."""
from __future__ import annotations

import math

import torch
from torch import nn

from fedlab.transforms.compress import decoder_blocks
from fedlab.transforms.registry import register_transform

ATTENTION = ("self_attn", "attn", "self_attention", "attention")
FEED_FORWARD = ("mlp", "feed_forward", "ffn", "fc2")


class Adapter(nn.Module):
    """x ↦ x + W2·GeLU(W1·x + b1) + b2, with W2, b2 = 0 at initialisation."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.down = nn.Linear(dim, hidden)
        self.up = nn.Linear(hidden, dim)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        return x + self.up(nn.functional.gelu(self.down(x)))


def _hook(module: nn.Module, args, output):
    adapter = module.fedlab_adapter
    if isinstance(output, tuple):
        return (adapter(output[0]), *output[1:])
    return adapter(output)


def _attach(module: nn.Module, dim: int, hidden: int) -> Adapter:
    module.fedlab_adapter = Adapter(dim, hidden).to(next(module.parameters()).dtype)
    module.register_forward_hook(_hook)
    return module.fedlab_adapter


def _child(block: nn.Module, names: tuple[str, ...], what: str) -> nn.Module:
    for n in names:
        if isinstance(getattr(block, n, None), nn.Module):
            return getattr(block, n)
    raise ValueError(f"model transform 'adapters': no {what} module ({', '.join(names)}) in "
                     f"{type(block).__name__}; use where='block'")


@register_transform("adapters", params=("width", "where"))
def adapters_transform(model, build, width=0.25, where="block"):
    """Bottleneck adapters of hidden size ⌈width·d⌉ on every block's output (`where="block"`, Co-PLMs'
    domain adapters) or after its attention and feed-forward sublayers (`where="attn_ffn"`, FedAP), seeded
    by the chain's seed. Declares the parameter group `adapters`."""
    if where not in ("block", "attn_ffn"):
        raise ValueError(f"model transform 'adapters': where={where!r} is not allowed; allowed: block, attn_ffn")
    if not 0 < width <= 4:
        raise ValueError(f"model transform 'adapters': width={width!r} is not allowed; expected a fraction of "
                         "the hidden size in (0, 4]")
    dim = model.config.hidden_size
    hidden = max(1, math.ceil(width * dim))
    made = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(build.seed)
        for block in decoder_blocks(model):
            if where == "block":
                made.append(_attach(block, dim, hidden))
            else:
                made.append(_attach(_child(block, ATTENTION, "attention"), dim, hidden))
                made.append(_attach(_child(block, FEED_FORWARD, "feed-forward"), dim, hidden))
    build.groups["adapters"] = [p for a in made for p in a.parameters()]
    build.kept_initial.add("adapters")   # clients sharing the resident each start from the initial adapters
    return model


@register_transform("train_groups", params=("groups",), ends_chain=True)
def train_groups_transform(model, build, groups=("adapters",)):
    """Ends a chain without LoRA: the base is frozen and the parameters of the declared `groups` (e.g. the
    bottleneck adapters of FedAP) are the trainable and communicated ones."""
    from fedlab.transforms.lora import AdapterSpec
    from fedlab.transforms.registry import declared_keys

    missing = [g for g in groups if g not in build.groups]
    if missing:
        raise ValueError(f"model transform 'train_groups': no parameter group {missing[0]!r} declared by the "
                         f"transforms before it; declared: {', '.join(sorted(build.groups)) or 'none'}")
    chosen = {id(p) for g in groups for p in build.groups[g]}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    keys = tuple(k for g in groups for k in declared_keys(model, {g: build.groups[g]})[g])
    build.spec = AdapterSpec(trainable=keys, communicated=keys)
    return model
