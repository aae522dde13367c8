"""Simulated edge devices for Floe: device classes after the paper's Table I, assigned to
clients in proportion to their shares, and a seeded background load that lowers each device's free memory
and speed every round (the paper's B_i is the *current* free memory).

Memory is expressed on the profile's own scale, so that the classes mean the same on any model: a class's
`memory` m places its budget at M(r_min) + m·(M(r_max) − M(r_min)) of the measured profile (m ≥ 1: every rank
fits when idle; m = 0: only the smallest). The background load u ~ U(0, load) of a round takes u of that range
and slows the device to speed·(1 − u/2)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from fedlab.seeding import derive_seed


def assign_classes(num_clients: int, classes, seed: int) -> list:
    """Each client's class (objects with `share`, `memory`, `speed`: fedlab.methods.floe.config.DeviceClass): counts by largest remainder of the shares, then a seeded shuffle."""
    if not classes:
        raise ValueError("assign_classes: no device classes")
    total = sum(c.share for c in classes)
    exact = [num_clients * c.share / total for c in classes]
    counts = [int(e) for e in exact]
    for i in sorted(range(len(classes)), key=lambda i: -(exact[i] - counts[i]))[: num_clients - sum(counts)]:
        counts[i] += 1
    out = [c for c, n in zip(classes, counts) for _ in range(n)]
    random.Random(derive_seed(seed, "device-classes")).shuffle(out)
    return out


@dataclass(frozen=True)
class Conditions:
    """A device in one round: its free memory (profile units, e.g. MB) and its effective speed."""
    free_memory: float
    speed: float
    load: float


def round_conditions(cls, mem_min: float, mem_max: float, load: float, seed: int, rnd: int,
                     cid: int) -> Conditions:
    """The seeded background load u ~ U(0, load) of client `cid` in round `rnd` and what it leaves."""
    u = random.Random(derive_seed(seed, "device-load", rnd, cid)).uniform(0.0, load) if load > 0 else 0.0
    span = max(mem_max - mem_min, 1e-9)
    return Conditions(free_memory=mem_min + (cls.memory - u) * span, speed=cls.speed * (1 - u / 2), load=u)
