"""Config of `zeroshot` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.config import MethodConfig


@dataclass(frozen=True)
class ZeroShotConfig(MethodConfig):
    name: str = "zeroshot"
