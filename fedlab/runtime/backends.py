"""Backends run client work: `InProcessBackend` in the driver, one client after another; `RayBackend` on
long-lived stateful actors, each hosting several clients when clients outnumber workers. Both return,
per client, a result or a `ClientFailure`, and give the same numbers for the same seed."""
from __future__ import annotations

import traceback
from typing import Protocol

from fedlab.comm.messages import (
    ClientFailure,
    EvalIns,
    FitIns,
    from_wire,
    msg_from_wire,
    msg_to_wire,
    to_wire,
)
from fedlab.runtime.client import ClientHost


class Backend(Protocol):
    name: str

    def start(self, cfg, num_clients: int) -> None: ...

    def fit(self, instructions: dict[int, FitIns]) -> dict: ...

    def evaluate(self, instructions: dict[int, EvalIns]) -> dict: ...

    def get_client_states(self) -> dict: ...

    def set_client_states(self, states: dict) -> None: ...

    def shutdown(self) -> None: ...


def _one_line(e: BaseException) -> str:
    cause = getattr(e, "cause", None) or e   # a RayTaskError carries the client's own exception
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"


class InProcessBackend:
    name = "inprocess"

    def start(self, cfg, num_clients: int) -> None:
        self.host = ClientHost(cfg, list(range(num_clients)))

    def _call(self, kind: str, instructions: dict) -> dict:
        out = {}
        for cid, ins in instructions.items():
            try:
                out[cid] = getattr(self.host, kind)(cid, ins)
            except Exception as e:  # a client that raises is reported, the round policy decides
                traceback.print_exc()
                out[cid] = ClientFailure(cid, ins.round, _one_line(e))
        return out

    def fit(self, instructions):
        return self._call("fit", instructions)

    def evaluate(self, instructions):
        return self._call("evaluate", instructions)

    def get_client_states(self):
        return {cid: self.host.client_state(cid) for cid in self.host.clients}

    def set_client_states(self, states):
        for cid, s in states.items():
            self.host.set_client_state(cid, s)

    def shutdown(self) -> None:
        pass


class _HostActor:
    """A Ray actor wrapping a ClientHost; states cross as numpy arrays."""

    def __init__(self, cfg, cids, payloads):
        import ray

        # base-model payloads arrive as object refs inside a dict: fetch each from the object store once
        payloads = {k: ray.get(v) if isinstance(v, ray.ObjectRef) else v for k, v in payloads.items()}
        self.host = ClientHost(cfg, cids, payloads)

    def ready(self):
        return True

    # the state arrives as its own (top-level) argument: Ray resolves top-level object refs only
    def fit(self, cid, ins, state):
        ins = msg_from_wire(ins)
        ins.state = from_wire(state)
        return msg_to_wire(self.host.fit(cid, ins))

    def evaluate(self, cid, ins, state):
        ins.state = from_wire(state)
        return self.host.evaluate(cid, ins)

    def get_states(self):
        return {cid: to_wire(self.host.client_state(cid)) for cid in self.host.clients}

    def set_states(self, states):
        for cid, s in states.items():
            self.host.set_client_state(cid, from_wire(s))


class RayBackend:
    name = "ray"

    def start(self, cfg, num_clients: int) -> None:
        import ray

        from fedlab.runtime.resident import base_payload

        self.cfg = cfg
        bc = cfg.backend
        if not ray.is_initialized():
            if bc.address:
                ray.init(address=bc.address, include_dashboard=False, log_to_driver=True,
                         logging_level="ERROR")
            else:
                ray.init(num_cpus=bc.num_cpus, include_dashboard=False, logging_level="ERROR",
                         log_to_driver=True)
        # the frozen base weights go through the object store once; every actor reads the same copy
        n = min(bc.num_workers, num_clients)
        self.owner = {cid: cid % n for cid in range(num_clients)}
        names = sorted({cfg.model.client_model(c) for c in range(num_clients)})
        refs = {name: ray.put(base_payload(name)) for name in names}
        actor_cls = ray.remote(_HostActor)
        self.actors = []
        for w in range(n):
            mine = [c for c in range(num_clients) if c % n == w]
            payloads = {name: refs[name] for name in {cfg.model.client_model(c) for c in mine}}
            self.actors.append(actor_cls.options(num_cpus=bc.cpus_per_worker, num_gpus=bc.gpus_per_worker)
                               .remote(cfg, mine, payloads))
        ray.get([a.ready.remote() for a in self.actors])

    def _call(self, kind: str, instructions: dict) -> dict:
        import ray

        refs = {}
        shared = {}
        for cid, ins in instructions.items():
            state_ref = None
            if ins.state is not None:  # one object-store copy per distinct state, not one per client
                key = id(ins.state)
                if key not in shared:
                    shared[key] = ray.put(to_wire(ins.state))
                state_ref = shared[key]
            bare = msg_to_wire(type(ins)(**{**ins.__dict__, "state": None}))
            refs[cid] = getattr(self.actors[self.owner[cid]], kind).remote(cid, bare, state_ref)
        timeout = self.cfg.federation.client_timeout
        out = {}
        for cid, ref in refs.items():
            try:
                res = ray.get(ref, timeout=timeout)
                out[cid] = msg_from_wire(res)
            except Exception as e:
                out[cid] = ClientFailure(cid, instructions[cid].round, _one_line(e))
        return out

    def fit(self, instructions):
        return self._call("fit", instructions)

    def evaluate(self, instructions):
        return self._call("evaluate", instructions)

    def get_client_states(self):
        import ray

        out = {}
        for states in ray.get([a.get_states.remote() for a in self.actors]):
            out.update({cid: from_wire(s) for cid, s in states.items()})
        return out

    def set_client_states(self, states):
        import ray

        for w, actor in enumerate(self.actors):
            mine = {cid: to_wire(s) for cid, s in states.items() if self.owner[cid] == w}
            ray.get(actor.set_states.remote(mine))

    def shutdown(self) -> None:
        import ray

        for a in getattr(self, "actors", []):
            ray.kill(a)
        self.actors = []


def make_backend(cfg) -> Backend:
    return RayBackend() if cfg.backend.name == "ray" else InProcessBackend()
