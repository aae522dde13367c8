"""The reconstruction cosine a count sketch leaves a dense vector (the arithmetic behind ELSA's Table 3).

For one row (Y = 1) of Z buckets, coordinate i's estimate is x_i plus the signed sum of the other coordinates
that share its bucket, each with probability 1/Z:  E[(x̂_i − x_i)²] = (‖x‖² − x_i²)/Z, so over the vector
E‖x̂ − x‖² = (D − 1)/Z · ‖x‖² and, the error being uncorrelated with x,

    cos(x, x̂) ≈ 1 / √(1 + (D − 1)/Z)                      (Y = 1; ρ = D/Z, so about 1/√(1 + ρ))

The median of Y = 3 rows of Z = D/(3ρ) buckets each has no closed form (the error is a sum of a few signed
coordinates, not Gaussian); `dense_cosine` estimates it by drawing Gaussian vectors and hash seeds. A dense
vector is the case that matters here: the encoders' activations carry their energy over all D coordinates (no
few heavy hitters for the sketch to keep), as ELSA's measured uplink cosines, within 0.02 of these values at
every ρ of Table 3, show. (SS-OP does not change this: it rotates only within a rank-r subspace.)"""
from __future__ import annotations

import math

import torch

from fedlab.comm.sketch import CountSketch


def one_row_cosine(dim: int, cols: int) -> float:
    """cos ≈ 1/√(1 + (D − 1)/Z) for a one-row sketch of a dense vector (module docstring)."""
    return 1.0 / math.sqrt(1.0 + (dim - 1) / cols)


def dense_cosine(dim: int, rows: int, cols: int, sketches: int = 32, vectors: int = 256, seed: int = 0) -> float:
    """E[cos(x, decompress(compress(x)))] for x ~ N(0, I_D), averaged over `sketches` hash draws of a Y × Z count
    sketch and `vectors` vectors each (the Monte-Carlo error is below 0.005 at the defaults for D = 128)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(vectors, dim, generator=g, dtype=torch.float64)
    total = 0.0
    for k in range(sketches):
        s = CountSketch(dim, rows, cols, seed=seed * 1_000_003 + k)
        xh = s.decompress(s.compress(x))
        total += torch.nn.functional.cosine_similarity(x, xh, dim=-1).mean().item()
    return total / sketches
