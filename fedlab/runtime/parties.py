"""Extra parties a method needs beside its clients (edge servers, say): started through the run's backend, reached
by name from anywhere in the run. On a backend that runs parties in their own processes (Ray) each is a named
actor, and tensors cross as numpy arrays both ways; otherwise it is an object in this process. A method never
knows which: it starts parties with `start`, calls them through `PartyHandle(name).call(method, *args)` and stops
them with `stop`."""
from __future__ import annotations

import numpy as np
import torch

_LOCAL: dict[str, object] = {}
_REMOTE: dict[str, object] = {}     # the creator's handles: a named actor lives as long as one is held


def to_wire(x):
    """Tensors as numpy arrays, recursively (dicts, tuples, lists)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, dict):
        return {k: to_wire(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(to_wire(v) for v in x)
    return x


def from_wire(x):
    """Numpy arrays as tensors, recursively."""
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    if isinstance(x, dict):
        return {k: from_wire(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(from_wire(v) for v in x)
    return x


class _RemoteParty:
    """A party in its own process: built there from the config's mapping; it takes tensors (the arrays that
    arrive, back as tensors) and answers in numpy arrays, so the party's own code sees tensors on every backend."""

    def __init__(self, cls, cfg_tree, args, payload):
        from fedlab.config import build_config

        self.obj = cls(build_config(cfg_tree), *args, payload=payload)

    def ready(self) -> bool:
        return True

    def call(self, method: str, *args):
        return to_wire(getattr(self.obj, method)(*from_wire(args)))


def start(cfg, cls, parties: dict[str, tuple], payload=None) -> None:
    """Start one party of class `cls` per name, built as `cls(cfg, *args)` (with `payload=payload()` in their own
    processes: what a remote party needs to rebuild its model without a disk)."""
    from fedlab.runtime.capabilities import capable

    if not capable(cfg, "remote_parties"):
        for name, args in parties.items():
            _LOCAL[name] = cls(cfg, *args)
        return
    import ray

    shared = ray.put(payload()) if payload is not None else None
    actors = {name: ray.remote(_RemoteParty).options(name=name, num_cpus=0).remote(cls, cfg.to_dict(), args, shared)
              for name, args in parties.items()}
    ray.get([a.ready.remote() for a in actors.values()])
    _REMOTE.update(actors)


def put(name: str, obj) -> None:
    """Make `obj` reachable as party `name` in this process (a test or a benchmark driving one party itself)."""
    _LOCAL[name] = obj


def stop(names) -> None:
    for name in names:
        _LOCAL.pop(name, None)
        actor = _REMOTE.pop(name, None)
        if actor is not None:
            import ray

            ray.kill(actor)


class PartyHandle:
    """How a client (or the server) reaches a party by name: the object in this process, or its actor."""

    def __init__(self, name: str):
        self.name = name
        self.local = _LOCAL.get(name)
        if self.local is None:
            import ray

            self.actor = _REMOTE.get(name) or ray.get_actor(name)

    def call(self, method: str, *args):
        if self.local is not None:
            return getattr(self.local, method)(*args)
        import ray

        return from_wire(ray.get(self.actor.call.remote(method, *to_wire(args))))
