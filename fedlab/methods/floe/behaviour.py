"""Behaviour embeddings of LoRA updates (Floe's clustering).

E_i = concat[ ĥ_i , û_i ] with
    h_i[t] = mean over task t's public probes and their tokens of the final hidden state with client i's LoRA
             minus the same without it (the base model)          — the behaviour part, [T·D]
    u_i    = the flattened update (its LoRA factors padded to r_max) minus the state it started from
and ·̂ the L2 normalisation of each part, so that behaviour and parameters weigh the same."""
from __future__ import annotations

import torch

from fedlab.data.collate import PadCollator, TokenizedExamples
from fedlab.transforms import set_state


def probe_sets(public, per_task: int) -> dict[str, list]:
    """The first `per_task` public examples of each task, in the public set's order."""
    out: dict[str, list] = {}
    for e in public:
        bucket = out.setdefault(e.task, [])
        if len(bucket) < per_task:
            bucket.append(e)
    return out


@torch.no_grad()
def mean_hidden(model, tokenizer, probes: dict[str, list], max_length: int, batch_size: int = 32) -> torch.Tensor:
    """[T, D]: per task, the mean final hidden state over its probes' tokens (padding excluded)."""
    collate = PadCollator(tokenizer.pad_token_id)
    device = next(model.parameters()).device
    rows = []
    for task in sorted(probes):
        ds = TokenizedExamples(tokenizer, probes[task], max_length)
        total, count = None, 0.0
        for s in range(0, len(ds), batch_size):
            batch = collate([ds[i] for i in range(s, min(len(ds), s + batch_size))])
            mask = batch["attention_mask"].to(device)
            out = model(input_ids=batch["input_ids"].to(device), attention_mask=mask, output_hidden_states=True)
            h = out.hidden_states[-1].float() * mask.unsqueeze(-1)
            part = h.sum(dim=(0, 1))
            total = part if total is None else total + part
            count += float(mask.sum())
        rows.append((total / max(count, 1.0)).cpu())
    return torch.stack(rows)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm().clamp_min(1e-12)


def behaviour_embedding(model, tokenizer, probes, max_length: int, state: dict, start: dict,
                        base_hidden: torch.Tensor) -> torch.Tensor:
    """E_i of the module docstring for one client's (padded) state, computed on `model` (the r_max resident)."""
    set_state(model, state)
    shift = mean_hidden(model, tokenizer, probes, max_length) - base_hidden
    update = torch.cat([(state[k].float() - start[k].float()).reshape(-1) for k in state])
    return torch.cat([_unit(shift.reshape(-1)), _unit(update)])


@torch.no_grad()
def text_hidden(model, tokenizer, texts: list[str], max_length: int, batch_size: int = 32) -> torch.Tensor:
    """[N, D]: per text, the mean final hidden state over its tokens."""
    device = next(model.parameters()).device
    rows = []
    for s in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[s:s + batch_size]), padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        mask = enc["attention_mask"].to(device)
        out = model(input_ids=enc["input_ids"].to(device), attention_mask=mask, output_hidden_states=True)
        h = out.hidden_states[-1].float() * mask.unsqueeze(-1)
        rows.append((h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)).cpu())
    return torch.cat(rows)
