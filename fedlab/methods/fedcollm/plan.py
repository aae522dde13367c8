"""The roles `fedlab plan` sizes for FedCoLLM: the server's LLM and each device's SLM."""
from __future__ import annotations

from fedlab.plan.roles import Role, lora_of


def roles(cfg) -> list[Role]:
    n, name, lora = cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    names = cfg.model.clients or [name] * n
    out = [Role("server LLM", name, 1, lora=lora, notes=["distils to and from the devices' SLMs on its data"])]
    for c in sorted(set(names[:n])):
        out.append(Role(f"device SLM {c}", c, sum(x == c for x in names[:n]), lora=lora,
                        up="its SLM's LoRA", down="its distilled LoRA"))
    return out
