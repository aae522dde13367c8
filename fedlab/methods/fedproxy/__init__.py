"""FedProxy: compress the LLM into a proxy SLM, federated LoRA on the proxy with PCR, H-TIES merging,
plug-in fusion back into the LLM (paper 000; SPEC.md §1)."""
