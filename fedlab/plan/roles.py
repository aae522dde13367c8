"""Who holds which model in a run of a config: the roles `fedlab plan` sizes (issue 32).

A role is one kind of party (the server's LLM, the clients' proxy, one client's SLM, an edge): the model it
holds (an architecture and how many of its blocks), whether it trains and with LoRA, how many parties hold it,
and what one party sends and receives per round. The five systems and the LoRA-exchange baselines have their
roles here; any other method is planned as LoRA clients of `model.name` (FedAvg's shape)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

# the model-name resolution lives with the architecture files (fedlab.methods imports it too); re-exported here
from fedlab.models.architectures import HUB_ARCHITECTURES, architecture, kept_blocks  # noqa: F401


@dataclass
class Role:
    name: str                      # "server LLM", "client proxy", "client 2 SLM", "edge"
    model: str
    count: int = 1                 # parties holding it
    blocks: int | None = None      # None: every block; else a compressed / split model with this many
    trains: bool = True
    lora: dict | None = None
    up: str = ""                   # what one party sends per round ("lora": its LoRA state; or a note)
    down: str = ""
    up_bytes: int | None = None    # known sizes (else from the LoRA state)
    down_bytes: int | None = None
    notes: list[str] = field(default_factory=list)
    adapters: float | None = None  # Co-PLMs' bottleneck adapters (width · d) on every block, trained with the LoRA


def _lora(cfg) -> dict:
    lc = cfg.model.lora
    return {"r": lc.r, "alpha": lc.alpha, "dropout": lc.dropout, "target_modules": lc.target_modules}


def _public_tokens(cfg) -> int:
    """Tokens of the public set (an upper bound on the positions whose top-K logits travel)."""
    d = cfg.data
    per_task = d.public_count()
    tasks = 1 if d.public_source == "instructions" else len(d.hf_tasks() or d.tasks)
    return per_task * tasks * cfg.model.max_length


def roles(cfg) -> list[Role]:
    m, n = cfg.method, cfg.data.num_clients
    name, lora = cfg.model.name, _lora(cfg)
    method = m.name
    if method == "fedproxy":
        kept = kept_blocks(name, m.kappa)
        return [Role("server LLM", name, 1, trains=False, notes=["block influence, H-TIES merge, plug-in fusion: no training step"]),
                Role("client proxy", name, n, blocks=kept, lora=lora, up="LoRA of the proxy", down="LoRA of the proxy")]
    names = cfg.model.clients or [name] * n
    if method.startswith("coplms"):
        # the DPM: the LLM compressed by κ (or a zoo model), its LoRA at dpm_lora_r (α/r kept), DST adapters
        from fedlab.methods.coplms.upload import dpm_base, dpm_lora_settings

        r_dpm, alpha_dpm = dpm_lora_settings(cfg)
        dpm_lora = {**lora, "r": r_dpm, "alpha": alpha_dpm}
        dpm_model, dpm_blocks = dpm_base(cfg)
        width = m.adapter_width if m.dst else None
        out = [Role("server LLM", name, 1, lora=lora, notes=["server SAML with the server's DPM on its data"]),
               Role("server DPM", dpm_model, 1, blocks=dpm_blocks, lora=dpm_lora, adapters=width,
                    notes=["the server's own adapters (DST on its data), never sent"])]
        for c in sorted(set(names[:n])):
            count = sum(x == c for x in names[:n])
            out.append(Role(f"device DPM (beside {c})", dpm_model, count, blocks=dpm_blocks, lora=dpm_lora,
                            adapters=width, up="the DPM's LoRA", down="the DPM's LoRA",
                            notes=["each device holds its DPM and its SLM and trains both (DST, SAML): its "
                                   "peak is about the sum of the two rows"]))
            out.append(Role(f"device SLM {c}", c, count, lora=lora, notes=["its LoRA never leaves the device"]))
        return out
    if method == "fedcollm":
        out = [Role("server LLM", name, 1, lora=lora, notes=["distils to and from the devices' SLMs on its data"])]
        for c in sorted(set(names[:n])):
            out.append(Role(f"device SLM {c}", c, sum(x == c for x in names[:n]), lora=lora,
                            up="its SLM's LoRA", down="its distilled LoRA"))
        return out
    if method in ("fedmkt", "llm2slm"):
        k = getattr(m, "topk", 16)
        knowledge = _public_tokens(cfg) * k * 8          # top-K (index int32, value float32) per position
        out = [Role("server LLM", name, 1, lora=lora, up=f"top-{k} logits of the public set", down="", up_bytes=0,
                    down_bytes=0, notes=["trains on the public set with the clients' knowledge"])]
        for i, c in enumerate(names[:n]):
            out.append(Role(f"client {i} SLM" if cfg.model.clients else "client SLM", c,
                            1 if cfg.model.clients else n, lora=lora, up=f"top-{k} logits of the public set",
                            down=f"top-{k} logits of the public set", up_bytes=knowledge, down_bytes=knowledge))
            if not cfg.model.clients:
                break
        return out
    if method.startswith("floe") or method in ("llm_fedmoe",):
        ranks = list(getattr(m, "ranks", [lora["r"]]))
        out = [Role(f"device SLM (r = {r})", name, 0, lora={**lora, "r": r}, up="LoRA at its rank", down="LoRA at its rank")
               for r in (min(ranks), max(ranks))]
        out[0].count = out[1].count = n
        out[0].notes.append("the smallest rank a device class may get")
        out[1].notes.append("the largest rank")
        if getattr(m, "llm", None):
            out.append(Role("cloud LLM", m.llm, 1, trains=False, notes=["inference only: fused with the routed SLM"]))
        return out
    if method == "elsa":
        from fedlab.methods.elsa.chains import default_split

        # the method's split: method.split, else its default rule on the architecture's block count
        front, middle, back = (tuple(int(x) for x in m.split) if m.split is not None
                               else default_split(int(architecture(name).num_hidden_layers)))
        edges = getattr(m, "num_edges", 1)
        return [Role("client (front + back blocks, head)", name, n, blocks=front + back, lora=lora,
                     up="LoRA of its blocks + sketched activations each step", down="LoRA of its blocks",
                     notes=["activations travel every step: see `link/` metrics"]),
                Role("edge (middle blocks, one copy per member)", name, edges, blocks=middle, lora=lora,
                     notes=[f"{math.ceil(n / max(1, edges))} members per edge, each its own θ₂ⁿ"])]
    return [Role("server", name, 1, trains=False, notes=["aggregates the LoRA states; evaluates"]),
            Role("client", name, n, lora=lora, up="LoRA state", down="LoRA state")]


def role_json(r: Role) -> str:
    return json.dumps(r.__dict__, default=str)
