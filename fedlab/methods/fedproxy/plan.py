"""The roles `fedlab plan` sizes for FedProxy: the LLM on the server (no training step), the clients' proxy."""
from __future__ import annotations

from fedlab.plan.roles import Role, kept_blocks, lora_of


def roles(cfg) -> list[Role]:
    m, n, name, lora = cfg.method, cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    kept = kept_blocks(name, m.kappa)
    return [Role("server LLM", name, 1, trains=False, notes=["block influence, H-TIES merge, plug-in fusion: no training step"]),
            Role("client proxy", name, n, blocks=kept, lora=lora, up="LoRA of the proxy", down="LoRA of the proxy")]
