"""Who holds which model in a run of a config: the roles `fedlab plan` sizes.

A role is one kind of party (the server's LLM, the clients' proxy, one client's SLM, an edge): the model it
holds (an architecture and how many of its blocks), whether it trains and with LoRA, how many parties hold it,
and what one party sends and receives per round. A method declares its roles on its config
(`MethodConfig.plan_roles`, usually in its package's plan.py); one that declares none is planned in the default
shape, LoRA clients of `model.name` and a server that averages their adapters, and its plan says so."""
from __future__ import annotations

import json
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


def lora_of(cfg) -> dict:
    """The run's LoRA settings as a role carries them."""
    lc = cfg.model.lora
    return {"r": lc.r, "alpha": lc.alpha, "dropout": lc.dropout, "target_modules": lc.target_modules}


def public_tokens(cfg) -> int:
    """Tokens of the public set (an upper bound on the positions whose top-K logits travel)."""
    d = cfg.data
    per_task = d.public_count()
    tasks = 1 if d.public_source == "instructions" else len(d.hf_tasks() or d.tasks)
    return per_task * tasks * cfg.model.max_length


DEFAULT_NOTE = "the default shape: this method declares no roles of its own (`plan_roles` on its config)"


def roles(cfg) -> list[Role]:
    """The roles of a run: those its method's config declares (`MethodConfig.plan_roles`), else the default shape,
    LoRA clients of `model.name` and a server that aggregates."""
    declared = cfg.method.plan_roles(cfg)
    if declared is not None:
        return declared
    name, n = cfg.model.name, cfg.data.num_clients
    return [Role("server", name, 1, trains=False, notes=["aggregates the LoRA states; evaluates", DEFAULT_NOTE]),
            Role("client", name, n, lora=lora_of(cfg), up="LoRA state", down="LoRA state")]


def role_json(r: Role) -> str:
    return json.dumps(r.__dict__, default=str)
