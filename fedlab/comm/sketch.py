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

Fused passes (`fedlab.compiled`, FEDLAB_FUSED_KERNELS): from D = `FUSED_MIN_DIM` on (BERT-base's
768; not tiny-bert's 128 nor MiniLM's 384, whose recorded runs keep the products above), outside autograd, for
Y ∈ {1, 3}, in float32 or float64 on the CPU, both run as torch.compile'd gathers on the transposed
activations ([D, N]: a whole row of the batch per index, so the generated loops are vectorised). Compress sums
the signed entries of each bucket (Sᵀ[y, z] = Σ_l sgn[y, z, l] · xᵀ[idx[y, z, l]] over the bucket's padded
index list, no D × Y·Z product): equal to the product within float32 rounding of the bucket's sum (the same
terms, which each adds in its own order). Decompress reads s_y(i)·Sᵀ[y, h_y(i)] directly and takes the
median: bit for bit the product's (each of its outputs has one non-zero term). Both return contiguous
[..., Y, Z] / [..., D] tensors, as the products do; the two transposes are most of the cost left
(benchmarks/README.md)."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab import compiled

FUSED_MIN_DIM = 512
_FNS: dict = {}


def _compress_body(xt: Tensor, idx: Tensor, sgn: Tensor, width: int) -> Tensor:
    """xᵀ [D, N] → Sᵀ [Y, Z, N]: Sᵀ[y, z] = Σ_{l < width} sgn[y, z, l] · xᵀ[idx[y, z, l]], added in l's order
    over each bucket's padded index list (padding: sgn 0). Written out term by term: the generated loop then
    runs along N, contiguous and vectorised (as one `.sum` over l it was 3× slower than the products)."""
    acc = sgn[:, :, 0, None] * xt[idx[:, :, 0]]
    for j in range(1, width):
        acc = acc + sgn[:, :, j, None] * xt[idx[:, :, j]]
    return acc


def _decompress_body(st: Tensor, buckets: Tensor, signs: Tensor, rows: int) -> Tensor:
    """Sᵀ [Y, Z, N] → x̂ᵀ [D, N]: median over y of s_y(i)·Sᵀ[y, h_y(i)] (Y = 1: the one estimate; Y = 3:
    max(min(a, b), min(max(a, b), c)))."""
    a = signs[0][:, None] * st[0][buckets[0]]
    if rows == 1:
        return a
    b, c = signs[1][:, None] * st[1][buckets[1]], signs[2][:, None] * st[2][buckets[2]]
    return torch.maximum(torch.minimum(a, b), torch.minimum(torch.maximum(a, b), c))


def _compiled(name: str):
    if name not in _FNS:
        _FNS[name] = torch.compile(_compress_body if name == "compress" else _decompress_body)
    return _FNS[name]


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
        self._gather: dict[torch.dtype, tuple[Tensor, ...]] = {}     # the fused passes' tables (CPU only)

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

    def _gather_tables(self, like: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """For the fused passes, on `like`'s dtype: each bucket's entries as a padded index list idx [Y, Z, L]
        (index order within a bucket) with their signs sgn [Y, Z, L] (0 in the padding), and h [Y, D], s [Y, D]."""
        if like.dtype not in self._gather:
            order = torch.argsort(self.buckets, dim=1, stable=True)                     # [Y, D] by bucket, then index
            sorted_buckets = torch.gather(self.buckets, 1, order)
            counts = torch.stack([torch.bincount(self.buckets[y], minlength=self.cols) for y in range(self.rows)])
            starts = torch.cumsum(counts, dim=1) - counts                                 # [Y, Z]
            slot = torch.arange(self.dim)[None, :] - torch.gather(starts, 1, sorted_buckets)   # place within the bucket
            # the longest bucket, rounded up to a multiple of 8: the compiled loop is written out to this width,
            # so sketches of other seeds (each ELSA link has its own) mostly share one compiled graph
            width = -(-max(1, int(counts.max())) // 8) * 8
            idx = torch.zeros(self.rows, self.cols, width, dtype=torch.long)
            sgn = torch.zeros(self.rows, self.cols, width, dtype=like.dtype)
            rows = torch.arange(self.rows)[:, None].expand_as(order)
            idx[rows, sorted_buckets, slot] = order
            sgn[rows, sorted_buckets, slot] = torch.gather(self.signs, 1, order).to(like.dtype)
            self._gather[like.dtype] = (idx, sgn, self.buckets, self.signs.to(like.dtype))
        return self._gather[like.dtype]

    def _fused(self, t: Tensor) -> bool:
        """Whether this call takes the fused pass (module docstring)."""
        return (self.rows in (1, 3) and not (torch.is_grad_enabled() and t.requires_grad)
                and compiled.wanted(t, self.dim, FUSED_MIN_DIM))

    def compress(self, x: Tensor) -> Tensor:
        """x[..., D] → S[..., Y, Z] (Eq. 12)."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"CountSketch.compress: last dimension {x.shape[-1]} != dim {self.dim}")
        lead = x.shape[:-1]
        eager = lambda: (x.reshape(-1, self.dim) @ self._tables(x)[0]).reshape(*lead, self.rows, self.cols)
        if self._fused(x):
            idx, sgn, _, _ = self._gather_tables(x)
            fused = lambda: (_compiled("compress")(x.reshape(-1, self.dim).t().contiguous(), idx, sgn, idx.shape[-1])
                             .permute(2, 0, 1).contiguous().reshape(*lead, self.rows, self.cols))
            return compiled.run_or_fall_back("count sketch compress", fused, eager)
        return eager()

    def decompress(self, s: Tensor) -> Tensor:
        """S[..., Y, Z] → x̂[..., D] (Eq. 13: the median over rows of the signed bucket values)."""
        if tuple(s.shape[-2:]) != (self.rows, self.cols):
            raise ValueError(f"CountSketch.decompress: trailing shape {tuple(s.shape[-2:])} != "
                             f"(rows, cols) = ({self.rows}, {self.cols})")
        lead = s.shape[:-2]
        flat = s.reshape(-1, self.rows, self.cols)
        if self._fused(s):
            _, _, h, sg = self._gather_tables(s)
            fused = lambda: (_compiled("decompress")(flat.permute(1, 2, 0).contiguous(), h, sg, self.rows)
                             .t().contiguous().reshape(*lead, self.dim))
            return compiled.run_or_fall_back("count sketch decompress", fused, lambda: self._decompress_products(flat, lead))
        return self._decompress_products(flat, lead)

    def _decompress_products(self, flat: Tensor, lead) -> Tensor:
        """Eq. 13 with the transposed row blocks (one batched product) and the median over rows."""
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
        return est.reshape(*lead, self.dim)

    def __repr__(self) -> str:
        return f"CountSketch(dim={self.dim}, rows={self.rows}, cols={self.cols}, seed={self.seed}, ρ={self.ratio:.2f})"


def sketch_for_ratio(dim: int, ratio: float, seed: int, rows: int = 3) -> CountSketch:
    """The default shape for a target ρ: Y = 3 rows, Z = round(D / (Y·ρ)) columns (at least 1);
    the achieved ratio is `.ratio`."""
    if ratio <= 0:
        raise ValueError(f"sketch_for_ratio: ratio must be > 0, got {ratio}")
    return CountSketch(dim, rows, max(1, round(dim / (rows * ratio))), seed)
