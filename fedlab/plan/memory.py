"""Training memory of one model, computed on the meta device (no weights, no data; a 7B model in a second).

    peak ≈ W + T·(4 + 4 + s_opt) + A + G

- W: the frozen weights, parameters × the dtype's bytes, and the buffers (rotary tables, position ids);
- T: the trainable parameters (LoRA, adapters), held in float32 (PEFT's default), with their gradient and the
  optimiser's state s_opt (AdamW: 8 bytes, SGD: 0);
- A: the tensors autograd saves for the backward pass, counted exactly: one forward of the real architecture on
  the meta device with `saved_tensors_hooks`, each storage once, parameters excluded. Two kernels are modelled as
  a GPU runs them: attention as a fused kernel (saves q, k, v, the output and the log-sum-exp, never the
  [s, s] scores: `fedlab_plan` attention) and every dropout as CUDA's fused dropout (a bool mask). With gradient
  checkpointing, A = each block's input + one block's activations (recomputed one block at a time) + what lies
  outside the blocks (embeddings, the head, the loss);
- G: the gradient of the logits, float32, alive when the backward pass starts (causal LMs).

Checked against measured peaks (tests/cli/test_plan.py): an H200's LoRA steps on LLaMA-2-7B (benchmarks/results) and
a pico model's saved tensors on the CPU."""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

ENCODERS = ("bert",)


class _FusedAttention(torch.autograd.Function):
    """What a fused attention kernel keeps for its backward pass: q, k, v, the output, the log-sum-exp."""

    @staticmethod
    def forward(ctx, q, k, v):
        out = torch.empty_like(q)
        ctx.save_for_backward(q, k, v, out, torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device))
        return out

    @staticmethod
    def backward(ctx, grad):   # never run: the plan makes no backward pass
        q, k, v, _, _ = ctx.saved_tensors
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)


