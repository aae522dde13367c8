"""Backends run client work: `InProcessBackend` in the driver, one client after another; `RayBackend` on
long-lived stateful actors, each hosting several clients when clients outnumber workers. Both yield, per
client and in the order the answers arrive, a result or a `ClientFailure`, and give the same numbers for
the same seed."""
from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Iterator
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
from fedlab.interrupt import Interrupted
from fedlab.runtime.faults import InjectedFault
from fedlab.runtime.host import ClientHost


class Backend(Protocol):
    name: str

    def start(self, cfg, num_clients: int) -> None: ...

    def stream(self, kind: str, instructions: dict[int, FitIns | EvalIns]) -> Iterator[tuple[int, object]]:
        """Send `kind` ("fit" or "evaluate") instructions; yield (client id, result or ClientFailure) as
        the answers arrive."""

    def get_client_states(self) -> dict: ...

    def describe(self) -> dict:
        """Where the clients run: {"workers": …, "nodes": …}."""

    def set_client_states(self, states: dict) -> None: ...

    def shutdown(self) -> None: ...


def _one_line(e: BaseException) -> str:
    cause = getattr(e, "cause", None) or e   # a RayTaskError carries the client's own exception
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"


class InProcessBackend:
    """Clients run one after another in the driver. With `federation.client_timeout` each fit runs in a
    helper thread that the server stops waiting for after the timeout; the abandoned call is signalled to
    stop (an injected hang ends at once; real compute cannot be interrupted in-process — use Ray, whose
    hung workers are killed and restarted)."""
    name = "inprocess"

    def start(self, cfg, num_clients: int) -> None:
        self.cfg = cfg
        self.host = ClientHost(cfg, list(range(num_clients)))

    def _timed_fit(self, cid: int, ins, timeout: float):
        box: dict = {}
        cancel = threading.Event()

        def work():
            try:
                box["result"] = self.host.fit(cid, ins, cancel)
            except BaseException as e:  # handed to the caller below
                box["error"] = e

        t = threading.Thread(target=work, name=f"fedlab-client-{cid}", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            cancel.set()
            raise TimeoutError(f"client {cid} did not answer within federation.client_timeout={timeout}s")
        if "error" in box:
            raise box["error"]
        return box["result"]

    def describe(self) -> dict:
        return {"workers": 1, "nodes": 1}

    def stream(self, kind: str, instructions: dict):
        """Runs each client when its answer is asked for (in the instructions' order)."""
        timeout = self.cfg.federation.client_timeout
        for cid, ins in instructions.items():
            try:
                if kind == "fit" and timeout:
                    out = self._timed_fit(cid, ins, timeout)
                else:
                    out = getattr(self.host, kind)(cid, ins)
            except Interrupted:     # a second signal stops at once: never a client failure of a round that goes on
                raise
            except Exception as e:  # a client that raises is reported, the round policy decides
                if not isinstance(e, (TimeoutError, InjectedFault)):
                    traceback.print_exc()
                out = ClientFailure(cid, ins.round, _one_line(e))
            yield cid, out

    def get_client_states(self):
        return {cid: self.host.client_state(cid) for cid in self.host.clients}

    def set_client_states(self, states):
        for cid, s in states.items():
            self.host.set_client_state(cid, s)

    def shutdown(self) -> None:
        pass


class _HostActor:
    """A Ray actor wrapping a ClientHost; states cross as numpy arrays. The config arrives as a plain
    mapping and is rebuilt here, after the config's plugins are imported (a plugin method's config class
    could not be unpickled before)."""

    def __init__(self, cfg_tree, cids, payloads):
        import ray

        from fedlab.config import build_config

        cfg = build_config(cfg_tree)
        # base-model payloads arrive as object refs inside a dict: fetch each from the object store once
        payloads = {k: ray.get(v) if isinstance(v, ray.ObjectRef) else v for k, v in payloads.items()}
        self.host = ClientHost(cfg, cids, payloads)

    def ready(self):
        return True

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

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
    """Clients on long-lived Ray actors (`backend.num_workers`), each hosting several clients when they
    outnumber the workers. A worker that dies, or does not answer within `federation.client_timeout`
    (counted from dispatch, for the round's answers), costs the round the answers of its clients; it is
    killed if needed and recreated — with its clients' last checkpointed states — before the next call."""
    name = "ray"

    def start(self, cfg, num_clients: int) -> None:
        import ray

        from fedlab.runtime.cluster import connect
        from fedlab.runtime.resident import base_payload

        self.cfg = cfg
        bc = cfg.backend
        connect(bc.address, bc.num_cpus)
        # the frozen base weights go through the object store once; every actor reads the same copy
        n = min(bc.num_workers, num_clients)
        self.owner = {cid: cid % n for cid in range(num_clients)}
        self.members = {w: [c for c in range(num_clients) if c % n == w] for w in range(n)}
        names = sorted({cfg.model.client_model(c) for c in range(num_clients)})
        self.payload_refs = {name: ray.put(base_payload(name)) for name in names}
        self.last_states: dict = {}
        self.actors = [self._new_actor(w) for w in range(n)]
        self.dead: set[int] = set()
        ray.get([a.ready.remote() for a in self.actors])
        self.nodes = ray.get([a.node.remote() for a in self.actors])

    def describe(self) -> dict:
        return {"workers": len(self.actors), "nodes": len(set(self.nodes))}

    def _new_actor(self, w: int):
        import ray

        bc = self.cfg.backend
        mine = self.members[w]
        payloads = {name: self.payload_refs[name] for name in {self.cfg.model.client_model(c) for c in mine}}
        return ray.remote(_HostActor).options(num_cpus=bc.cpus_per_worker, num_gpus=bc.gpus_per_worker).remote(
            self.cfg.to_dict(), mine, payloads)

    def _restart_dead(self) -> None:
        import ray

        for w in sorted(self.dead):
            try:
                ray.kill(self.actors[w])
            except Exception:  # already gone
                pass
            self.actors[w] = self._new_actor(w)
            states = {c: to_wire(self.last_states[c]) for c in self.members[w] if self.last_states.get(c) is not None}
            ray.get(self.actors[w].set_states.remote(states))
            print(f"[fedlab] recreated worker {w} (clients {self.members[w]})", file=sys.stderr, flush=True)
        self.dead.clear()

    def stream(self, kind: str, instructions: dict):
        """Dispatches every instruction now; the returned iterator yields answers in the order they finish."""
        import ray

        self._restart_dead()
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
        timeout = self.cfg.federation.client_timeout if kind == "fit" else None
        return self._answers(refs, instructions, timeout)

    def _answers(self, refs: dict, instructions: dict, timeout: float | None):
        import ray
        from ray.exceptions import RayActorError

        deadline = None if timeout is None else time.monotonic() + timeout
        by_ref = {ref: cid for cid, ref in refs.items()}
        waiting = list(refs.values())
        while waiting:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=left)
            if not ready:   # past the deadline: every client still out is hung
                for ref in waiting:
                    cid = by_ref[ref]
                    self.dead.add(self.owner[cid])   # a hung worker is killed and replaced before the next call
                    yield cid, ClientFailure(cid, instructions[cid].round,
                                             f"TimeoutError: no answer within federation.client_timeout={timeout}s")
                return
            cid = by_ref[ready[0]]
            w = self.owner[cid]
            try:
                out = msg_from_wire(ray.get(ready[0]))
            except Interrupted:
                raise
            except RayActorError as e:
                self.dead.add(w)
                why = "its process exited" if "worker process has died" in str(e) else _one_line(e)[:200]
                out = ClientFailure(cid, instructions[cid].round, f"WorkerDied: worker {w} died ({why})")
            except Exception as e:
                out = ClientFailure(cid, instructions[cid].round, _one_line(e))
            yield cid, out

    def get_client_states(self):
        import ray

        self._restart_dead()
        out = {}
        for states in ray.get([a.get_states.remote() for a in self.actors]):
            out.update({cid: from_wire(s) for cid, s in states.items()})
        self.last_states = dict(out)
        return out

    def set_client_states(self, states):
        import ray

        self.last_states = dict(states)
        for w, actor in enumerate(self.actors):
            mine = {cid: to_wire(s) for cid, s in states.items() if self.owner[cid] == w}
            ray.get(actor.set_states.remote(mine))

    def shutdown(self) -> None:
        import ray

        for a in getattr(self, "actors", []):
            try:
                ray.kill(a)
            except Exception:  # already dead
                pass
        self.actors = []


def make_backend(cfg) -> Backend:
    """The config's backend, from the registry (`fedlab.runtime.capabilities`)."""
    from fedlab.runtime.capabilities import make_backend as make

    return make(cfg)
