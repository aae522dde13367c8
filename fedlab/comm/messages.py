"""Everything that crosses a client boundary: dataclasses of CPU tensors, a small config dict and metrics,
each measurable in bytes. On the wire (Ray) tensors travel as numpy arrays, which Ray serialises
out-of-band without torch's slower pickling."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

State = dict  # str -> torch.Tensor


def state_nbytes(state: Optional[State]) -> int:
    if not state:
        return 0
    return sum(v.numel() * v.element_size() for v in state.values())


def _small_nbytes(obj: dict | None) -> int:
    """Bytes of a small dict as sent: its keys, 8 bytes per number, JSON text for anything else (so the
    count does not depend on how many digits a float happens to print with)."""
    if not obj:
        return 0
    total = 0
    for k, v in obj.items():
        total += len(str(k).encode())
        total += 8 if isinstance(v, (int, float, bool)) else len(json.dumps(v, default=str).encode())
    return total


@dataclass
class FitIns:
    round: int
    state: Optional[State] = None          # None: the client continues from its own state
    config: dict = field(default_factory=dict)
    aux: Optional[State] = None            # tensors sent beside the state (e.g. FedProxy's conflict scores)

    def nbytes(self) -> int:
        return state_nbytes(self.state) + state_nbytes(self.aux) + _small_nbytes(self.config)


@dataclass
class FitRes:
    cid: int
    round: int
    state: Optional[State]
    num_examples: int
    metrics: dict = field(default_factory=dict)
    aux: Optional[State] = None            # tensors sent beside (or instead of) the state, e.g. FedMKT knowledge

    def nbytes(self) -> int:
        return state_nbytes(self.state) + state_nbytes(self.aux) + _small_nbytes(self.metrics) + 8


@dataclass
class EvalIns:
    round: int
    state: Optional[State] = None
    config: dict = field(default_factory=dict)

    def nbytes(self) -> int:
        return state_nbytes(self.state) + _small_nbytes(self.config)


@dataclass
class EvalRes:
    cid: int
    round: int
    metrics: dict                          # "acc/<task>" and "n/<task>" for the client's tasks

    def nbytes(self) -> int:
        return _small_nbytes(self.metrics)


@dataclass
class ClientFailure:
    cid: int
    round: int
    error: str


def to_wire(state: Optional[State]):
    if state is None:
        return None
    return {k: (v.detach().cpu().numpy(), str(v.dtype)) for k, v in state.items()}


def from_wire(wire) -> Optional[State]:
    if wire is None:
        return None
    return {k: torch.from_numpy(np.array(a, copy=True)) for k, (a, _) in wire.items()}


_TENSOR_FIELDS = ("state", "aux")


def msg_to_wire(msg):
    """A copy of a message whose tensor fields are numpy arrays (for Ray)."""
    changes = {f: to_wire(getattr(msg, f)) for f in _TENSOR_FIELDS if getattr(msg, f, None) is not None}
    return type(msg)(**{**msg.__dict__, **changes}) if changes else msg


def msg_from_wire(msg):
    changes = {f: from_wire(getattr(msg, f)) for f in _TENSOR_FIELDS if getattr(msg, f, None) is not None}
    return type(msg)(**{**msg.__dict__, **changes}) if changes else msg
