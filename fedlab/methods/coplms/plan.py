"""The roles `fedlab plan` sizes for Co-PLMs: the server's LLM and DPM, and on each device its DPM and its SLM."""
from __future__ import annotations

from fedlab.plan.roles import Role, lora_of


def roles(cfg) -> list[Role]:
    from fedlab.methods.coplms.upload import dpm_base, dpm_lora_settings

    m, n, name, lora = cfg.method, cfg.data.num_clients, cfg.model.name, lora_of(cfg)
    names = cfg.model.clients or [name] * n
    # the DPM: the LLM compressed by κ (or a zoo model), its LoRA at dpm_lora_r (α/r kept), DST adapters
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
