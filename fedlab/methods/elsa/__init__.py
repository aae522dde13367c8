"""ELSA (paper 002): split learning inside hierarchical FL — fingerprint trust, latency-aware edges, count-sketch
and SS-OP compression of the activations crossing the client–edge link (README.md). Its building blocks are in
`fedlab.splitfed`; this package drives them."""
from fedlab.methods.elsa.config import ElsaConfig
from fedlab.registry import register_method

register_method("elsa", ElsaConfig, "fedlab.methods.elsa.method:Elsa", "fedlab.methods.elsa.client:ElsaClient")
