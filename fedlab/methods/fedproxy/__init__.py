"""FedProxy: compress the LLM into a proxy SLM, federated LoRA on the proxy with PCR, H-TIES merging,
plug-in fusion back into the LLM (paper 000; fedlab/methods/fedproxy/README.md)."""
from fedlab.methods.fedproxy.config import (
    FedBiOTConfig,
    FedOTETConfig,
    FedProxyConfig,
    OffsiteConfig,
    OTConfig,
    TiesConfig,
)
from fedlab.registry import register_method

_CLIENT = "fedlab.methods.fedproxy.client:FedProxyClient"
register_method("fedproxy", FedProxyConfig, "fedlab.methods.fedproxy.method:FedProxy", _CLIENT)
register_method("ties", TiesConfig, "fedlab.methods.fedproxy.method:FedProxy", _CLIENT)
for _cfg in (OTConfig, OffsiteConfig, FedBiOTConfig, FedOTETConfig):
    register_method(_cfg.name, _cfg, "fedlab.methods.fedproxy.offsite:OffsiteTuning", _CLIENT)
