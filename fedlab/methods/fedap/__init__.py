"""FedAP: FedAvg over bottleneck adapters after each block's attention and feed-forward sublayers (the
Co-PLMs paper's adapter baseline; fedlab/methods/fedap/README.md)."""
from fedlab.methods.fedap.config import FedAPConfig
from fedlab.registry import register_method

register_method("fedap", FedAPConfig, "fedlab.methods.fedap.method:FedAP")
