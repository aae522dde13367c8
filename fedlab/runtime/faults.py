"""Fault injection by config (`faults:`): the same faults on every backend, applied where a real one
would happen — before a client's fit (raise, hang, die) or to what it uploads (the rest)."""
from __future__ import annotations

import dataclasses
import os
import threading
import time

import torch


class InjectedFault(RuntimeError):
    pass


class FaultInjector:
    def __init__(self, faults, num_clients: int):
        self.faults = list(faults or [])
        self.num_clients = num_clients

    def _matching(self, cid: int, rnd: int):
        return [f for f in self.faults if f.client == cid and (f.round is None or f.round == rnd)]

    def before_fit(self, cid: int, rnd: int, cancel: threading.Event | None = None) -> None:
        for f in self._matching(cid, rnd):
            if f.kind == "raise":
                raise InjectedFault(f"injected fault: client {cid} raised in round {rnd}")
            if f.kind == "hang":
                # an abandoned in-process call is woken by `cancel` and ends without touching the model
                if cancel is not None:
                    if cancel.wait(f.seconds):
                        raise InjectedFault(f"client {cid} was abandoned after its timeout in round {rnd}")
                else:
                    time.sleep(f.seconds)
            if f.kind == "die":
                os._exit(17)   # the worker process disappears without a word, as a killed node would

    def after_fit(self, cid: int, ins, res):
        faults = self._matching(cid, ins.round)
        if not faults:
            return res
        # corrupt a copy: the client's own record of its state stays intact
        res = dataclasses.replace(res, state=dict(res.state) if res.state is not None else None,
                                  aux=dict(res.aux) if res.aux is not None else None)
        for f in faults:
            state = res.state if res.state is not None else res.aux
            if f.kind == "nan" and state:
                key = next(iter(state))
                state[key] = state[key].clone().float()
                state[key].view(-1)[0] = float("nan")
            elif f.kind == "wrong_keys" and state:
                key = next(iter(state))
                state[key + ".unexpected"] = state.pop(key)
            elif f.kind == "wrong_shape" and state:
                key = next(iter(state))
                state[key] = state[key].reshape(-1)[:-1].clone()
            elif f.kind == "stale_round":
                res.round = ins.round - 1
            elif f.kind == "duplicate":
                res.cid = (cid + 1) % max(1, self.num_clients)
            elif f.kind == "sign_flip" and res.state is not None and ins.state is not None:
                res.state = {k: ins.state[k] - f.scale * (v - ins.state[k]) for k, v in res.state.items()}
        return res


def nonfinite_keys(state: dict | None) -> list[str]:
    return [k for k, v in (state or {}).items()
            if torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all())]
