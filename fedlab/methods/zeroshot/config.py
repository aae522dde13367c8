"""Config of `zeroshot` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.validation import MethodConfig


@dataclass(frozen=True)
class ZeroShotConfig(MethodConfig):
    name: str = "zeroshot"
    heterogeneous_clients: ClassVar[bool] = True   # nothing is exchanged
