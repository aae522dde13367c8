"""ELSA's topology (paper 002 §III, SPEC §3.1): N clients and K edge servers placed uniformly at random in a
width × height area (seeded); the client–edge round-trip latency grows with the distance,

  τ_{n,k} = base + per_km · dist(n, k) + noise,   noise ~ U(0, jitter)   (milliseconds)

and edge k is feasible for client n when τ_{n,k} ≤ τ_max."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Topology:
    clients: np.ndarray        # [N, 2] km
    edges: np.ndarray          # [K, 2] km
    latency_ms: np.ndarray     # [N, K] round-trip
    tau_max_ms: float

    @property
    def feasible(self) -> np.ndarray:
        """[N, K] bool: τ_{n,k} ≤ τ_max."""
        return self.latency_ms <= self.tau_max_ms


def place(num_clients: int, num_edges: int, seed: int, width_km: float = 8.0, height_km: float = 8.0,
          base_ms: float = 20.0, per_km_ms: float = 25.0, jitter_ms: float = 20.0,
          tau_max_ms: float = 200.0) -> Topology:
    """Seeded placement and latencies (module docstring)."""
    rng = np.random.default_rng(seed)
    size = np.array([width_km, height_km])
    clients = rng.uniform(0, 1, (num_clients, 2)) * size
    edges = rng.uniform(0, 1, (num_edges, 2)) * size
    dist = np.linalg.norm(clients[:, None, :] - edges[None, :, :], axis=-1)
    latency = base_ms + per_km_ms * dist + rng.uniform(0, jitter_ms, dist.shape)
    return Topology(clients, edges, latency, float(tau_max_ms))
