"""FedProxy fusion (fedlab/methods/fedproxy/README.md (FP-14), (FP-15)): plug-in fusion of the tuned proxy
into the LLM (paper Eq. 3) and the proxy-tuning logit variant (paper Appendix C.2)."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import torch
from torch import nn

from fedlab.transforms.compress import decoder_blocks


def merged_proxy(peft_proxy) -> nn.Module:
    """A plain copy of a LoRA-wrapped proxy with W ← W + (α/r)·BA merged in (the resident is untouched)."""
    return copy.deepcopy(peft_proxy).merge_and_unload()


@torch.no_grad()
def plug_in_fusion(llm: nn.Module, proxy: nn.Module, kept_layers: list[int],
                   positions: list[int] | None = None) -> nn.Module:
    """FedProxy Eq. 3: a copy of the LLM whose block kept_layers[i] is overwritten by proxy block i; the
    dropped blocks keep the LLM's weights. Same architecture, zero extra inference cost. `positions`
    limits the plug-in to some proxy blocks (Offsite-Tuning plugs in its adapters only)."""
    fused = copy.deepcopy(llm)
    dst, src = decoder_blocks(fused), decoder_blocks(proxy)
    if len(src) != len(kept_layers):
        raise ValueError(f"proxy has {len(src)} blocks but kept_layers names {len(kept_layers)}")
    for i in (range(len(kept_layers)) if positions is None else positions):
        dst[kept_layers[i]].load_state_dict(src[i].state_dict())
    return fused


class ProxyTuned(nn.Module):
    """Proxy tuning: logits = LLM(x) + proxy_tuned(x) − proxy_untuned(x); no weights change. The LLM is moved
    to the tuned proxy's device (a scorer sends the inputs to the device of this module's first parameter,
    the LLM's: on a GPU run the LLM loaded on the CPU would otherwise get them and the proxy would not)."""
    key_value_cache = False   # three models behind one forward: scorers run whole sequences through it

    def __init__(self, llm: nn.Module, tuned: nn.Module, untuned: nn.Module):
        super().__init__()
        device = next(tuned.parameters()).device
        self.llm, self.tuned, self.untuned = llm.to(device), tuned, untuned

    def forward(self, input_ids, attention_mask=None, **kwargs):
        kw = dict(input_ids=input_ids, attention_mask=attention_mask)
        logits = self.llm(**kw).logits + self.tuned(**kw).logits - self.untuned(**kw).logits
        return SimpleNamespace(logits=logits)
