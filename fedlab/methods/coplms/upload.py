"""Co-PLMs' upload against the SLM baselines' (SPEC §5, issue 31): the floats a device sends per round — its
DPM's LoRA — must be fewer than any device SLM's LoRA (what FedCoLLM and FedLoRA send), or the communication
claim (Fig. 3) is reversed by the configuration rather than the method. Counted on the meta device from the
architectures (no weights are loaded)."""
from __future__ import annotations

import warnings


def lora_floats(name: str, lora: dict, blocks: int | None = None) -> int:
    """LoRA parameters of model `name` (with `blocks` of its blocks kept, when given) under `lora`."""
    import torch

    from fedlab.plan.memory import build_meta, set_blocks, with_lora
    from fedlab.plan.roles import architecture

    config = architecture(name)
    if blocks is not None:
        config = set_blocks(config, blocks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = with_lora(build_meta(config, torch.float32)[0], lora)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def dpm_and_slm_floats(cfg) -> tuple[int, list[tuple[str, int]]]:
    """(the DPM's LoRA floats, [(each device SLM, its LoRA floats)])."""
    from fedlab.plan.roles import architecture
    from fedlab.transforms.compress import n_dropped

    m, lc = cfg.method, cfg.model.lora
    slm_lora = {"r": lc.r, "alpha": lc.alpha, "target_modules": lc.target_modules}
    dpm_lora = {**slm_lora, "r": m.dpm_lora_r or lc.r}
    if m.dpm_init == "compress":
        total = int(architecture(cfg.model.name).num_hidden_layers)
        dpm = lora_floats(cfg.model.name, dpm_lora, total - n_dropped(total, m.kappa))
    else:
        dpm = lora_floats(m.dpm_init, dpm_lora)
    slms = sorted(set(cfg.model.clients or [cfg.model.name]))
    return dpm, [(s, lora_floats(s, slm_lora)) for s in slms]


def check_upload(cfg) -> None:
    """A ConfigError (one line) when the DPM's LoRA is not smaller than every device SLM's."""
    from fedlab.config import ConfigError

    if not cfg.method.dpm_upload_check:
        return
    try:
        dpm, slms = dpm_and_slm_floats(cfg)
    except ValueError:      # an architecture the planner cannot size: nothing to compare
        return
    name, smallest = min(slms, key=lambda x: x[1])
    if dpm >= smallest:
        raise ConfigError(
            f"method.dpm_lora_r: the DPM's LoRA uploads {dpm:,} floats a round, not fewer than {name}'s "
            f"{smallest:,} (an SLM baseline's upload), so Co-PLMs would send more than FedCoLLM / FedLoRA; lower "
            f"method.dpm_lora_r ({cfg.method.dpm_lora_r or cfg.model.lora.r}) or raise method.kappa, or set "
            "method.dpm_upload_check: false to run it anyway")
