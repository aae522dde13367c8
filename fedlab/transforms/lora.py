"""LoRA through peft. `apply_lora` returns the wrapped model and an `AdapterSpec` that declares, in one
canonical order (the model's parameter order), the trainable and the communicated parameter names; the
rest of fedlab selects tensors by these lists only, never by substrings of names."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import get_peft_model
from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULT_TARGETS

from fedlab.transforms.registry import register_transform


@dataclass(frozen=True)
class AdapterSpec:
    trainable: tuple[str, ...]
    communicated: tuple[str, ...]

    def shapes(self, model: torch.nn.Module) -> dict[str, torch.Size]:
        params = dict(model.named_parameters())
        return {k: params[k].shape for k in self.communicated}


# LoRA never wraps fedlab's own modules (the domain and bottleneck adapters of transforms/adapters.py): with
# target_modules [all-linear] their Linear layers would otherwise get LoRA factors, trained and uploaded
NOT_LORA = r".*fedlab_adapter.*"


def has_fedlab_adapters(model: torch.nn.Module) -> bool:
    return any("fedlab_adapter" in name for name, _ in model.named_modules())


def lora_targets(model: torch.nn.Module, target_modules: list[str] | None) -> list[str] | str:
    """The modules LoRA wraps: the listed ones; ["all-linear"]: every linear layer but the output head (PEFT's
    architecture-independent choice); None: PEFT's default attention projections for the model type."""
    if target_modules and list(target_modules) == ["all-linear"]:
        return "all-linear"
    if target_modules:
        return list(target_modules)
    kind = getattr(model.config, "model_type", None)
    if kind not in DEFAULT_TARGETS:
        raise ValueError(f"model.lora.target_modules: no default LoRA targets for model type {kind!r}; "
                         "set them explicitly (e.g. [q_proj, v_proj])")
    return list(DEFAULT_TARGETS[kind])


def apply_lora(model: torch.nn.Module, r: int, alpha: float, dropout: float,
               target_modules: list[str] | None = None, seed: int = 0, layers: list[int] | None = None,
               task_type: str | None = "CAUSAL_LM"):
    """Wrap `model` with one LoRA adapter (A random with a seeded init, B = 0) and freeze the base;
    `layers` restricts LoRA to those blocks (None: all); `task_type` None wraps any module (PEFT's plain
    PeftModel, e.g. an encoder with fedlab's own head). Returns (peft_model, AdapterSpec) where
    every LoRA A/B matrix is trainable and communicated."""
    cfg = PeftLoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                         target_modules=lora_targets(model, target_modules), task_type=task_type,
                         layers_to_transform=list(layers) if layers is not None else None,
                         exclude_modules=NOT_LORA if has_fedlab_adapters(model) else None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        pm = get_peft_model(model, cfg)
    names = tuple(n for n, p in pm.named_parameters() if p.requires_grad)
    return pm, AdapterSpec(trainable=names, communicated=names)


@register_transform("lora", params=("r", "alpha", "dropout", "target_modules", "layers"))
def lora_transform(model, build, r=None, alpha=None, dropout=None, target_modules=None, layers=None):
    """LoRA on the model (every chain ends with one): unset parameters come from the config's `model.lora`,
    `layers` from what the transforms before it declared. Declares the trainable and communicated keys."""
    lc = build.lora
    targets = list(target_modules) if target_modules is not None else lc.target_modules
    layers = layers if layers is not None else build.lora_layers
    pm, build.spec = apply_lora(model, r or lc.r, alpha or lc.alpha, lc.dropout if dropout is None else dropout,
                                targets, seed=build.seed, layers=layers)
    return pm


def get_state(model: torch.nn.Module, keys: tuple[str, ...] | list[str]) -> dict[str, torch.Tensor]:
    """Detached CPU copies of the named parameters, in `keys` order."""
    params = dict(model.named_parameters())
    return {k: params[k].detach().to("cpu", copy=True) for k in keys}


@torch.no_grad()
def set_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    for k, v in state.items():
        if k not in params:
            raise KeyError(f"parameter {k!r} is not in the model")
        params[k].copy_(v.to(params[k].device, params[k].dtype))


def flatten_state(state: dict[str, torch.Tensor], keys=None) -> torch.Tensor:
    keys = list(keys) if keys is not None else list(state)
    return torch.cat([state[k].reshape(-1).float() for k in keys]) if keys else torch.zeros(0)


def unflatten_like(vec: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out, i = {}, 0
    for k, v in like.items():
        n = v.numel()
        out[k] = vec[i:i + n].view_as(v).to(v.dtype).clone()
        i += n
    if i != vec.numel():
        raise ValueError(f"vector of {vec.numel()} entries does not fit a state of {i} entries")
    return out


def lora_rank_axes(model: torch.nn.Module) -> dict[str, int]:
    """{parameter name: its rank axis} for every LoRA factor of a peft model, found by module type (a peft
    `LoraLayer`'s `lora_A` weights are [r, in]: axis 0; its `lora_B` weights are [out, r]: axis 1)."""
    from peft.tuners.lora import LoraLayer

    names = {id(p): n for n, p in model.named_parameters()}
    axes = {}
    for module in model.modules():
        if isinstance(module, LoraLayer):
            for a in module.lora_A.values():
                axes[names[id(a.weight)]] = 0
            for b in module.lora_B.values():
                axes[names[id(b.weight)]] = 1
    return axes
