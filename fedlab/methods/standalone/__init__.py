"""Standalone: each client fine-tunes its own LoRA on its own data; nothing is aggregated."""
from fedlab.methods.standalone.config import StandaloneConfig
from fedlab.registry import register_method

register_method("standalone", StandaloneConfig, "fedlab.methods.standalone.method:Standalone")
