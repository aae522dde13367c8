"""ELSA's topology (paper 002 §III): N clients and K edge servers placed uniformly at random in a
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
    return Topology(clients, edges, round_trip_ms(dist, rng, base_ms, per_km_ms, jitter_ms), float(tau_max_ms))


def round_trip_ms(dist_km: np.ndarray, rng: np.random.Generator, base_ms: float = 20.0, per_km_ms: float = 25.0,
                  jitter_ms: float = 20.0) -> np.ndarray:
    """τ = base + per_km · distance + U(0, jitter) per entry of `dist_km` (module docstring)."""
    return base_ms + per_km_ms * dist_km + rng.uniform(0, jitter_ms, dist_km.shape)


def cloud_round_trips_ms(clients: np.ndarray, area_km: float, cloud_km: float, seed: int) -> np.ndarray:
    """[N] round trips to a cloud `cloud_km` from the centre of the area_km × area_km area (along its first
    axis), under the same latency model (Simple SL's middle part runs there)."""
    cloud = np.array([area_km / 2 + cloud_km, area_km / 2])
    return round_trip_ms(np.linalg.norm(clients - cloud, axis=-1), np.random.default_rng(seed))
