"""Config of `fedavg` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.config import MethodConfig, check


@dataclass(frozen=True)
class FedAvgConfig(MethodConfig):
    name: str = "fedavg"
    weighting: str = "examples"      # examples | uniform

    def validate(self, p):
        check(self.weighting in ("examples", "uniform"), f"{p}.weighting", self.weighting,
              "'examples' or 'uniform'")
