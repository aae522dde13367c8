"""Config of `standalone` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.validation import METHOD_NAME_HELP, MethodConfig, doc


@dataclass(frozen=True)
class StandaloneConfig(MethodConfig):
    name: str = doc("standalone", METHOD_NAME_HELP)
    heterogeneous_clients: ClassVar[bool] = True   # nothing is exchanged
