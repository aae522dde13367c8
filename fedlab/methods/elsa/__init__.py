"""ELSA (paper 002): split learning inside hierarchical FL — fingerprint trust, latency-aware edges, count-sketch
and SS-OP compression of the activations crossing the client–edge link (README.md). Every part is here: trust
(`trust.py`), topology (`topology.py`), grouping under edges (`grouping.py`), the communication model of Eq. 14–15
(`comm_model.py`), the privacy evaluation of Table 4 (`privacy_eval.py`), one split step (`split_step.py`), the
hierarchical aggregation (`aggregate.py`), FedCAda's client optimiser (`fedcada.py`), the models, the link's
codec, the edge, the client and the round; the count sketch and SS-OP (`fedlab.comm`) and the fingerprints
(`fedlab.clustering`) are kernels other code may use."""
from fedlab.methods.elsa.config import ElsaConfig
from fedlab.registry import register_method

register_method("elsa", ElsaConfig, "fedlab.methods.elsa.method:Elsa", "fedlab.methods.elsa.client:ElsaClient")
