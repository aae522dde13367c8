"""Config of `standalone` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.config import MethodConfig


@dataclass(frozen=True)
class StandaloneConfig(MethodConfig):
    name: str = "standalone"
