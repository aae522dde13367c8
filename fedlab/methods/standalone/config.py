"""Config of `standalone` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.validation import MethodConfig


@dataclass(frozen=True)
class StandaloneConfig(MethodConfig):
    name: str = "standalone"
    heterogeneous_clients: ClassVar[bool] = True   # nothing is exchanged
