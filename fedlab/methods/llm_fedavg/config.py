"""Config of `llm_fedavg` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import check


@dataclass(frozen=True)
class LLMFedAvgConfig(FedAvgConfig):
    """Floe's LLM-FedAvg baseline (paper 003 §V): FedAvg of the devices' SLM LoRA with equal weights, then
    proxy inference of the cloud LLM: logits = LLM(x) + SLM_LoRA(x) − SLM(x). `llm` must share the SLM's
    tokenizer (model.name)."""
    name: str = "llm_fedavg"
    weighting: str = "uniform"
    llm: str = "tiny-llama"

    def validate(self, p):
        super().validate(p)
        check(bool(self.llm), f"{p}.llm", self.llm, "a model name sharing model.name's tokenizer")
