"""Count sketch of activations (ELSA Eq. 12–13).

A vector x ∈ R^D is hashed into Y rows × Z columns. Row y has a bucket hash h_y: [D] → [Z] and a sign hash
s_y: [D] → {−1, +1}, both drawn from a seeded generator so that the two parties of a link (client and
edge) build the same sketch from the same seed:

    compress:    S[y, z] = Σ_{i : h_y(i) = z} s_y(i) · x_i                      (Eq. 12)
    decompress:  x̂_i   = median_y  s_y(i) · S[y, h_y(i)]                        (Eq. 13)

The compression ratio is ρ = D / (Y·Z). `compress` is linear: S = x·P with P ∈ {−1, 0, +1}^{D×(Y·Z)} the
signed bucket matrix (one matrix product); `decompress` reads every row's estimate with the transposed
blocks (s_y(i)·S[y, h_y(i)] = (S_y P_yᵀ)_i, one batched product) and takes their median (for Y = 3 by
min/max, without a sort). The median is only homogeneous (f(a·x) = a·f(x)). Both are vectorised over any
leading dimensions and differentiable; callers that want the paper's straight-through backward wrap them
(fedlab.methods.elsa).

Native passes (`fedlab.comm.native`, `count_sketch.c`; FEDLAB_FUSED_KERNELS): from D = `NATIVE_MIN_DIM` on
(BERT-base's 768; not tiny-bert's 128 nor MiniLM's 384, whose recorded runs keep the products above), outside
autograd, for Y ∈ {1, 3}, in float32 on a CPU with AVX2, each direction is one pass of hand-written vector code
over the activations in their own [N, D] layout (tiles of 8 rows transposed in registers). Compress adds each
bucket's signed entries in index order: equal to the product within float32 rounding of the bucket's sum (the
same terms, which each adds in its own order). Decompress reads s_y(i)·S[y, h_y(i)] directly and takes the
median: the product's values on finite input (each of its outputs has one non-zero term; a zero's sign may
differ). Non-finite input differs in reach: the products multiply every entry by the zeros of P, so one NaN or
infinite entry makes its whole row NaN, while the native passes give NaN only in the buckets and estimates that
read it. Elsewhere, and where the library cannot be built, the products run."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab import compiled
from fedlab.comm import native

NATIVE_MIN_DIM = 512


class CountSketch:
    """A seeded count sketch of vectors of size `dim` into `rows` × `cols` buckets.

    Y (rows) should be odd: the median of an even number of estimates is ambiguous; with an even count the
    mean of the two middle estimates is returned."""

    def __init__(self, dim: int, rows: int, cols: int, seed: int):
        for key, value in (("dim", dim), ("rows", rows), ("cols", cols)):
            if int(value) < 1:
                raise ValueError(f"CountSketch: {key} must be ≥ 1, got {value}")
        self.dim, self.rows, self.cols, self.seed = int(dim), int(rows), int(cols), int(seed)
        g = torch.Generator().manual_seed(self.seed)
        self.buckets = torch.randint(0, self.cols, (self.rows, self.dim), generator=g)            # h_y(i)
        self.signs = torch.randint(0, 2, (self.rows, self.dim), generator=g).mul_(2).sub_(1)    # s_y(i)
        # P[i, y·Z + h_y(i)] = s_y(i): compress is x·P, row y's estimates are S_y·P_yᵀ
        proj = torch.zeros(self.dim, self.rows * self.cols)
        flat = (torch.arange(self.rows)[:, None] * self.cols + self.buckets)                   # [Y, D]
        for y in range(self.rows):
            proj[torch.arange(self.dim), flat[y]] = self.signs[y].float()
        self._proj = proj
        self._on: dict[tuple[torch.device, torch.dtype], tuple[Tensor, Tensor]] = {}
        self._native: tuple[Tensor, ...] | None = None            # the native passes' tables (fedlab.comm.native)

    @property
    def ratio(self) -> float:
        """ρ = D / (Y·Z), the achieved compression ratio."""
        return self.dim / (self.rows * self.cols)

    def _tables(self, like: Tensor) -> tuple[Tensor, Tensor]:
        """(P [D, Y·Z], its row blocks transposed [Y, Z, D]) on `like`'s device and dtype."""
        key = (like.device, like.dtype)
        if key not in self._on:
            p = self._proj.to(like.device, like.dtype)
            self._on[key] = (p, p.T.reshape(self.rows, self.cols, self.dim).contiguous())
        return self._on[key]

    def _native_library(self, t: Tensor):
        """The native passes' library where this call takes them (module docstring), else None."""
        if (self.rows not in (1, 3) or t.dtype != torch.float32 or t.device.type != "cpu"
                or (torch.is_grad_enabled() and t.requires_grad)):
            return None
        mode = compiled.mode()
        if mode == "off" or (mode == "auto" and self.dim < NATIVE_MIN_DIM):
            return None
        return native.library(native_agrees)

    def compress(self, x: Tensor) -> Tensor:
        """x[..., D] → S[..., Y, Z] (Eq. 12)."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"CountSketch.compress: last dimension {x.shape[-1]} != dim {self.dim}")
        lib = self._native_library(x)
        return native.compress(self, x, lib) if lib is not None else self.compress_products(x)

    def compress_products(self, x: Tensor) -> Tensor:
        """Eq. 12 as one matrix product, S = x·P."""
        return (x.reshape(-1, self.dim) @ self._tables(x)[0]).reshape(*x.shape[:-1], self.rows, self.cols)

    def decompress(self, s: Tensor) -> Tensor:
        """S[..., Y, Z] → x̂[..., D] (Eq. 13: the median over rows of the signed bucket values)."""
        if tuple(s.shape[-2:]) != (self.rows, self.cols):
            raise ValueError(f"CountSketch.decompress: trailing shape {tuple(s.shape[-2:])} != "
                             f"(rows, cols) = ({self.rows}, {self.cols})")
        lib = self._native_library(s)
        return native.decompress(self, s, lib) if lib is not None else self.decompress_products(s)

    def decompress_products(self, s: Tensor) -> Tensor:
        """Eq. 13 with the transposed row blocks (one batched product) and the median over rows."""
        flat = s.reshape(-1, self.rows, self.cols)
        _, blocks = self._tables(flat)
        picked = torch.einsum("nyz,yzd->nyd", flat, blocks)                                  # [N, Y, D]
        if self.rows == 1:
            est = picked[:, 0]
        elif self.rows == 3:       # median of three: max(min(a, b), min(max(a, b), c))
            a, b, c = picked[:, 0], picked[:, 1], picked[:, 2]
            est = torch.maximum(torch.minimum(a, b), torch.minimum(torch.maximum(a, b), c))
        elif self.rows % 2 == 1:
            est = picked.median(dim=1).values
        else:
            ordered = picked.sort(dim=1).values
            est = 0.5 * (ordered[:, self.rows // 2 - 1] + ordered[:, self.rows // 2])
        return est.reshape(*s.shape[:-2], self.dim)

    def __repr__(self) -> str:
        return f"CountSketch(dim={self.dim}, rows={self.rows}, cols={self.cols}, seed={self.seed}, ρ={self.ratio:.2f})"


def native_agrees(lib) -> bool:
    """The native passes' check before their first use: a 13 × 21 input (a partial tile and a partial column
    block) through both against the products, decompress equal and compress within float32 rounding."""
    sk = CountSketch(21, 3, 5, seed=1)
    x = torch.randn(13, 21, generator=torch.Generator().manual_seed(0))
    s = sk.compress_products(x)
    return bool(torch.allclose(native.compress(sk, x, lib), s, atol=1e-5, rtol=0)
                and torch.equal(native.decompress(sk, s, lib), sk.decompress_products(s)))


def native_status() -> str:
    """Whether the native passes are on here, or why not (`fedlab doctor`)."""
    return native.status(native_agrees)


def sketch_for_ratio(dim: int, ratio: float, seed: int, rows: int = 3) -> CountSketch:
    """The default shape for a target ρ: Y = 3 rows, Z = round(D / (Y·ρ)) columns (at least 1);
    the achieved ratio is `.ratio`."""
    if ratio <= 0:
        raise ValueError(f"sketch_for_ratio: ratio must be > 0, got {ratio}")
    return CountSketch(dim, rows, max(1, round(dim / (rows * ratio))), seed)
