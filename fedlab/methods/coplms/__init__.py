"""Co-PLMs: a distilled proxy model with domain adapters between the server's LLM and the devices' SLMs,
structure-agnostic mutual learning with top-K pooled KL (paper 004; fedlab/methods/coplms/README.md)."""
from fedlab.methods.coplms.config import CoPLMsConfig, CoPLMsNoDSTConfig, CoPLMsNoSAMLConfig
from fedlab.registry import register_method

for _cfg in (CoPLMsConfig, CoPLMsNoDSTConfig, CoPLMsNoSAMLConfig):
    register_method(_cfg.name, _cfg, "fedlab.methods.coplms.method:CoPLMs", "fedlab.methods.coplms.client:CoPLMsClient")
