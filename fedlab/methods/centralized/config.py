"""Config of `centralized` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, doc


@dataclass(frozen=True)
class CentralizedConfig(MethodConfig):
    name: str = doc("centralized", METHOD_NAME_HELP)
    include_public: bool = doc(False, "also train on the public set (FedMKT's Centralized baseline: all private data "
                                      "+ the public data)")
