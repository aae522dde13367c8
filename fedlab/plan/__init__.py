"""`fedlab plan CONFIG`: will it fit, and on how many GPUs — before anything is downloaded or run.

For each role of the config's method (`roles.py`: the server's LLM, the clients' proxy or SLMs, an edge) the
model is built on the meta device from its architecture (the zoo's config.json, or the papers' models shipped as
architecture files), with the role's blocks and LoRA, and sized: parameters, trainable parameters, bytes up and
down per round for one party, and the peak memory of one training step at the config's batch and sequence length
(`memory.py`). A role that does not fit one device needs several (`devices`); clients that fit several to a device
can share it (`backend.gpus_per_worker`)."""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

from fedlab.objectives.server_devices import check_server_devices, check_server_method, server_fits
from fedlab.plan.memory import DTYPES, blocks_of, build_meta, devices_needed, gib, set_blocks, training_memory
from fedlab.plan.roles import Role, architecture, roles


@dataclass
class RolePlan:
    role: str
    model: str
    count: int
    blocks: str
    parameters: int
    trainable: int
    up_bytes: int
    down_bytes: int
    up: str
    down: str
    peak_bytes: int | None          # None: the role does not train
    weights_bytes: int
    activation_bytes: int | None
    devices: int                    # devices one party needs at this device size
    per_device: int                 # parties one device holds (0: a party needs several)
    fused_attention: bool
    notes: list[str]


def plan(cfg, *, dtype: str = "fp32", checkpointing: bool = False, device_gib: float = 80.0,
         optimizer: str = "adamw") -> list[RolePlan]:
    """The plan of `cfg` (module docstring). `dtype`: the weights' precision (fedlab loads float32 today;
    bf16 is what a GPU run at paper scale would use)."""
    with warnings.catch_warnings():      # transformers' deprecation notices about its own checkpointing flags
        warnings.simplefilter("ignore")
        return _plan(cfg, dtype, checkpointing, device_gib, optimizer)


def _plan(cfg, dtype: str, checkpointing: bool, device_gib: float, optimizer: str) -> list[RolePlan]:
    check_server_method(cfg)                 # what a run would refuse, the plan refuses too
    check_server_devices(cfg, gpus=False)
    batch, seq = cfg.federation.batch_size, cfg.model.max_length
    cap = int(device_gib * 2**30)
    out = []
    for r in roles(cfg):
        config = architecture(r.model)
        total = blocks_of(config)
        if r.blocks is not None:
            config = set_blocks(config, max(1, r.blocks))
        # a server's fit data-parallel over backend.server_devices: each device holds the model and B/W of a batch
        # (only the server LLM: Co-PLMs' server DPM also runs DST, a one-device fit at the full batch)
        w = cfg.backend.server_devices if r.trains and r.name == "server LLM" and server_fits(cfg.method.name) else 1
        notes = list(r.notes)
        if w > 1:
            notes.append(f"data-parallel over backend.server_devices = {w}: {batch // w} of each batch of {batch} "
                         "per device, the peak is one device's")
        if r.trains:
            mem = training_memory(config, batch=batch // w, seq=seq, dtype=dtype, lora=r.lora, optimizer=optimizer,
                                  checkpointing=checkpointing, adapters=r.adapters)
            params, weights, peak, act, trainable, fused = (mem.parameters, mem.weights_bytes, mem.peak_bytes,
                                                            mem.activation_bytes, mem.trainable, mem.fused_attention)
            # what a party sends of its model: the LoRA state (float32), never its adapters
            lora_bytes = (mem.trainable - mem.adapter_params) * 4 if r.lora else 0
        else:                      # holds the weights (inference, merging): no training step
            model, fused = build_meta(config, DTYPES[dtype])
            params = sum(p.numel() for p in model.parameters())
            weights, peak, act, trainable, lora_bytes = params * (DTYPES[dtype].itemsize), None, None, 0, 0
        need = peak if peak is not None else weights
        out.append(RolePlan(
            role=r.name, model=r.model, count=r.count,
            blocks=f"{r.blocks} of {total}" if r.blocks is not None else f"{total}",
            parameters=params, trainable=trainable,
            up_bytes=r.up_bytes if r.up_bytes is not None else (lora_bytes if r.up else 0),
            down_bytes=r.down_bytes if r.down_bytes is not None else (lora_bytes if r.down else 0),
            up=r.up, down=r.down, peak_bytes=peak, weights_bytes=weights, activation_bytes=act,
            devices=w * devices_needed(need, cap), per_device=cap // need if need <= cap and w == 1 else 0,
            fused_attention=fused, notes=notes))
    return out


def render(cfg, plans: list[RolePlan], *, dtype: str, checkpointing: bool, device_gib: float) -> str:
    w = cfg.backend.server_devices
    head = (f"plan of {cfg.method.name} on {cfg.model.name}: batch {cfg.federation.batch_size} × sequence "
            f"{cfg.model.max_length}, {dtype} weights, AdamW, gradient checkpointing {'on' if checkpointing else 'off'}, "
            f"{device_gib:g} GiB devices" + (f", server fits over {w} devices" if w > 1 else ""))
    rows = [["role", "model", "×", "blocks", "parameters", "trainable", "up / round", "down / round", "peak (train)",
             "devices", "per device"]]
    for p in plans:
        rows.append([p.role, p.model, str(p.count), p.blocks, f"{p.parameters:,}", f"{p.trainable:,}",
                     gib(p.up_bytes) if p.up_bytes else "-", gib(p.down_bytes) if p.down_bytes else "-",
                     gib(p.peak_bytes) if p.peak_bytes is not None else f"{gib(p.weights_bytes)} (weights)",
                     str(p.devices), str(p.per_device) if p.per_device else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head, ""] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    clients = [p for p in plans if p.count > 1 and p.peak_bytes is not None]
    if clients:
        c = max(clients, key=lambda p: p.peak_bytes)
        if c.per_device >= 1:
            lines.append(f"\nbackend.gpus_per_worker = {1 / min(c.per_device, 8):.3g} packs {min(c.per_device, 8)} "
                         f"{c.role} parties on one {device_gib:g} GiB device")
    for p in plans:
        need = p.peak_bytes if p.peak_bytes is not None else p.weights_bytes
        if need > int(device_gib * 2**30):
            if p.peak_bytes is None:
                how = "its weights alone: bf16 weights, or sharding, which fedlab does not run"
            elif p.role == "server LLM" and server_fits(cfg.method.name):
                how = "backend.server_devices = N splits each batch over N devices"
            else:
                how = "gradient checkpointing, bf16 weights or a smaller batch"
            lines.append(f"{p.role}: {gib(need)} does not fit one {device_gib:g} GiB device ({how})")
    for p in plans:
        for n in p.notes:
            lines.append(f"{p.role}: {n}")
        if not p.fused_attention and p.peak_bytes is not None:
            lines.append(f"{p.role}: this architecture's attention is counted with its [s, s] scores (no fused kernel modelled)")
    lines.append("\nmemory: weights + float32 LoRA, gradients and AdamW state + the tensors autograd saves (counted on "
                 "the meta device, attention and dropout as fused GPU kernels) + the logits' gradient; measured "
                 "peaks of LoRA steps on an H200 came within 1 % without and 6 % with gradient checkpointing "
                 "(tests/cli/test_plan.py allows 3 % / 8 %)")
    return "\n".join(lines)


def as_dicts(plans: list[RolePlan]) -> list[dict]:
    return [asdict(p) for p in plans]


__all__ = ["plan", "render", "as_dicts", "Role", "architecture"]
