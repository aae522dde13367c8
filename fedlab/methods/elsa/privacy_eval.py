"""ELSA's privacy evaluation (paper 002 Table 4): what an honest-but-curious edge can read from the
activations a client sends, under each protection.

  visible(H) = H                               direct transmission
             = H + N(0, σ²)                    Gaussian noise (σ = 0.25)
             = decompress(compress(H))         sketch only (count sketch at ratio ρ)
             = decompress(compress(𝒬 H))       SS-OP + sketch (the edge never holds 𝒬)

Reconstruction: the mean cosine similarity and the MSE between H and visible(H), token by token.
Token identification: each visible vector's nearest row (cosine) of the model's input embedding table is
the attacker's guess of the token; accuracy over the non-padding positions. (The paper cites Li et al. 2023
and Wan et al. 2024 for the threat models without fixing the attack; the nearest-neighbour attack is our
reading; a linear probe would be another.)"""
from __future__ import annotations

import torch


def protect(h: torch.Tensor, kind: str, sketch=None, rotation: torch.Tensor | None = None, sigma: float = 0.25,
            seed: int = 0) -> torch.Tensor:
    """visible(H) for `kind` in direct, noise, sketch, ssop_sketch (module docstring); h [..., D]."""
    if kind == "direct":
        return h
    if kind == "noise":
        g = torch.Generator(device="cpu").manual_seed(seed)
        return h + sigma * torch.randn(h.shape, generator=g, dtype=h.dtype).to(h.device)
    if kind == "sketch":
        return sketch.decompress(sketch.compress(h))
    if kind == "ssop_sketch":
        return sketch.decompress(sketch.compress(h @ rotation.T))
    raise ValueError(f"protection {kind!r} is not allowed; allowed: direct, noise, sketch, ssop_sketch")


def reconstruction(h: torch.Tensor, visible: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """{"cos": mean cosine of H and visible(H) per token, "mse": mean squared error per element} over the
    positions `mask` keeps ([...], bool; all when None)."""
    cos = torch.nn.functional.cosine_similarity(h.double(), visible.double(), dim=-1)
    se = ((h.double() - visible.double()) ** 2).mean(-1)
    keep = torch.ones_like(cos, dtype=torch.bool) if mask is None else mask.bool()
    return {"cos": float(cos[keep].mean()), "mse": float(se[keep].mean())}


def token_accuracy(visible: torch.Tensor, token_ids: torch.Tensor, embeddings: torch.Tensor,
                   mask: torch.Tensor | None = None) -> float:
    """Share of kept positions whose visible vector's nearest embedding row (cosine) is its own token."""
    v = torch.nn.functional.normalize(visible.double().reshape(-1, visible.shape[-1]), dim=-1)
    e = torch.nn.functional.normalize(embeddings.double(), dim=-1)
    guess = (v @ e.T).argmax(-1).reshape(token_ids.shape)
    keep = torch.ones_like(token_ids, dtype=torch.bool) if mask is None else mask.bool()
    return float((guess == token_ids)[keep].double().mean())
