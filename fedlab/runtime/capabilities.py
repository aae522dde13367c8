"""The backends a run may use, and what each can do: a registry that a third backend joins with
`register_backend`, and that the rest of fedlab asks (`capable`) instead of comparing backend names. Light: config
validation imports it.

Capabilities: "worker_processes" (clients run in worker processes that can be lost: the `die` fault),
"remote_parties" (a method's extra parties run as named actors of their own, `fedlab.runtime.parties`),
"cluster" (it joins a cluster at `backend.address`), "owns_cores" (it schedules its workers on the machine's cores
itself: runs beside it are not added), "evaluation_beside" (`eval.overlap` may score in a second process)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class BackendSpec:
    name: str
    target: str                 # "module:Class" of the backend, imported when a run makes one
    capabilities: frozenset[str]


BACKENDS: dict[str, BackendSpec] = {}


def register_backend(name: str, target: str, capabilities) -> None:
    """Make a backend available as `backend.name: <name>`."""
    BACKENDS[name] = BackendSpec(name, target, frozenset(capabilities))


register_backend("inprocess", "fedlab.runtime.backends:InProcessBackend", {"evaluation_beside"})
register_backend("ray", "fedlab.runtime.backends:RayBackend",
                 {"worker_processes", "remote_parties", "cluster", "owns_cores"})


def capable(cfg, capability: str) -> bool:
    """Whether the config's backend has `capability`."""
    return capability in BACKENDS[cfg.backend.name].capabilities


def make_backend(cfg):
    module, cls = BACKENDS[cfg.backend.name].target.split(":")
    return getattr(importlib.import_module(module), cls)()
