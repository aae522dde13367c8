"""Centralized (CentSFT): LoRA on the pooled data of all clients, evaluated on every client's tasks."""
from fedlab.methods.centralized.config import CentralizedConfig
from fedlab.registry import register_method

register_method("centralized", CentralizedConfig, "fedlab.methods.centralized.method:Centralized",
                client_cls="fedlab.methods.client:PooledClient")
