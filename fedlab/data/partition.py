"""Partitioners: deterministic by seed. Each returns, for K clients, lists of indices into the pooled
training examples. Every client gets at least one example (validated before); `partition(..., min_size=m)`
tops up every client to m examples (ELSA: every client holds at least two batches)."""
from __future__ import annotations

import numpy as np

from fedlab.data.tasks import Example
from fedlab.validation import ConfigError


def _ensure_nonempty(parts: list[list[int]], rng: np.random.Generator, min_size: int = 1) -> list[list[int]]:
    """Each client below `min_size` examples gets random examples of the currently largest client, one at a
    time, until it has `min_size` (keeps the skew of everyone else; avoids empty and near-empty clients)."""
    for k in range(len(parts)):
        while len(parts[k]) < min_size:
            big = max(range(len(parts)), key=lambda j: len(parts[j]))
            if len(parts[big]) <= min_size:
                total = sum(len(p) for p in parts)
                raise ConfigError(
                    f"data.num_clients: {len(parts)} clients but {total} training samples; lower data.num_clients or "
                    "give the tasks more training data" if min_size == 1 else
                    f"data.min_client_samples: {total} training samples are too few for each of {len(parts)} clients "
                    f"to hold {min_size}; lower data.min_client_samples or data.num_clients")
            parts[k].append(parts[big].pop(int(rng.integers(len(parts[big])))))
    return [sorted(p) for p in parts]


def iid(examples: list[Example], k: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(examples))
    return _ensure_nonempty([sorted(a.tolist()) for a in np.array_split(perm, k)], rng)


def by_task(examples: list[Example], k: int, seed: int) -> list[list[int]]:
    """Client i holds task i mod T; clients sharing a task split it IID."""
    rng = np.random.default_rng(seed)
    tasks = sorted({e.task for e in examples}, key=[e.task for e in examples].index)
    owners = {t: [c for c in range(k) if c % len(tasks) == ti] for ti, t in enumerate(tasks)}
    parts: list[list[int]] = [[] for _ in range(k)]
    for t, clients in owners.items():
        idx = rng.permutation([i for i, e in enumerate(examples) if e.task == t])
        for c, chunk in zip(clients, np.array_split(idx, len(clients))):
            parts[c] += chunk.tolist()
    return _ensure_nonempty(parts, rng)


def _dirichlet_by(keys: list[str], k: int, alpha: float, seed: int, sizes=None) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in range(k)]
    for key in sorted(set(keys)):
        idx = rng.permutation([i for i, x in enumerate(keys) if x == key])
        props = rng.dirichlet([alpha] * k)
        if sizes is not None:         # quantity skew on top: client n's share scaled by sizes[n]
            props = props * sizes / (props * sizes).sum()
        cuts = (np.cumsum(props) * len(idx)).astype(int)[:-1]
        for c, chunk in enumerate(np.split(idx, cuts)):
            parts[c] += chunk.tolist()
    return _ensure_nonempty(parts, rng)


def dirichlet_label(examples: list[Example], k: int, alpha: float, seed: int) -> list[list[int]]:
    """Label skew: the share of each (task, answer) class per client ~ Dir(α)."""
    return _dirichlet_by([f"{e.task}/{e.target}" for e in examples], k, alpha, seed)


def dirichlet_label_quantity(examples: list[Example], k: int, alpha: float, seed: int) -> list[list[int]]:
    """ELSA's setting: label skew Dir(α) per (task, answer) class, with quantity skew on top —
    client n's share of every class scaled by n + 1, so |D_n| ∝ n + 1 on average."""
    return _dirichlet_by([f"{e.task}/{e.target}" for e in examples], k, alpha, seed, np.arange(1, k + 1, dtype=float))


def dirichlet_domain(examples: list[Example], k: int, alpha: float, seed: int) -> list[list[int]]:
    """Domain skew: the share of each domain per client ~ Dir(α)."""
    return _dirichlet_by([e.domain for e in examples], k, alpha, seed)


def dirichlet_mix(examples: list[Example], k: int, alpha: float, seed: int) -> list[list[int]]:
    """Co-PLMs' domain skew: client i's mix over the D domains is q_i ~ Dir(α·1_D); its n_i ≈ N/k
    samples are drawn Multinomial(n_i, q_i) per domain, without replacement and no sample shared,
    clients in turn; draws a domain can no longer give go to the client's other domains in proportion to q_i."""
    rng = np.random.default_rng(seed)
    domains = sorted({e.domain for e in examples})
    pools = {d: rng.permutation([i for i, e in enumerate(examples) if e.domain == d]).tolist() for d in domains}
    parts: list[list[int]] = []
    for c in range(k):
        n = len(examples) // k + (c < len(examples) % k)      # sizes differ by at most one; all are drawn
        q = rng.dirichlet([alpha] * len(domains))
        take, short = [], 0
        for d, want in zip(domains, rng.multinomial(n, q)):
            take += pools[d][:want]
            short += max(0, want - len(pools[d]))
            pools[d] = pools[d][want:]
        while short > 0 and any(pools.values()):
            left = [j for j, d in enumerate(domains) if pools[domains[j]]]
            w = q[left] / q[left].sum() if q[left].sum() > 0 else np.full(len(left), 1 / len(left))
            take.append(pools[domains[int(rng.choice(left, p=w))]].pop(0))
            short -= 1
        parts.append(take)
    return _ensure_nonempty(parts, rng)


def domain_matched_test(train: list[Example], test: list[Example], n: int, seed: int) -> list[Example]:
    """Up to n items of `test` (one task's shared test set) drawn without replacement with probability ∝ how
    often their domain occurs in the client's training samples `train` of that task (its domain mix); items of
    domains the client never saw are not drawn."""
    rng = np.random.default_rng(seed)
    freq: dict[str, int] = {}
    for e in train:
        freq[e.domain] = freq.get(e.domain, 0) + 1
    w = np.array([freq.get(e.domain, 0) for e in test], dtype=float)
    size = min(n, int((w > 0).sum()))
    if size == 0:
        return []
    return [test[i] for i in sorted(rng.choice(len(test), size=size, replace=False, p=w / w.sum()).tolist())]


def quantity(examples: list[Example], k: int, alpha: float, seed: int) -> list[list[int]]:
    """Quantity skew: client sizes ∝ Dir(α), examples assigned at random."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(examples))
    props = rng.dirichlet([alpha] * k)
    cuts = (np.cumsum(props) * len(perm)).astype(int)[:-1]
    return _ensure_nonempty([c.tolist() for c in np.split(perm, cuts)], rng)


PARTITIONERS = {"iid": iid, "by_task": by_task, "dirichlet_label": dirichlet_label,
                "dirichlet_label_quantity": dirichlet_label_quantity, "dirichlet_domain": dirichlet_domain,
                "dirichlet_mix": dirichlet_mix, "quantity": quantity}


def partition(kind: str, examples: list[Example], k: int, alpha: float, seed: int,
              min_size: int = 1) -> list[list[int]]:
    """Client index lists from partitioner `kind`; with `min_size` > 1 every client is then topped up to that
    many examples from the largest clients (seeded apart from the partitioner, so min_size = 1 changes
    nothing)."""
    fn = PARTITIONERS[kind]
    parts = fn(examples, k, seed) if kind in ("iid", "by_task") else fn(examples, k, alpha, seed)
    if min_size > 1:
        parts = _ensure_nonempty([list(p) for p in parts], np.random.default_rng([seed, 1]), min_size)
    return parts
