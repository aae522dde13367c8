"""Reproducible seeds: every random choice derives from (run seed, purpose, round, client)."""
from __future__ import annotations

import hashlib
import random

import numpy as np
import torch


def derive_seed(*parts) -> int:
    """A 31-bit seed from any tuple of parts (stable across processes, unlike hash())."""
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
