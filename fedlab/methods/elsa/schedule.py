"""The learning rate of ELSA's clients and edges over the global rounds (`method.lr_schedule`)."""
from __future__ import annotations

import dataclasses
import math


def round_lr(lr: float, schedule: str, rnd: int, rounds: int) -> float:
    """constant: lr. cosine: lr_g = lr · ½(1 + cos(π (g − 1) / G)) in round g ∈ 1..G (lr in round 1, about
    lr·π²/(4G²) in round G, never 0); round 0 (the warm-up) and rounds past G take lr and lr_G."""
    if schedule == "constant" or rnd < 1 or rounds < 1:
        return lr
    g = min(rnd, rounds)
    return lr * 0.5 * (1.0 + math.cos(math.pi * (g - 1) / rounds))


def at_round(cfg, rnd: int):
    """`cfg` with federation.lr replaced by round `rnd`'s learning rate (the same object when it is constant)."""
    f = cfg.federation
    lr = round_lr(f.lr, cfg.method.lr_schedule, rnd, f.rounds)
    if lr == f.lr:
        return cfg
    return dataclasses.replace(cfg, federation=dataclasses.replace(f, lr=lr))
