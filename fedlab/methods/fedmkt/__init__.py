"""FedMKT: selective mutual knowledge transfer between a server LLM and heterogeneous client SLMs through
top-K logits on a public set, with cross-tokenizer alignment and DualMinCE (paper 001; SPEC.md §2)."""
