"""FedCAda's client optimiser (Zhou et al., 2024, "FedCAda: Adaptive Client-Side Optimization for Accelerated
and Stable Federated Learning"; ELSA's baseline, client Adam with moment correction).

What the paper states and fedlab follows: clients run Adam; the server aggregates the clients' adaptive
parameters (the moments m, v) with the model and sends them back, so a client resumes from the federation's
moments instead of zeros; the bias correction is constrained by a term added to its denominator that is
strong in early rounds (little global information yet) and fades as rounds pass. Our reading of that term
(declared in fedlab/methods/elsa/README.md; the adjustment function is a choice among the paper's variants):

    m_k = β1 m_{k−1} + (1 − β1) g_k          v_k = β2 v_{k−1} + (1 − β2) g_k²
    m̂ = m_k / (1 − β1^k + γ/r)             v̂ = v_k / (1 − β2^k + γ/r)
    θ ← θ − lr (m̂ / (√v̂ + ε) + λ θ)        (decoupled weight decay, as AdamW)

k counts every step the moments have seen (carried across rounds with them), r is the global round (≥ 1),
γ ≥ 0 (γ = 0 and fresh moments: exactly Adam / AdamW)."""
from __future__ import annotations

import torch


class FedCAda(torch.optim.Optimizer):
    """Adam with the federation's moments loaded (`moments`) and the round-dependent correction (module
    docstring). `names[i]` names `params[i]` in `moments` and in `export()`."""

    def __init__(self, params, names: list[str], lr: float, round: int, gamma: float = 1.0,
                 betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0, moments: dict | None = None):
        params = list(params)
        if len(params) != len(names):
            raise ValueError(f"FedCAda: {len(params)} parameters, {len(names)} names")
        if round < 1 or gamma < 0:
            raise ValueError(f"FedCAda: round {round} must be >= 1 and gamma {gamma} >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        self.names, self.round, self.gamma = list(names), int(round), float(gamma)
        self.k = int(moments["k"]) if moments else 0
        for p, n in zip(params, self.names):
            st = self.state[p]
            if moments and n in moments["m"]:
                st["m"] = torch.as_tensor(moments["m"][n]).to(p.device, torch.float32).clone()
                st["v"] = torch.as_tensor(moments["v"][n]).to(p.device, torch.float32).clone()
            else:
                st["m"] = torch.zeros_like(p, dtype=torch.float32)
                st["v"] = torch.zeros_like(p, dtype=torch.float32)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.k += 1
        adjust = self.gamma / self.round
        for group in self.param_groups:
            b1, b2 = group["betas"]
            c1, c2 = 1 - b1 ** self.k + adjust, 1 - b2 ** self.k + adjust
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                g = p.grad.float()
                st["m"].mul_(b1).add_(g, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                update = (st["m"] / c1) / ((st["v"] / c2).sqrt() + group["eps"])
                p.add_(update.to(p.dtype), alpha=-group["lr"])
        return loss

    def export(self) -> dict:
        """{"m": {name: m}, "v": {name: v}, "k": steps}: what goes up to the server after local training."""
        out = {"m": {}, "v": {}, "k": self.k}
        for p, n in zip(self.param_groups[0]["params"], self.names):
            out["m"][n] = self.state[p]["m"].detach().cpu().clone()
            out["v"][n] = self.state[p]["v"].detach().cpu().clone()
        return out


def average_moments(moments: list[dict], weights: list[float]) -> dict:
    """Σ_i w_i m_i, Σ_i w_i v_i over the moments' common names (weights normalised); k the weighted mean,
    rounded (the moments' age)."""
    total = float(sum(weights))
    if not moments or total <= 0:
        raise ValueError("average_moments: no moments or no weight")
    names = set(moments[0]["m"]).intersection(*[set(x["m"]) for x in moments[1:]])
    out = {"m": {}, "v": {}, "k": round(sum(w * x["k"] for w, x in zip(weights, moments)) / total)}
    for key in ("m", "v"):
        for n in sorted(names):
            out[key][n] = sum((w / total) * torch.as_tensor(x[key][n]).float() for w, x in zip(weights, moments))
    return out


def to_wire(moments: dict) -> dict:
    """The moments as a flat state (what crosses a boundary): "m/<name>", "v/<name>" and "k" tensors."""
    flat = {f"{key}/{n}": t for key in ("m", "v") for n, t in moments[key].items()}
    flat["k"] = torch.tensor(int(moments["k"]))
    return flat


def from_wire(flat: dict | None) -> dict | None:
    """`to_wire`'s inverse (None: no moments yet)."""
    if not flat:
        return None
    out = {"m": {}, "v": {}, "k": int(torch.as_tensor(flat["k"]))}
    for name, t in flat.items():
        if name != "k":
            key, n = name.split("/", 1)
            out[key][n] = torch.as_tensor(t)
    return out


def fedcada_factory(cfg, rnd: int, moments: dict | None):
    """(params, names) -> FedCAda with the federation's moments and this round's correction."""
    f = cfg.federation
    return lambda params, names: FedCAda(params, names, lr=f.lr, round=max(1, rnd), gamma=cfg.method.fedcada_gamma,
                                         betas=tuple(f.betas), weight_decay=f.weight_decay, moments=moments)
