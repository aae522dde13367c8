"""LLM-FedAvg: FedAvg of the SLM's LoRA, then proxy inference of the cloud LLM (Floe's baseline)."""
from fedlab.methods.llm_fedavg.config import LLMFedAvgConfig
from fedlab.registry import register_method

register_method("llm_fedavg", LLMFedAvgConfig, "fedlab.methods.llm_fedavg.method:LLMFedAvg")
