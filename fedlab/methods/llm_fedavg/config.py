"""Config of `llm_fedavg` (light: imported by config validation)."""
from dataclasses import dataclass

from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.validation import METHOD_NAME_HELP, check, doc


@dataclass(frozen=True)
class LLMFedAvgConfig(FedAvgConfig):
    """Floe's LLM-FedAvg baseline (paper 003 §V): FedAvg of the devices' SLM LoRA with equal weights, then
    proxy inference of the cloud LLM: logits = LLM(x) + SLM_LoRA(x) − SLM(x). `llm` must share the SLM's
    tokenizer (model.name)."""
    name: str = doc("llm_fedavg", METHOD_NAME_HELP)
    weighting: str = doc("uniform", "weights of the client updates in the mean: uniform (equal weights, the "
                                    "baseline's) | examples (by each client's example count)")
    llm: str = doc("tiny-llama", "the cloud LLM proxy-tuned at inference by the averaged SLM LoRA (LLM + SLM_LoRA − "
                                 "SLM); must share model.name's tokenizer")

    def validate(self, p):
        super().validate(p)
        check(bool(self.llm), f"{p}.llm", self.llm, "a model name sharing model.name's tokenizer")
