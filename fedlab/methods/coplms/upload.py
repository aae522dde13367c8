"""Co-PLMs' upload against the SLM baselines' (fedlab/methods/coplms/README.md (CP-13)): the floats a device
sends per round — its DPM's LoRA — must be fewer than any device SLM's LoRA (what FedCoLLM and FedLoRA send),
or the communication claim (Fig. 3) is reversed by the configuration rather than the method. Counted on the
meta device from the architectures (no weights are loaded)."""
from __future__ import annotations

import warnings


def lora_floats(name: str, lora: dict, blocks: int | None = None) -> int:
    """LoRA parameters of model `name` (with `blocks` of its blocks kept, when given) under `lora`."""
    import torch

    from fedlab.models.architectures import architecture
    from fedlab.plan.memory import build_meta, set_blocks, with_lora

    config = architecture(name)
    if blocks is not None:
        config = set_blocks(config, blocks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = with_lora(build_meta(config, torch.float32)[0], lora)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def dpm_lora_settings(cfg) -> tuple[int, float]:
    """The DPM's LoRA rank (`method.dpm_lora_r`; null: model.lora.r) and α, scaled to keep model.lora's α/r."""
    lc = cfg.model.lora
    r = int(cfg.method.dpm_lora_r or lc.r)
    return r, lc.alpha * r / lc.r


def dpm_base(cfg) -> tuple[str, int | None]:
    """The DPM's base model and how many of its blocks it keeps (None: all of them): the LLM compressed by κ
    (`dpm_init: compress`), or the zoo model `method.dpm_init` names."""
    m = cfg.method
    if m.dpm_init != "compress":
        return m.dpm_init, None
    from fedlab.models.architectures import kept_blocks

    return cfg.model.name, kept_blocks(cfg.model.name, m.kappa)


def dpm_and_slm_floats(cfg) -> tuple[int, list[tuple[str, int]]]:
    """(the DPM's LoRA floats, [(each device SLM, its LoRA floats)])."""
    lc = cfg.model.lora
    slm_lora = {"r": lc.r, "alpha": lc.alpha, "target_modules": lc.target_modules}
    r, alpha = dpm_lora_settings(cfg)
    dpm_model, dpm_blocks = dpm_base(cfg)
    dpm = lora_floats(dpm_model, {**slm_lora, "r": r, "alpha": alpha}, dpm_blocks)
    slms = sorted(set(cfg.model.clients or [cfg.model.name]))
    return dpm, [(s, lora_floats(s, slm_lora)) for s in slms]


def check_upload(cfg) -> None:
    """A ConfigError (one line) when the DPM's LoRA is not smaller than every device SLM's."""
    from fedlab.config import ConfigError

    if not cfg.method.dpm_upload_check:
        return
    try:
        dpm, slms = dpm_and_slm_floats(cfg)
    except ValueError as e:      # an architecture the planner cannot size: said in one line, the run goes on
        from fedlab.runtime.context import log_line

        log_line(f"[fedlab] coplms: the DPM-upload check cannot size these models ({e}); Co-PLMs' upload is not "
                 "compared with the SLM baselines'")
        return
    name, smallest = min(slms, key=lambda x: x[1])
    if dpm >= smallest:
        raise ConfigError(
            f"method.dpm_lora_r: the DPM's LoRA uploads {dpm:,} floats a round, not fewer than {name}'s "
            f"{smallest:,} (an SLM baseline's upload), so Co-PLMs would send more than FedCoLLM / FedLoRA; lower "
            f"method.dpm_lora_r ({cfg.method.dpm_lora_r or cfg.model.lora.r}) or raise method.kappa, or set "
            "method.dpm_upload_check: false to run it anyway")
