"""FedAvg: clients fine-tune LoRA from the global state; the server averages the updates weighted by
the clients' example counts."""
from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.registry import register_method

register_method("fedavg", FedAvgConfig, "fedlab.methods.fedavg.method:FedAvg")
