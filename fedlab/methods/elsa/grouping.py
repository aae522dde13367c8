"""ELSA's grouping of clients under edges (paper 002 §III-B):

  1. exclude clients with no feasible edge, or with relative trust w_n / max w < w_excl;
  2. spectral clustering of the included clients into (at most) K groups on the precomputed affinity
     A = w wᵀ ⊙ exp(−γ R̂)   (scikit-learn, seeded);
  3. match groups to edges by a minimum-cost assignment (scipy's linear_sum_assignment): the cost of group g
     at edge k is (members for whom k is infeasible) · BIG + their mean latency to k;
  4. repair: a member whose group's edge is infeasible for it moves to its nearest feasible edge's group;
     a group whose mean relative trust is below w_min merges into the group, among those with mean trust
     ≥ w_min, whose edge is nearest to its members on average; members then infeasible move again (step 4).

Every included client ends in exactly one group; a group is identified by its edge. Clustering all included
clients at once and then matching groups to edges is a declared deviation (fedlab/methods/elsa/README.md;
the paper forms per-edge candidate sets); it keeps the groups disjoint."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BIG = 1e6


@dataclass
class Grouping:
    groups: dict[int, list[int]]                 # edge -> member clients (sorted)
    excluded: dict[int, str] = field(default_factory=dict)   # client -> why ("no feasible edge", "low trust")
    moved: list[tuple[int, int, int]] = field(default_factory=list)   # (client, from edge, to edge)
    merged: list[tuple[int, int]] = field(default_factory=list)       # (from edge, into edge)

    def edge_of(self) -> dict[int, int]:
        return {c: k for k, members in self.groups.items() for c in members}


def affinity(trust: np.ndarray, divergence: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """A = w wᵀ ⊙ exp(−γ R̂) (symmetric, non-negative; the diagonal is w_n²)."""
    w = np.asarray(trust, dtype=float)
    return np.outer(w, w) * np.exp(-gamma * np.asarray(divergence, dtype=float))


def group_clients(trust: np.ndarray, divergence: np.ndarray, latency_ms: np.ndarray, feasible: np.ndarray,
                  w_excl: float = 0.1, w_min: float = 0.3, gamma: float = 1.0, seed: int = 0) -> Grouping:
    """Steps 1–4 of the module docstring. `trust` is relative (max 1); `divergence` R̂ [N, N]; `latency_ms`
    and `feasible` [N, K]."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import SpectralClustering

    trust, latency, feasible = np.asarray(trust, float), np.asarray(latency_ms, float), np.asarray(feasible, bool)
    n, k = latency.shape
    excluded = {c: "no feasible edge" for c in range(n) if not feasible[c].any()}
    excluded.update({c: "low trust" for c in range(n) if c not in excluded and trust[c] < w_excl})
    included = [c for c in range(n) if c not in excluded]
    out = Grouping({}, excluded)
    if not included:
        return out
    m = min(k, len(included))
    if m == 1:
        labels = np.zeros(len(included), dtype=int)
    else:
        aff = affinity(trust[included], np.asarray(divergence, float)[np.ix_(included, included)], gamma)
        labels = SpectralClustering(m, affinity="precomputed", random_state=seed,
                                    assign_labels="cluster_qr").fit_predict(aff)
    clusters = [[included[i] for i in np.flatnonzero(labels == g)] for g in range(m)]
    clusters = [c for c in clusters if c]
    cost = np.array([[(~feasible[c, e]).sum() * BIG + latency[c, e].mean() for e in range(k)] for c in clusters])
    rows, cols = linear_sum_assignment(cost)
    out.groups = {int(e): sorted(clusters[g]) for g, e in zip(rows, cols)}
    _repair_feasibility(out, latency, feasible)
    _merge_low_trust(out, trust, latency, feasible, w_min)
    return out


def _nearest_feasible(c: int, latency: np.ndarray, feasible: np.ndarray) -> int:
    return int(np.argmin(np.where(feasible[c], latency[c], np.inf)))


def _repair_feasibility(g: Grouping, latency: np.ndarray, feasible: np.ndarray) -> None:
    for e in sorted(g.groups):
        for c in list(g.groups[e]):
            if not feasible[c, e]:
                to = _nearest_feasible(c, latency, feasible)
                g.groups[e].remove(c)
                g.groups.setdefault(to, []).append(c)
                g.moved.append((c, e, to))
    g.groups = {e: sorted(m) for e, m in sorted(g.groups.items()) if m}


def _merge_low_trust(g: Grouping, trust: np.ndarray, latency: np.ndarray, feasible: np.ndarray,
                     w_min: float) -> None:
    mean = {e: float(trust[m].mean()) for e, m in g.groups.items()}
    good = [e for e in g.groups if mean[e] >= w_min]
    if not good:                                  # no group to merge into: leave them as they are
        return
    for e in sorted(e for e in g.groups if mean[e] < w_min):
        into = min(good, key=lambda t: latency[g.groups[e], t].mean())
        g.groups[into] = sorted(g.groups[into] + g.groups.pop(e))
        g.merged.append((e, into))
    _repair_feasibility(g, latency, feasible)
