"""What one client–edge link does to a tensor it carries, built alike on both
ends from the config and the client id:

- raw (ρ = 1): the floats themselves;
- sketch: the count sketch at ratio ρ with Y = `sketch_rows` rows, its hashes either fixed for the link for
  the whole run (`sketch_hashes: fixed`, the default: the error is then one fixed distortion of the link) or
  re-drawn for every (round, step) (`per_step`: the error is unbiased over the steps);
- noise (`link_codec: noise`, a control): the raw floats plus Gaussian noise whose variance is the mean squared
  error the link's sketch would have made on this very tensor, σ² = mean((x̂ − x)²) with x̂ = unsketch(sketch(x)),
  so that the sketch's information loss can be told apart from its error's size; raw floats on the wire.

`pack(x, rnd, step, tag)` is what the sender puts on the wire; `unpack(wire, rnd, step)` what the receiver
reads. Both ends call them with the same (round, step), so a per-step sketch is the same on both; `tag` names
the transfer (activations up / down, gradients down / up) so the noise of each is drawn apart. `cosine(x, ...)`
is the reconstruction cosine the receiver's view has with x (logged beside each accuracy)."""
from __future__ import annotations

import torch

from fedlab.comm.sketch import sketch_for_ratio
from fedlab.seeding import derive_seed

EVAL_STEP = -1          # the (round, step) tag of evaluation passes


class LinkCodec:
    def __init__(self, cfg, cid: int, dim: int):
        m = cfg.method
        self.seed, self.cid, self.dim = int(cfg.seed), int(cid), int(dim)
        self.ratio_asked, self.rows = float(m.ratio), int(m.sketch_rows)
        self.per_step = m.sketch_hashes == "per_step"
        self.noise = m.link_codec == "noise"
        self._fixed = None if self.ratio_asked <= 1 else self._build(derive_seed(cfg.seed, "elsa-sketch", cid))
        self._last: tuple | None = None

    def _build(self, seed: int):
        return sketch_for_ratio(self.dim, self.ratio_asked, seed, rows=self.rows)

    @property
    def compresses(self) -> bool:
        """Whether the wire carries fewer floats than the tensor (a sketch, not raw and not the noise control)."""
        return self._fixed is not None and not self.noise

    @property
    def ratio(self) -> float:
        """The achieved ρ of the sketch on the wire (1 for raw floats and for the noise control)."""
        return self._fixed.ratio if self.compresses else 1.0

    def sketch(self, rnd: int, step: int):
        """The count sketch of (round, step): the link's fixed one, or one drawn for this step."""
        if self._fixed is None:
            return None
        if not self.per_step:
            return self._fixed
        if self._last is None or self._last[0] != (rnd, step):
            self._last = ((rnd, step), self._build(derive_seed(self.seed, "elsa-sketch", self.cid, rnd, step)))
        return self._last[1]

    def pack(self, x: torch.Tensor, rnd: int, step: int, tag: str) -> torch.Tensor:
        sk = self.sketch(rnd, step)
        if sk is None:
            return x
        if not self.noise:
            return sk.compress(x)
        err = sk.decompress(sk.compress(x)) - x
        sigma = err.pow(2).mean().sqrt()
        g = torch.Generator().manual_seed(derive_seed(self.seed, "elsa-noise", self.cid, rnd, step, tag))
        return x + sigma * torch.randn(x.shape, generator=g, dtype=x.dtype)

    def unpack(self, wire: torch.Tensor, rnd: int, step: int) -> torch.Tensor:
        sk = self.sketch(rnd, step)
        return wire if sk is None or self.noise else sk.decompress(wire)

    def through(self, x: torch.Tensor, rnd: int, step: int, tag: str) -> torch.Tensor:
        """What the receiver reads when the sender packs `x`."""
        return self.unpack(self.pack(x, rnd, step, tag), rnd, step)


def cosine(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean cosine between the vectors x[..., D] and y[..., D] (over the positions where `mask` is 1)."""
    c = torch.nn.functional.cosine_similarity(x.float(), y.float(), dim=-1, eps=1e-12)
    if mask is not None:
        c = c[mask.bool()]
    return float(c.mean()) if c.numel() else float("nan")
