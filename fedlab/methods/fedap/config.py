"""Config of `fedap` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import check


@dataclass(frozen=True)
class FedAPConfig(FedAvgConfig):
    """Bottleneck adapters (hidden size ⌈width·d⌉) instead of LoRA; the base stays frozen; FedAvg over the
    adapters. model.lora is not used."""
    name: str = "fedap"
    width: float = 0.0625          # d/16: about the parameters of LoRA r=8 on the attention projections
    fixed: ClassVar[tuple[str, ...]] = ("aggregator",)
    general: ClassVar[str] = "fedavg"

    def validate(self, p):
        super().validate(p)
        check(0 < self.width <= 4, f"{p}.width", self.width, "a fraction of the hidden size in (0, 4]")
