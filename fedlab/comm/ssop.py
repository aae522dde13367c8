"""Subspace-selective orthogonal perturbation, SS-OP (ELSA Eq. 10–11).

Given J_n ∈ R^{Q×D} (recent layer-p outputs of client n), U_n ∈ R^{D×r} holds the top-r right singular
vectors of J_n (uncentred SVD, each vector's sign fixed so that its largest-magnitude entry is positive, so
every device computes the same U from the same J), V_n ∈ R^{r×r} is the Q factor of a seeded Gaussian
matrix (columns' signs fixed by diag(R) > 0, a Haar-distributed rotation), and

    𝒬_n = U V Uᵀ + (I − U Uᵀ)

rotates the subspace the activations live in and leaves its complement alone. 𝒬_n is orthogonal:
𝒬ᵀ𝒬 = I + U(VᵀV − I)Uᵀ = I."""
from __future__ import annotations

import hashlib

import torch
from torch import Tensor


def _fixed_sign(vectors: Tensor) -> Tensor:
    """Rows of `vectors` flipped so that each row's largest-|·| entry is positive (ties: first index)."""
    idx = vectors.abs().argmax(dim=1, keepdim=True)
    sign = torch.sign(torch.gather(vectors, 1, idx))
    sign[sign == 0] = 1
    return vectors * sign


def ssop_matrix(J: Tensor, r: int, seed: int) -> Tensor:
    """𝒬 ∈ R^{D×D} of Eq. 10–11 for the activations J[Q, D], subspace rank r and rotation seed.

    Raises ValueError when r is not in 1..rank(J). Computed in float64, returned in J's dtype and device."""
    if J.dim() != 2:
        raise ValueError(f"ssop_matrix: J must be [Q, D], got shape {tuple(J.shape)}")
    work = J.detach().to(torch.float64)
    _, sv, vh = torch.linalg.svd(work, full_matrices=False)
    eps = torch.finfo(J.dtype if J.dtype.is_floating_point else torch.float64).eps   # J's own precision
    tol = sv.max() * max(work.shape) * eps if sv.numel() else 0.0
    rank = int((sv > tol).sum())
    if not 1 <= int(r) <= rank:
        raise ValueError(f"ssop_matrix: r must be in 1..rank(J) = 1..{rank}, got {r}")
    u = _fixed_sign(vh[: int(r)]).T                                                   # [D, r]
    g = torch.Generator().manual_seed(int(seed))
    q, rr = torch.linalg.qr(torch.randn(int(r), int(r), generator=g, dtype=torch.float64))
    d = torch.sign(torch.diagonal(rr))
    d[d == 0] = 1
    v = (q * d).to(work.device)                                                       # Haar rotation
    eye = torch.eye(work.shape[1], dtype=torch.float64, device=work.device)
    out = u @ v @ u.T + (eye - u @ u.T)
    return out.to(J.dtype)


def client_seed(salt: str, client: int | str) -> int:
    """The client's rotation seed hash(salt ‖ n): a stable 63-bit integer (Python's hash() is salted
    per process, so it is not used)."""
    digest = hashlib.sha256(f"{salt}\u2016{client}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
