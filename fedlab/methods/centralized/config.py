"""Config of `centralized` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.validation import MethodConfig


@dataclass(frozen=True)
class CentralizedConfig(MethodConfig):
    name: str = "centralized"
    # also train on the public set (FedMKT's Centralized baseline: all private data + the public data)
    include_public: bool = False
