"""The roles `fedlab plan` sizes for Floe and its variants: the devices' SLM at the smallest and the largest rank
a device may get, and the cloud LLM (inference only)."""
from __future__ import annotations

from fedlab.plan.roles import Role, lora_of


def roles(cfg) -> list[Role]:
    m, n, name, lora = cfg.method, cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    ranks = list(getattr(m, "ranks", [lora["r"]]))
    out = [Role(f"device SLM (r = {r})", name, 0, lora={**lora, "r": r}, up="LoRA at its rank", down="LoRA at its rank")
           for r in (min(ranks), max(ranks))]
    out[0].count = out[1].count = n
    out[0].notes.append("the smallest rank a device class may get")
    out[1].notes.append("the largest rank")
    if getattr(m, "llm", None):
        out.append(Role("cloud LLM", m.llm, 1, trains=False, notes=["inference only: fused with the routed SLM"]))
    return out
