"""FedMKT: selective mutual knowledge transfer between a server LLM and heterogeneous client SLMs through
top-K logits on a public set, with cross-tokenizer alignment and DualMinCE (paper 001;
fedlab/methods/fedmkt/README.md)."""
from fedlab.methods.fedmkt.config import FedMKTConfig, LLM2SLMConfig
from fedlab.registry import register_method

register_method("fedmkt", FedMKTConfig, "fedlab.methods.fedmkt.method:FedMKT",
                client_cls="fedlab.methods.fedmkt.client:FedMKTClient")
register_method("llm2slm", LLM2SLMConfig, "fedlab.methods.fedmkt.method:FedMKT",
                client_cls="fedlab.methods.fedmkt.client:FedMKTClient")
