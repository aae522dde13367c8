"""The roles `fedlab plan` sizes for FedMKT (and LLM2SLM): the server's LLM and each client's SLM, top-K logits of
the public set each way."""
from __future__ import annotations

from fedlab.plan.roles import Role, lora_of, public_tokens


def roles(cfg) -> list[Role]:
    m, n, name, lora = cfg.method, cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    names = cfg.model.clients or [name] * n
    k = getattr(m, "topk", 16)
    knowledge = public_tokens(cfg) * k * 8          # top-K (index int32, value float32) per position
    out = [Role("server LLM", name, 1, lora=lora, up=f"top-{k} logits of the public set", down="", up_bytes=0,
                down_bytes=0, notes=["trains on the public set with the clients' knowledge"])]
    for i, c in enumerate(names[:n]):
        out.append(Role(f"client {i} SLM" if cfg.model.clients else "client SLM", c,
                        1 if cfg.model.clients else n, lora=lora, up=f"top-{k} logits of the public set",
                        down=f"top-{k} logits of the public set", up_bytes=knowledge, down_bytes=knowledge))
        if not cfg.model.clients:
            break
    return out
