"""The roles `fedlab plan` sizes for ELSA: the clients (front and back blocks, the head) and the edges (the
middle blocks, one copy per member)."""
from __future__ import annotations

import math

from fedlab.plan.roles import Role, architecture, lora_of


def roles(cfg) -> list[Role]:
    from fedlab.methods.elsa.chains import default_split

    m, n, name, lora = cfg.method, cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    # the method's split: method.split, else its default rule on the architecture's block count
    front, middle, back = (tuple(int(x) for x in m.split) if m.split is not None
                           else default_split(int(architecture(name).num_hidden_layers)))
    edges = getattr(m, "num_edges", 1)
    return [Role("client (front + back blocks, head)", name, n, blocks=front + back, lora=lora,
                 up="LoRA of its blocks + sketched activations each step", down="LoRA of its blocks",
                 notes=["activations travel every step: see `link/` metrics"]),
            Role("edge (middle blocks, one copy per member)", name, edges, blocks=middle, lora=lora,
                 notes=[f"{math.ceil(n / max(1, edges))} members per edge, each its own θ₂ⁿ"])]
