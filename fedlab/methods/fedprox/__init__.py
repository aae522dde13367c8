"""FedProx: FedAvg on the server; the client adds (μ/2)‖φ − φ^(t)‖² to its loss."""
from fedlab.methods.fedprox.config import FedProxConfig
from fedlab.registry import register_method

# the server side of FedProx is FedAvg; its difference is the client objective
register_method("fedprox", FedProxConfig, "fedlab.methods.fedavg.method:FedAvg",
                client_cls="fedlab.methods.fedprox.client:FedProxClient")
