"""One split-learning step between a client and its edge (paper 002 §3.2), with the edge as its
own party: it receives only payloads (sketched, rotated activations and their gradients), never the text,
the labels, the client's rotation 𝒬_n or the client's parameters.

  client: H = front(x)  →  H̃ = H 𝒬_nᵀ (SS-OP, uplink only)  →  S_up = sketch(H̃)                 → edge
  edge:   Ĥ = unsketch(S_up);  H₂ = middle(Ĥ);  S_down = sketch(H₂)                              → client
  client: Ĥ₂ = unsketch(S_down);  loss = L(back(Ĥ₂), y);  G_down = sketch(∂L/∂Ĥ₂)                 → edge
  edge:   backward H₂ with unsketch(G_down); step its θ₂;  G_up = sketch(∂L/∂Ĥ)                   → client
  client: backward H with unsketch(G_up) · 𝒬_n (𝒬_n a constant: exact); step θ₁, θ₃, head

Compression is treated as the identity in the backward pass (straight-through); the gradients travel
sketched like the activations (our choice: the paper names the sketch for ∂L/∂H̃_up and leaves the other
gradient open). The attention mask travels with the uplink (int8). `Link(sketch=None, rotation=None)` is
the uncompressed pipeline (Vanilla)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Link:
    """What a client and its edge share for the wire: the pair's count sketch (None: raw floats); the client
    alone holds `rotation` (𝒬_n, None: no SS-OP)."""
    sketch: object | None = None
    rotation: torch.Tensor | None = None

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.sketch is None else self.sketch.compress(x)

    def unpack(self, payload: torch.Tensor) -> torch.Tensor:
        return payload if self.sketch is None else self.sketch.decompress(payload)


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Edge:
    """The edge's side for one client: the middle part (a callable (mask, hidden) → hidden over modules whose
    trainable parameters are `params`), its optimiser, and the pair's sketch."""

    def __init__(self, middle, params, sketch=None, lr: float = 1e-3):
        self.middle, self.sketch = middle, sketch
        self.link = Link(sketch)
        self.opt = torch.optim.AdamW([p for p in params if p.requires_grad], lr=lr) if lr else None
        self._in = self._out = None

    def forward(self, payload: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self._in = self.link.unpack(payload).detach().requires_grad_(True)
        self._out = self.middle(mask.long(), self._in)
        return self.link.pack(self._out.detach())

    def backward(self, grad_payload: torch.Tensor) -> torch.Tensor:
        if self.opt is not None:
            self.opt.zero_grad(set_to_none=True)
        self._out.backward(self.link.unpack(grad_payload))
        if self.opt is not None:
            self.opt.step()
        grad = self._in.grad
        self._in = self._out = None
        return self.link.pack(grad)


@dataclass
class StepBytes:
    up: int          # client → edge: activations, mask, the gradient of the downlink
    down: int        # edge → client: activations, the gradient of the uplink


def split_step(front, back, edge: Edge, link: Link, input_ids: torch.Tensor, mask: torch.Tensor, loss_fn,
               client_opt=None) -> tuple[torch.Tensor, StepBytes]:
    """One mini-batch through client → edge → client and back (module docstring). `front(mask, ids)` and
    `back(mask, hidden)` are the client's parts; `loss_fn(back_output)` its loss. Returns (loss, bytes)."""
    if client_opt is not None:
        client_opt.zero_grad(set_to_none=True)
    h = front(mask, input_ids)
    q = link.rotation
    h_rot = h if q is None else h @ q.T
    up_act = link.pack(h_rot.detach())
    mask8 = mask.to(torch.int8)
    down_act = edge.forward(up_act, mask8)
    h2 = link.unpack(down_act).detach().requires_grad_(True)
    loss = loss_fn(back(mask, h2))
    loss.backward()
    g_down = link.pack(h2.grad)
    g_up_payload = edge.backward(g_down)
    g_up = link.unpack(g_up_payload)
    h.backward(g_up if q is None else g_up @ q)
    if client_opt is not None:
        client_opt.step()
    return loss.detach(), StepBytes(up=nbytes(up_act) + nbytes(mask8) + nbytes(g_down),
                                    down=nbytes(down_act) + nbytes(g_up_payload))
