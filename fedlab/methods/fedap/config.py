"""Config of `fedap` (light: imported by config validation)."""
from dataclasses import dataclass
from typing import ClassVar

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import METHOD_NAME_HELP, check, doc


@dataclass(frozen=True)
class FedAPConfig(FedAvgConfig):
    """Bottleneck adapters (hidden size ⌈width·d⌉) instead of LoRA; the base stays frozen; FedAvg over the
    adapters. model.lora is not used."""
    name: str = doc("fedap", METHOD_NAME_HELP)
    width: float = doc(0.0625, "hidden size of each bottleneck adapter as a fraction of the model width d "
                               "(⌈width·d⌉; d/16: about the parameters of LoRA r=8 on the attention projections)")
    fixed: ClassVar[tuple[str, ...]] = ("aggregator",)
    general: ClassVar[str] = "fedavg"

    def validate(self, p):
        super().validate(p)
        check(0 < self.width <= 4, f"{p}.width", self.width, "a fraction of the hidden size in (0, 4]")
