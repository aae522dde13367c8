"""Floe's parameter-free router over the LoRA experts (Eq. 9–11).

  Γ_j   = normalise(Σ_t softmax_t(g_j)_t · d_t), d_t the normalised mean sentence embedding of k public
          samples of domain t and g_j,t = NLL_base(t) − NLL_j(t) the gain of expert j on domain t
          (`expert_domains`; a declared deviation, README (FL-10): the single best domain would give two
          experts that win the same domain identical embeddings, and leave domains no expert wins unroutable)
  ω(x)  = softmax_j( cos(e(x), Γ_j) / T )     one gate per prompt for all layers and tokens (T = 1: none)
  W'    = W + Σ_j ω_j · s · B_j A_j

Σ_j ω_j B_j A_j is itself a LoRA product of rank M·r: B_cat = [B_1 … B_M] (columns), A_cat = [ω_1 A_1; …;
ω_M A_M] (rows), so the routed model is an ordinary LoRA model at rank M·r_max with the same scale s
(`mixture_state`)."""
from __future__ import annotations

import torch


def weighted_expert_embeddings(embed, texts_by_domain: dict[str, list[str]],
                               gains: dict[int, dict[str, float]]) -> torch.Tensor:
    """[M, D] Γ_j = normalise(Σ_t softmax_t(g_j)_t · d_t) (module docstring), the experts in the order of
    `gains`' keys; d_t = the normalised mean of `embed(texts) -> [N, D]` normalised rows of domain t."""
    domains = sorted(texts_by_domain)
    empty = [t for t in domains if not texts_by_domain[t]]
    if empty:
        raise ValueError(f"method.router_k: domains {empty} have no public samples to embed")
    d = torch.stack([torch.nn.functional.normalize(
        torch.nn.functional.normalize(embed(list(texts_by_domain[t])).float(), dim=-1).mean(0), dim=0)
        for t in domains])
    rows = []
    for j in sorted(gains):
        w = torch.softmax(torch.tensor([float(gains[j][t]) for t in domains]), dim=0)
        rows.append(torch.nn.functional.normalize(w @ d, dim=0))
    return torch.stack(rows)


def gate(prompt_embeddings: torch.Tensor, experts: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """[N, M] ω: softmax over experts of the cosine similarity divided by the temperature."""
    p = torch.nn.functional.normalize(prompt_embeddings.float(), dim=-1)
    e = torch.nn.functional.normalize(experts.float(), dim=-1)
    return torch.softmax(p @ e.T / temperature, dim=-1)


def mixture_state(centres: list[dict], weights, rank_axes: dict[str, int]) -> dict:
    """The rank-M·r LoRA state with B_cat A_cat = Σ_j ω_j B_j A_j (module docstring); keys that are not LoRA
    factors are averaged with the weights."""
    w = torch.as_tensor(weights, dtype=torch.float32)
    if w.numel() != len(centres):
        raise ValueError(f"mixture_state: {len(centres)} experts, {w.numel()} weights")
    out = {}
    for k in centres[0]:
        if k not in rank_axes:
            out[k] = sum(float(wj) * c[k].float() for wj, c in zip(w, centres)).to(centres[0][k].dtype)
        elif rank_axes[k] == 0:      # A: [r, in] rows, scaled by ω_j
            out[k] = torch.cat([float(wj) * c[k] for wj, c in zip(w, centres)], dim=0)
        else:                        # B: [out, r] columns
            out[k] = torch.cat([c[k] for c in centres], dim=1)
    return out


@torch.no_grad()
def task_nll(model, tokenizer, examples, max_length: int, batch_size: int = 32) -> float:
    """Mean target-token NLL of `examples` under `model`."""
    from fedlab.data.collate import PadCollator, TokenizedExamples
    from fedlab.objectives.terms import target_cross_entropy

    ds = TokenizedExamples(tokenizer, list(examples), max_length)
    collate = PadCollator(tokenizer.pad_token_id)
    device = next(model.parameters()).device
    total, n = 0.0, 0
    for s in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(s, min(len(ds), s + batch_size))])
        logits = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)).logits
        total += float(target_cross_entropy(logits, batch["labels"].to(device))) * len(batch["input_ids"])
        n += len(batch["input_ids"])
    return total / max(n, 1)


def expert_domains(model, tokenizer, centres: list[dict], base_state: dict, public_by_task: dict[str, list],
                   max_length: int) -> tuple[list[str], dict]:
    """For each expert, the task whose public samples its LoRA improves most over the base model
    (NLL_base − NLL_expert), and the table of those gains."""
    from fedlab.transforms import set_state

    set_state(model, base_state)
    base = {t: task_nll(model, tokenizer, ex, max_length) for t, ex in public_by_task.items()}
    gains, domains = {}, []
    for j, c in enumerate(centres):
        set_state(model, c)
        g = {t: base[t] - task_nll(model, tokenizer, ex, max_length) for t, ex in public_by_task.items()}
        gains[j] = g
        domains.append(max(g, key=g.get))
    return domains, gains


def top_k_gates(scores: torch.Tensor, k: int | None) -> torch.Tensor:
    """[N, M] gates: softmax over each row's k largest `scores` (logits), 0 for the other experts; k = None or
    k ≥ M: the plain softmax."""
    if k is None or k >= scores.shape[-1]:
        return torch.softmax(scores.float(), dim=-1)
    top = scores.float().topk(k, dim=-1)
    out = torch.zeros_like(scores, dtype=torch.float32)
    return out.scatter(-1, top.indices, torch.softmax(top.values, dim=-1))


@torch.no_grad()
def example_nll(model, tokenizer, examples, max_length: int, batch_size: int = 32) -> torch.Tensor:
    """[N] Σ over each example's target tokens of −log p(token | prefix) under `model`."""
    from fedlab.data.collate import PadCollator, TokenizedExamples
    from fedlab.objectives.terms import per_sample_target_nll

    ds = TokenizedExamples(tokenizer, list(examples), max_length)
    collate = PadCollator(tokenizer.pad_token_id)
    device = next(model.parameters()).device
    out = []
    for s in range(0, len(ds), batch_size):
        batch = collate([ds[i] for i in range(s, min(len(ds), s + batch_size))])
        logits = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)).logits
        out.append(per_sample_target_nll(logits, batch["labels"].to(device)).cpu())
    return torch.cat(out) if out else torch.zeros(0)