class _FusedDropout(torch.autograd.Function):
    """CUDA's fused dropout keeps a bool mask (the CPU's composite keeps one in the input's dtype)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(torch.empty(x.shape, dtype=torch.bool, device=x.device))
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _DropoutAsOnGPU(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        return _FusedDropout.apply(x) if self.training and self.p > 0 else x


def _fused_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    return _FusedAttention.apply(query, key, value).transpose(1, 2).contiguous(), None


_REGISTERED = False


def _register() -> None:
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface

        AttentionInterface.register("fedlab_plan", _fused_attention)
        _REGISTERED = True


@dataclass
class Memory:
    parameters: int          # after the transforms (LoRA included)
    trainable: int
    weights_bytes: int       # W
    trainable_bytes: int     # T·(4 + 4 + s_opt)
    activation_bytes: int    # A
    logits_grad_bytes: int   # G
    fused_attention: bool    # False: this architecture's attention has no `fedlab_plan` path (scores counted)
    adapter_params: int = 0  # of the trainable ones, the bottleneck adapters' (kept on the party, never sent)

    @property
    def peak_bytes(self) -> int:
        return self.weights_bytes + self.trainable_bytes + self.activation_bytes + self.logits_grad_bytes


DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "fp32": torch.float32, "float32": torch.float32}
OPTIMIZER_STATE = {"adamw": 8, "adam": 8, "sgd": 0}


def set_blocks(config, blocks: int):
    """A copy of `config` with `blocks` transformer blocks (a compressed proxy / DPM, a split part)."""
    c = copy.deepcopy(config)
    c.num_hidden_layers = int(blocks)
    return c


def blocks_of(config) -> int:
    return int(config.num_hidden_layers)


def build_meta(config, dtype: torch.dtype):
    """The architecture on the meta device, with the fused-attention stand-in where the model supports it."""
    from transformers import AutoModel, AutoModelForCausalLM

    _register()
    cls = AutoModel if config.model_type in ENCODERS else AutoModelForCausalLM
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        try:
            model = cls.from_config(copy.deepcopy(config), dtype=dtype, attn_implementation="fedlab_plan")
            if getattr(model, "_supports_attention_backend", False):
                return model, True
        except (ValueError, TypeError, KeyError):
            pass
        return cls.from_config(copy.deepcopy(config), dtype=dtype), False   # its own attention code: scores counted


def with_lora(model, lora: dict | None, adapters: float | None = None):
    """LoRA as fedlab applies it (fedlab.transforms.lora.apply_lora) — after fedlab's bottleneck adapters of
    width `adapters`·d on every block when given (Co-PLMs' DPM) — trainable weights in float32; every
    train-mode dropout modelled as CUDA's fused one (a bool mask)."""
    if adapters:
        from fedlab.config import LoraConfig
        from fedlab.transforms.registry import Build, get_transform

        for p in model.parameters():
            p.requires_grad_(False)
        with torch.device("meta"):
            model = get_transform("adapters").fn(model, Build(lora=LoraConfig(), seed=0), adapters, "block")
    adapter_params = [p for n, p in model.named_parameters() if "fedlab_adapter" in n]
    if lora:
        from fedlab.transforms.lora import apply_lora

        task = None if model.config.model_type in ENCODERS else "CAUSAL_LM"
        model, _ = apply_lora(model, r=int(lora["r"]), alpha=float(lora.get("alpha", 2 * lora["r"])),
                              dropout=float(lora.get("dropout", 0.0)), target_modules=lora.get("target_modules"),
                              task_type=task)
    for p in adapter_params:              # peft froze the adapters with the base: they train too
        p.requires_grad_(True)
    for p in model.parameters():
        if p.requires_grad:
            p.data = torch.empty(p.shape, dtype=torch.float32, device="meta")
    for name, mod in list(model.named_modules()):
        if isinstance(mod, nn.Dropout) and mod.p > 0:
            parent, _, leaf = name.rpartition(".")
            (model.get_submodule(parent) if parent else model)._modules[leaf] = _DropoutAsOnGPU(mod.p)
    return model


def saved_bytes(model, batch: int, seq: int) -> int:
    """Bytes autograd keeps between one forward and its backward: each storage once, parameters excluded."""
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st._cdata not in params:
            seen[st._cdata] = st.nbytes()
        return t

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model.train()
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    pos = torch.arange(seq, device="meta").expand(batch, seq)
    kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with warnings.catch_warnings(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        warnings.simplefilter("ignore")
        if base.config.model_type in ENCODERS:
            out = model(**kw).last_hidden_state
            out.float().mean().requires_grad_()
        else:
            model(**kw, labels=ids, position_ids=pos)
    return sum(seen.values())


def training_memory(config, *, batch: int, seq: int, dtype: str = "bf16", lora: dict | None = None,
                    optimizer: str = "adamw", checkpointing: bool = False, adapters: float | None = None) -> Memory:
    """Memory of one training step of `config` (module docstring); `adapters`: Co-PLMs' bottleneck adapters
    of that width on every block, trained with the LoRA."""
    torch_dtype = DTYPES[dtype]
    model, fused = build_meta(config, torch_dtype)
    model = with_lora(model, lora, adapters)
    params = sum(p.numel() for p in model.parameters())
    width = torch.finfo(torch_dtype).bits // 8
    if lora is not None or adapters:   # frozen base in the dtype; LoRA/adapters in float32, gradient, optimiser state
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        weights = (params - trainable) * width
        states = trainable * (4 + 4 + OPTIMIZER_STATE[optimizer])
    else:                          # full fine-tuning: weights and gradients in the dtype, a float32 master copy
        trainable = params         # when the dtype is not float32, and the optimiser's state
        weights = params * width
        states = params * (width + (4 if width != 4 else 0) + OPTIMIZER_STATE[optimizer])
        for p in model.parameters():
            p.requires_grad_(True)
    weights += sum(b.numel() * b.element_size() for b in model.buffers())    # rotary tables, position ids
    full = saved_bytes(model, batch, seq)
    if checkpointing:
        layers = blocks_of(config)
        one = with_lora(build_meta(set_blocks(config, 1), torch_dtype)[0], lora, adapters)
        outside_plus_one = saved_bytes(one, batch, seq)
        per_block = (full - outside_plus_one) / max(1, layers - 1)
        hidden = getattr(config, "hidden_size", None) or config.n_embd
        act = int((full - layers * per_block) + per_block + layers * batch * seq * hidden * width)
    else:
        act = full
    vocab = 0 if config.model_type in ENCODERS else int(config.vocab_size)
    adapter_params = sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and "fedlab_adapter" in n)
    return Memory(params, trainable, int(weights), int(states), int(act), batch * seq * vocab * 4, fused, adapter_params)


def gib(n: float) -> str:
    """Bytes for people: GiB from 256 MiB up, MiB from 1 MiB, else KiB."""
    if n >= 2**28:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def devices_needed(peak: int, device_bytes: int) -> int:
    return max(1, math.ceil(peak / device_bytes))
