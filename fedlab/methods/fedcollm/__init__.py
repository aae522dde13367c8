"""FedCoLLM: the devices' SLM LoRAs go to the server, which runs mutual knowledge distillation between its
LLM and the SLMs on its own data and sends each device its distilled LoRA back (the Co-PLMs paper's
baseline; fedlab/methods/fedcollm/README.md)."""
from fedlab.methods.fedcollm.config import FedCoLLMConfig
from fedlab.registry import register_method

register_method("fedcollm", FedCoLLMConfig, "fedlab.methods.fedcollm.method:FedCoLLM")
