"""Model → model transforms that declare what they make trainable and what is communicated."""
from fedlab.transforms.lora import AdapterSpec, apply_lora, get_state, set_state

__all__ = ["AdapterSpec", "apply_lora", "get_state", "set_state"]
